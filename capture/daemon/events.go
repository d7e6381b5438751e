package daemon

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/capture/reconcile"
)

// The node's story at info level, one structured line per event, so that
// an operator can tell from the log why an address moved: members going
// stale or coming back, desired-holder changes with their reason, epoch
// moves, and every action planned, approved, executed or fenced. A pass
// in which nothing changed logs nothing.

// Reasons for a change of desired holder, as logs and metrics give them.
const (
	// ReasonDrain: the holder was drained by an operator.
	ReasonDrain = "drain"
	// ReasonLiveness: the holder went stale (stopped heartbeating).
	ReasonLiveness = "liveness"
	// ReasonAuthority: the holder lost its authority (not VRRP master).
	ReasonAuthority = "authority"
	// ReasonOperator: an operator's undrain let a member preempt the
	// holder by priority.
	ReasonOperator = "operator"
	// ReasonPlacement: anything else — an address without a holder, a
	// configuration change.
	ReasonPlacement = "placement"
)

// storyteller keeps what the previous pass saw, to log what changed.
type storyteller struct {
	mu      sync.Mutex
	started bool
	live    map[string]federation.MemberState
	desired map[capture.Key]string
	epochs  map[capture.Key]capture.EpochRecord
}

// tell logs what changed since the last pass and counts the moves.
func (d *Daemon) tell(rep reconcile.Report) {
	s := &d.story
	s.mu.Lock()
	defer s.mu.Unlock()
	live := d.fed.Liveness()
	for _, n := range slices.Sorted(maps.Keys(live)) {
		m, was := live[n], s.live[n]
		if n == d.cfg.Name || !m.Heard {
			continue
		}
		switch {
		case m.Stale && !was.Stale:
			d.log.Info("member stale", "member", n, "heartbeat_age", max(m.Age, 0).Round(time.Millisecond))
		case !m.Stale && was.Stale:
			d.log.Info("member back", "member", n, "heartbeat_age", max(m.Age, 0).Round(time.Millisecond))
		case s.started && !was.Heard:
			d.log.Info("member heard", "member", n, "heartbeat_age", max(m.Age, 0).Round(time.Millisecond))
		}
	}
	s.live = live
	if rep.Desired == nil {
		// The pass ended before placement.
		return
	}
	if !s.started {
		held := 0
		for _, h := range rep.Desired {
			if h == d.cfg.Name {
				held++
			}
		}
		d.log.Info("placement", "addresses", len(rep.Desired), "desired_here", held)
	} else {
		pools := d.poolMembers()
		for _, k := range sortedKeys(rep.Desired) {
			to, from := rep.Desired[k], s.desired[k]
			if to == from {
				continue
			}
			why := d.reason(k, from, to, pools, live)
			d.log.Info("desired holder", "address", k.Address, "pool", k.Pool, "from", from, "to", to, "reason", why)
			d.mets.moves.WithLabelValues(why).Inc()
			if why == ReasonLiveness || why == ReasonAuthority {
				d.mets.failovers.WithLabelValues(why).Inc()
			}
		}
	}
	for _, k := range rep.Changed {
		was, now := s.epochs[k], rep.Epochs[k]
		if !s.started && was.Epoch == 0 {
			was = capture.EpochRecord{}
		}
		d.log.Info("epoch", "address", k.Address, "pool", k.Pool, "epoch", uint64(now.Epoch), "holder", now.Holder, "previous", uint64(was.Epoch), "previous_holder", was.Holder)
	}
	s.desired, s.epochs, s.started = rep.Desired, rep.Epochs, true
	d.tellActions(rep)
}

// tellActions logs the pass's journal events.
func (d *Daemon) tellActions(rep reconcile.Report) {
	planned := map[string]capture.Action{}
	for _, a := range rep.Plan.Actions() {
		planned[a.IdempotencyKey] = a
	}
	action := func(key string) (capture.Action, bool) {
		if a, ok := planned[key]; ok {
			return a, true
		}
		row, err := d.st.Row(key)
		return row.Action, err == nil
	}
	for _, k := range rep.Import.Keys {
		a := planned[k]
		d.log.Info("action planned", actionAttrs(a)...)
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Import.Reasons)) {
		a := planned[k]
		d.log.Info("action fenced", append(actionAttrs(a), "at", "import", "why", rep.Import.Reasons[k])...)
	}
	for _, k := range rep.Swept {
		if row, err := d.st.Row(k); err == nil {
			d.log.Info("action fenced", append(actionAttrs(row.Action), "at", "sweep", "why", row.Reason)...)
		}
	}
	for _, k := range rep.Approved {
		if a, ok := action(k); ok {
			d.log.Info("action approved", append(actionAttrs(a), "by", "policy")...)
		}
	}
	for _, done := range rep.Exec.Done {
		switch {
		case done.Fenced != "":
			d.log.Info("action fenced", append(actionAttrs(done.Row.Action), "at", "execute", "why", done.Fenced)...)
		case done.Err != nil:
			d.log.Warn("action failed", append(actionAttrs(done.Row.Action), "err", done.Err)...)
		default:
			d.log.Info("action executed", append(actionAttrs(done.Row.Action), "observed", done.Row.Observed)...)
		}
	}
}

// actionAttrs are the fields every action line carries.
func actionAttrs(a capture.Action) []any {
	return []any{"kind", a.Kind, "address", a.Address, "target", a.Target, "epoch", uint64(a.Epoch), "holder", a.Holder, "key", a.IdempotencyKey}
}

// reason says why key's desired holder went from one member to another.
func (d *Daemon) reason(k capture.Key, from, to string, pools map[string]map[string]capture.Member, live map[string]federation.MemberState) string {
	if from == "" {
		return ReasonPlacement
	}
	m, member := pools[k.Pool][from]
	switch {
	case !member:
		return ReasonPlacement
	case live[from].Stale:
		return ReasonLiveness
	case live[from].Drained:
		return ReasonDrain
	case m.Drained:
		// Drained in placement but not by an intent: authority said no.
		return ReasonAuthority
	case to != "" && d.preempt(k, to):
		return ReasonOperator
	}
	return ReasonPlacement
}

// poolMembers maps pool and node to the member as placement sees it now.
func (d *Daemon) poolMembers() map[string]map[string]capture.Member {
	out := map[string]map[string]capture.Member{}
	for _, p := range d.pools() {
		ms := map[string]capture.Member{}
		for _, m := range p.Members {
			ms[m.Node] = m
		}
		out[p.Name] = ms
	}
	return out
}

func sortedKeys(m map[capture.Key]string) []capture.Key {
	ks := slices.Collect(maps.Keys(m))
	slices.SortFunc(ks, func(a, b capture.Key) int {
		if a.Pool != b.Pool {
			if a.Pool < b.Pool {
				return -1
			}
			return 1
		}
		return a.Address.Compare(b.Address)
	})
	return ks
}
