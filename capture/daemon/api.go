package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/capture/placement"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/store"
)

// The API. Every path under /v1/ is authenticated the way peers are
// (HMAC over the request, or a client certificate); /metrics and /healthz
// are not, as monitoring systems expect.
//
//	POST /v1/federation/events         a batch of events from a peer
//	GET  /v1/status                    members and addresses
//	GET  /v1/actions?state=&kind=&pool= journal rows
//	POST /v1/actions/approve           {"key": idempotency key}
//	POST /v1/actions/reject            {"key": idempotency key}
//	POST /v1/members/{node}/drain      operator drain
//	POST /v1/members/{node}/undrain    operator undrain (lets it preempt by priority again)
//	POST /v1/onprem/announce           announce this host's on-premises captures again (a peer lost a VRRP election)
//	POST /v1/test/clock                {"offset": "5s"}; only with test endpoints on
func (d *Daemon) routes() http.Handler {
	api := http.NewServeMux()
	api.Handle("POST "+federation.Path, d.fed.Handler())
	api.Handle("GET "+federation.RecordsPath, d.fed.Handler())
	api.HandleFunc("GET /v1/status", d.handleStatus)
	api.HandleFunc("GET /v1/actions", d.handleActions)
	api.HandleFunc("POST /v1/actions/approve", d.handleDecision(true))
	api.HandleFunc("POST /v1/actions/reject", d.handleDecision(false))
	api.HandleFunc("POST /v1/members/{node}/drain", d.handleIntent(federation.Drain))
	api.HandleFunc("POST /v1/members/{node}/undrain", d.handleIntent(federation.Undrain))
	api.HandleFunc("POST /v1/onprem/announce", d.handleAnnounce)
	if d.opts.TestEndpoints {
		api.HandleFunc("POST /v1/test/clock", d.handleClock)
	}
	authed := d.access(api) // access.go
	root := http.NewServeMux()
	root.Handle("/v1/", authed)
	root.Handle("GET /metrics", promhttp.HandlerFor(d.mets.reg, promhttp.HandlerOpts{}))
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := d.unhealthy(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"node": d.cfg.Name, "status": "unhealthy", "reason": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"node": d.cfg.Name, "status": "ok"})
	})
	return root
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// MemberStatus is one node's liveness as this node sees it.
type MemberStatus struct {
	Node     string  `json:"node"`
	Heard    bool    `json:"heard"`
	Stale    bool    `json:"stale"`
	Drained  bool    `json:"drained"`
	AgeMilli float64 `json:"heartbeat_age_ms"`
}

// AddressStatus is one address as this node sees it.
type AddressStatus struct {
	Address string `json:"address"`
	Pool    string `json:"pool"`
	// DesiredHolder is who placement wants now; Holder is the holder of
	// the epoch line's current record.
	DesiredHolder string        `json:"desired_holder"`
	Epoch         capture.Epoch `json:"epoch"`
	Holder        string        `json:"holder"`
	HeldHere      bool          `json:"held_here"`
	// ProviderNIC is where the provider says the address is now, and
	// ProviderHolder the member whose target that NIC is.
	ProviderNIC    string `json:"provider_nic"`
	ProviderHolder string `json:"provider_holder"`
	ProviderError  string `json:"provider_error,omitempty"`
}

