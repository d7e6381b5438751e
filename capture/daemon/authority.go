package daemon

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/capture/vrrp"
)

// On premises a node may hold captures only while keepalived says it is
// VRRP master (the capture design's authority). Two mechanisms carry that:
//
//   - locally, pools() marks this node drained whenever it is not master,
//     whatever the federation says, so the planner releases within one
//     pass even when no peer can be told (fail-closed);
//   - for the group, each state change is published as this node's drain
//     (backup, fault, stop) or undrain (master), so that every node's
//     placement agrees and a node that becomes master again takes the
//     address at a new epoch, which re-announces it with gratuitous ARP.
//
// This is weaker than cloud capture: there is no atomic reassignment, and
// a partition between the keepalived peers makes two masters, both of
// which answer ARP (see `ipfence doctor`).

// authorityMaster says whether this node may capture: true without a VRRP
// authority, else whether keepalived last reported it master.
func (d *Daemon) authorityMaster() bool {
	if d.vrrp == nil {
		return true
	}
	return d.vrrp.State() == vrrp.Master
}

// vrrpMaster is the member that most recently became VRRP master as the
// federation has heard it: the one whose newest intent is the newest
// undrain (by Lamport time, then origin, so that every node that saw the
// same events picks the same). Masters publish an undrain when keepalived
// makes them master and a drain when it stops, so this is the current
// master, or, while a partition lasts, the latest master this side knows.
// "" when there is no VRRP authority or no member is undrained.
func (d *Daemon) vrrpMaster() string {
	if d.vrrp == nil {
		return ""
	}
	best := ""
	var bestEv federation.Event
	d.fed.View(func(s *federation.State) {
		for _, n := range d.fed.Nodes() {
			in, ok := s.Intent(n)
			if !ok || in.Kind != federation.Undrain {
				continue
			}
			if best == "" || in.Lamport > bestEv.Lamport || (in.Lamport == bestEv.Lamport && in.Origin > bestEv.Origin) {
				best, bestEv = n, in
			}
		}
	})
	return best
}

// watchAuthority publishes this node's drain or undrain as its VRRP state
// changes, starting with the state it has now (unknown counts as not
// master), and wakes the loop.
func (d *Daemon) watchAuthority(ctx context.Context) {
	publish := func(master bool) {
		kind := federation.Drain
		if master {
			kind = federation.Undrain
		}
		var drained bool
		d.fed.View(func(s *federation.State) { drained = s.Drained(d.cfg.Name) })
		if drained == !master {
			d.wake.Publish(struct{}{})
			return
		}
		if _, err := d.fed.Emit(kind, d.cfg.Name, nil); err != nil {
			d.log.Error("publishing the VRRP state", "kind", kind, "err", err)
		}
		d.log.Info("VRRP authority", "master", master, "intent", kind)
		d.wake.Publish(struct{}{})
	}
	publish(d.authorityMaster())
	wasMaster := d.authorityMaster()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-d.vrrp.Changes():
			if !ok {
				return
			}
			d.log.Info("VRRP state", "instance", ev.Instance, "state", ev.State.String(), "priority", ev.Priority)
			if ev.Priority > 0 {
				d.vrrpPriority.Store(int64(ev.Priority))
			}
			publish(ev.State == vrrp.Master)
			if wasMaster && ev.State == vrrp.Backup {
				// Lost an election to a router with a higher priority:
				// a split brain is resolving, and the winner may never
				// hear this router's adverts (it won by sending first),
				// so nothing tells it to announce. Ask every peer; the
				// master among them does.
				go d.askPeersToAnnounce(ctx)
			}
			wasMaster = ev.State == vrrp.Master
		}
	}
}

// reannounceGap bounds how often adverts heard as master announce again:
// a healing split brain sends a few adverts before the other router backs
// off.
const reannounceGap = 200 * time.Millisecond

// watchAdverts announces this host's captures again whenever, as master,
// it hears another router's VRRP advert. With unicast peers only a master
// advertises, so hearing one means two masters: a partition between the
// keepalived peers has just healed, the other router announced the
// address while it was cut off, and hosts on the LAN still send to its
// MAC. keepalived, which wins the election here, does not tell (2.2.7
// writes nothing on its FIFO for it), and nothing in the epochs changed
// on this node, so no action would be planned: without this the LAN
// would keep the wrong MAC until its neighbour entries expire.
func (d *Daemon) watchAdverts(ctx context.Context) {
	var last time.Time
	err := vrrp.ListenAdverts(ctx, func(a vrrp.Advert) {
		// Only the router that will stay master announces: one whose
		// priority is lower backs off. Both hear each other when the
		// partition heals, and an announcement by the loser would send
		// the LAN to the host about to release. (Equal priorities are
		// not configured by ipfence's examples; VRRP breaks such ties by
		// address, which this does not try to follow.)
		mine := int(d.vrrpPriority.Load())
		if !d.authorityMaster() || mine == 0 || a.Priority >= mine || time.Since(last) < reannounceGap {
			return
		}
		last = time.Now()
		d.log.Info("VRRP advert heard as master: announcing again", "from", a.From, "vrid", a.VRID, "priority", a.Priority)
		d.announce(ctx)
	})
	if err != nil {
		d.log.Error("listening for VRRP adverts; a healed partition will not be announced again", "err", err)
	}
}

// announce sends gratuitous ARP again for every on-premises address this
// host captures and returns them. The announcement changes no state, so
// it needs no fencing token.
func (d *Daemon) announce(ctx context.Context) []string {
	var done []string
	for _, pool := range d.cfg.Pools {
		drv, ok := d.provs[pool.Provider].(*onprem.Driver)
		if !ok {
			continue
		}
		for _, a := range pool.Addresses {
			if sent, err := drv.Announce(ctx, a); err != nil {
				d.log.Warn("announcing again", "address", a, "err", err)
			} else if sent {
				done = append(done, a.String())
			}
		}
	}
	return done
}

// askPeersToAnnounce asks every peer, directly and at once (not through
// the federation's outbox, whose retries back off while a partition
// lasts), to announce its captures again.
func (d *Daemon) askPeersToAnnounce(ctx context.Context) {
	client, err := d.peerClient()
	if err != nil {
		d.log.Error("asking peers to announce", "err", err)
		return
	}
	for _, p := range d.cfg.Peers {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimRight(p.URL, "/")+"/v1/onprem/announce", nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				d.log.Warn("asking a peer to announce", "peer", p.Name, "err", err)
				return
			}
			resp.Body.Close()
		}()
	}
}

// handleAnnounce announces this host's captures again if it is master.
func (d *Daemon) handleAnnounce(w http.ResponseWriter, r *http.Request) {
	if !d.authorityMaster() {
		writeJSON(w, http.StatusOK, map[string]any{"announced": false, "reason": "not VRRP master"})
		return
	}
	d.log.Info("a peer lost a VRRP election: announcing again", "by", auth.Node(r.Context()))
	writeJSON(w, http.StatusOK, map[string]any{"announced": d.announce(r.Context())})
}