// Status is GET /v1/status.
type Status struct {
	Node       string                          `json:"node"`
	Members    []MemberStatus                  `json:"members"`
	Addresses  []AddressStatus                 `json:"addresses"`
	LastPass   time.Time                       `json:"last_pass"`
	PassError  string                          `json:"pass_error,omitempty"`
	Federation map[string]federation.PeerStats `json:"federation"`
	// Synced is false while this node, having lost its state, has not
	// learned the cluster's epoch lines back; Passive says why it may
	// not act ("" when it may).
	Synced      bool   `json:"synced"`
	Incarnation string `json:"incarnation"`
	Passive     string `json:"passive,omitempty"`
	// Refused counts federation events refused at the door, by reason.
	Refused map[string]uint64 `json:"refused_events"`
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := d.status(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "status: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) status(ctx context.Context) (Status, error) {
	out := Status{Node: d.cfg.Name, Federation: d.fed.Stats(), Incarnation: d.fed.Incarnation(), Refused: d.fed.Refused()}
	var why string
	out.Synced, why = d.fed.Synced()
	if !out.Synced {
		out.Passive = why
	} else if w, _ := d.passiveWhy.Load().(string); w != "" {
		out.Passive = w
	} else if d.line != nil && d.line.session(time.Now()) == nil {
		out.Passive = "etcd epoch line: " + errNoSession.Error()
	}
	live := d.fed.Liveness()
	for _, n := range d.fed.Nodes() {
		m := live[n]
		out.Members = append(out.Members, MemberStatus{Node: n, Heard: m.Heard, Stale: m.Stale,
			Drained: m.Drained, AgeMilli: float64(m.Age) / float64(time.Millisecond)})
	}
	epochs, err := d.st.Epochs()
	if err != nil {
		return out, err
	}
	held, err := d.st.Held()
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pools := d.pools()
	desired := placement.Desired(pools, d.cfg.Name, epochs, d.preempt)
	for _, p := range pools {
		byNIC := map[string]string{}
		for _, m := range p.Members {
			byNIC[m.Target] = m.Node
		}
		prov := d.provs[p.Provider]
		// One describe per batch of addresses where the provider allows,
		// rather than one per address.
		var many map[netip.Addr]provider.Observation
		var manyErr error
		if b, ok := prov.(executor.Batcher); ok {
			many, manyErr = b.DescribeMany(ctx, p.Addresses)
		}
		for _, a := range p.Addresses {
			k := capture.Key{Pool: p.Name, Address: a, Domain: p.Domain(d.cfg.Name)}
			rec := epochs[k]
			_, here := held[k]
			as := AddressStatus{Address: a.String(), Pool: p.Name, DesiredHolder: desired[k], Epoch: rec.Epoch, Holder: rec.Holder, HeldHere: here}
			if _, batch := prov.(executor.Batcher); batch {
				if manyErr != nil {
					as.ProviderError = manyErr.Error()
				} else {
					as.ProviderNIC, as.ProviderHolder = many[a].NIC, byNIC[many[a].NIC]
				}
			} else if prov != nil {
				obs, err := prov.Describe(ctx, a)
				if err != nil {
					as.ProviderError = err.Error()
				} else {
					as.ProviderNIC, as.ProviderHolder = obs.NIC, byNIC[obs.NIC]
				}
			}
			out.Addresses = append(out.Addresses, as)
		}
	}
	d.mu.Lock()
	out.LastPass = d.lastPass.Now
	if d.lastErr != nil {
		out.PassError = d.lastErr.Error()
	}
	d.mu.Unlock()
	return out, nil
}

func (d *Daemon) handleActions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.Filter{State: capture.State(q.Get("state")), Kind: capture.Kind(q.Get("kind")), Pool: q.Get("pool")}
	if f.State != "" && !slices.Contains(capture.States, f.State) {
		writeError(w, http.StatusBadRequest, "state %q is not one of %v", f.State, capture.States)
		return
	}
	if f.Kind != "" && !f.Kind.Valid() {
		writeError(w, http.StatusBadRequest, "kind %q is not one of %v", f.Kind, capture.Kinds())
		return
	}
	rows, err := d.st.Rows(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "journal: %v", err)
		return
	}
	if rows == nil {
		rows = []capture.Row{}
	}
	writeJSON(w, http.StatusOK, rows)
}

func (d *Daemon) handleDecision(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Key string `json:"key"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Key == "" {
			writeError(w, http.StatusBadRequest, `want {"key": "<idempotency key>"}`)
			return
		}
		by := auth.Node(r.Context())
		if by == "" {
			by = "operator"
		}
		var err error
		if approve {
			err = d.st.Approve(body.Key, by)
		} else {
			err = d.st.Reject(body.Key, by, d.now())
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, http.StatusNotFound, "%v", err)
		case err != nil:
			writeError(w, http.StatusConflict, "%v", err)
		default:
			d.wake.Publish(struct{}{})
			row, _ := d.st.Row(body.Key)
			verb := "action approved"
			if !approve {
				verb = "action rejected"
			}
			d.log.Info(verb, append(actionAttrs(row.Action), "by", by)...)
			writeJSON(w, http.StatusOK, row)
		}
	}
}

// intentTimeout bounds how long an operator's intent waits to read a
// majority's records and to be held by one.
const intentTimeout = 4 * time.Second

func (d *Daemon) handleIntent(kind federation.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		node := r.PathValue("node")
		if !slices.Contains(d.fed.Nodes(), node) {
			writeError(w, http.StatusNotFound, "no node %q in the cluster (nodes: %s)", node, strings.Join(d.fed.Nodes(), ", "))
			return
		}
		// A node cut off from the majority refuses intents: its event
		// would be ordered by Lamport time against any sent meanwhile to
		// a node of the majority, whose clock runs ahead with that side's
		// events, so an undrain sent here after a drain sent there would
		// answer 200 and lose at the heal. Seen in the capture test: an
		// undrain through an isolated node left its subject drained for
		// 34 s. Refused, the operator knows to send it elsewhere.
		if window := d.cfg.Timing.HeartbeatTTL + d.cfg.Timing.PromotionHold; !d.fed.InContact(window) {
			d.log.Warn("operator intent refused", "kind", kind, "member", node, "why", errOutOfContact)
			writeError(w, http.StatusServiceUnavailable, "%s %s: this node is %v, so the intent could lose to one sent meanwhile to a node of the majority; send it to a node in contact, or retry once this one is", kind, node, errOutOfContact)
			return
		}
		// Linearizable: read a majority's records, stamp, and answer once
		// a majority holds it (federation.Node.EmitIntent), within a
		// bound a ctl user waits for.
		ctx, cancel := context.WithTimeout(r.Context(), intentTimeout)
		defer cancel()
		e, err := d.fed.EmitIntent(ctx, kind, node)
		switch {
		case errors.Is(err, federation.ErrIntentUnread):
			d.log.Warn("operator intent refused", "kind", kind, "member", node, "why", err)
			writeError(w, http.StatusServiceUnavailable, "%s %s: not taken: %v; nothing was changed, send it again", kind, node, err)
			return
		case errors.Is(err, federation.ErrIntentUnacknowledged):
			d.log.Warn("operator intent not yet on a majority", "kind", kind, "member", node, "event", e.ID(), "why", err)
			writeError(w, http.StatusServiceUnavailable, "%s %s: stored on this node as %s but not yet on a majority, so it may still take effect or lose to one sent elsewhere; send it again to be sure", kind, node, e.ID())
			return
		case err != nil:
			d.noteWrite(string(kind)+" "+node, err)
			writeError(w, http.StatusInternalServerError, "%s %s: %v", kind, node, err)
			return
		}
		d.log.Info("operator intent", "kind", kind, "member", node, "by", auth.Node(r.Context()))
		writeJSON(w, http.StatusOK, map[string]any{"node": node, "intent": kind, "event": e.ID()})
	}
}

func (d *Daemon) handleClock(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Offset string `json:"offset"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `want {"offset": "<duration>"}`)
		return
	}
	off, err := time.ParseDuration(body.Offset)
	if err != nil {
		writeError(w, http.StatusBadRequest, "offset: %v", err)
		return
	}
	d.offset.Store(int64(off))
	d.log.Warn("test clock offset set", "offset", off)
	writeJSON(w, http.StatusOK, map[string]string{"offset": off.String()})
}
