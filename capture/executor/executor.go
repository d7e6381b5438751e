// Package executor carries out approved journal rows: it claims a row (the
// gate's last check, in the claim's transaction), calls the provider, looks
// at the provider's state right after, and records both. It never retries an
// acquire by itself: a failed row waits for the next reconcile, which runs
// the gate again before anything is repeated.
package executor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/store"
)

// Executor runs approved rows against the providers.
type Executor struct {
	Store *store.Store
	// Providers maps a pool's provider reference to its driver.
	Providers map[string]provider.Provider
	// AfterClaim, when set, runs after a row is claimed and before the
	// provider is called; an error stops the run there, leaving the row
	// running. Crash tests use it.
	AfterClaim func(capture.Row) error
	// AfterCall, when set, runs after the provider call and before its
	// outcome is recorded; an error stops the run there: the call took
	// effect, and the node does not know. Crash tests use it.
	AfterCall func(capture.Row) error
	// Ready, when set, is asked before the claims and again right before
	// every provider call: an error before the claims ends the run (the
	// rows stay approved for a later one), and after a claim returns the
	// row to approved without calling the provider (store.Outcome's
	// NotCalled: a later run claims it again as soon as the node is
	// ready, instead of waiting out the retry delay of a failed call).
	// The run's Result still counts it as failed. The daemon uses it to act only while
	// its view of the cluster is fresh: a node that was paused, or cut off
	// from a majority, may hold rows whose epochs the cluster has moved
	// past without its knowing, and its gate cannot tell. It also travels
	// in the call's context (gate.WithReady) so that a driver asks it as
	// the last step before it sends a change, after its own looks and
	// after any pause in between.
	Ready func() error
	// ReadyExempt, when set, names action kinds that do not wait for
	// Ready: on premises a release only stops this host answering for the
	// address, which can never make a second holder, and a node that lost
	// its VRRP authority must release even when cut off from its peers.
	ReadyExempt func(capture.Kind) bool
	// LineRevision, when set, gives the fencing token of a key on the
	// etcd epoch line: the etcd revision of the record at epoch that
	// Ready last confirmed for it (zero when none at that epoch was), and
	// whether the key is on that line at all. It is read after Ready has
	// passed, right before each call; the request carries it to the
	// provider and the row keeps it, so that the journal and the
	// provider's record name the revision each call was made under. A
	// row on the line whose epoch Ready did not confirm is not called
	// (unless its kind is exempt from Ready): its epoch is no longer the
	// line's, and a later claim's gate finds it stale.
	LineRevision func(capture.Key, capture.Epoch) (rev int64, onLine bool)
}

// errUnconfirmed: a row on the etcd line whose epoch readiness did not
// confirm there.
var errUnconfirmed = errors.New("the etcd epoch line does not confirm the row's epoch")

// lineRevision is row's token on the etcd line (zero off it), or
// errUnconfirmed for a row on the line that may not be called without one.
func (e *Executor) lineRevision(row *capture.Row) (int64, error) {
	if e.LineRevision == nil {
		return 0, nil
	}
	rev, on := e.LineRevision(row.Key, row.Epoch)
	if on && rev == 0 && e.Ready != nil && (e.ReadyExempt == nil || !e.ReadyExempt(row.Kind)) {
		return 0, fmt.Errorf("not called: %w: %s at epoch %d", errUnconfirmed, row.Key, row.Epoch)
	}
	return rev, nil
}

// gated returns ctx carrying Ready for a driver to ask right before it
// sends a change of kind k (see gate.WithReady), unless k is exempt. The
// executor's own checks come before the driver's looks and before any
// pause of the process between them and the send; the driver's is the one
// that runs after.
func (e *Executor) gated(ctx context.Context, k capture.Kind) context.Context {
	if e.Ready == nil || (e.ReadyExempt != nil && e.ReadyExempt(k)) {
		return ctx
	}
	return gate.WithReady(ctx, e.Ready)
}

// exempt says whether the row named by key runs without Ready.
func (e *Executor) exempt(key string) bool {
	if e.ReadyExempt == nil {
		return false
	}
	row, err := e.Store.Row(key)
	return err == nil && e.ReadyExempt(row.Kind)
}

// Result counts what a run did. Deferred counts the approved rows left for
// a later run because Ready refused.
type Result struct {
	Claimed, Succeeded, Failed, Stale, Deferred int
	// Done lists each row the run finished, in order: executed (with the
	// call's error, if any) or fenced at the claim.
	Done []Done
}

// Done is one row a run finished.
type Done struct {
	Row capture.Row
	// Err is the provider call's error; nil for a success.
	Err error
	// Fenced is the gate's reason when the claim skipped the row as
	// stale; the provider was not called.
	Fenced string
}

// Batcher is implemented by providers whose API takes many addresses in
// one call, as EC2's AssignPrivateIpAddresses and
// UnassignPrivateIpAddresses do. Each request keeps its own epoch and
// idempotency key; a provider that records mutations records each
// address with its own.
type Batcher interface {
	// AssignMany puts every address of reqs (all naming nic) on nic, as
	// Assign does for one; an error means any of them may or may not
	// have moved.
	AssignMany(ctx context.Context, nic string, reqs []provider.Request, reassign bool) error
	// UnassignMany takes every address of reqs off nic, as Unassign does.
	UnassignMany(ctx context.Context, nic string, reqs []provider.Request) error
	// DescribeMany reports where each address is.
	DescribeMany(ctx context.Context, addrs []netip.Addr) (map[netip.Addr]provider.Observation, error)
}

// MaxBatch is the most addresses one batched provider call carries.
const MaxBatch = 100

// Run executes up to max approved rows (all when max <= 0), in import
// order. now is the time input recorded on the rows.
//
// The rows are claimed together, in one transaction, and their outcomes
// recorded together, in another. In between, rows a Batcher can carry
// together (one kind, one NIC, one reassignment flag) go in calls of up
// to MaxBatch addresses, forwarding changes of one NIC in one call, and
// the rest one by one, each group at the place of its first row in
// import order.
func (e *Executor) Run(ctx context.Context, now time.Time, max int) (Result, error) {
	var res Result
	keys, err := e.Store.Approved()
	if err != nil {
		return res, err
	}
	if !e.batching() {
		return e.runEach(ctx, now, max, keys)
	}
	// Ready is asked once for the claims, right before the one
	// transaction that makes them: nothing happens between the claims of
	// two rows, so one answer serves them all (asking it per row made a
	// pass of a thousand rows read the federation's records a thousand
	// times, long enough to run past the contact window).
	var notReady error
	if e.Ready != nil && len(keys) > 0 {
		notReady = e.Ready()
	}
	var claim []string
	for i, k := range keys {
		if max > 0 && len(claim) >= max {
			break
		}
		if notReady != nil && !e.exempt(k) {
			if e.ReadyExempt == nil {
				res.Deferred = len(keys) - i
				break
			}
			// Exempt rows further on may still run.
			res.Deferred++
			continue
		}
		claim = append(claim, k)
	}
	if len(claim) == 0 {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	claimed, err := e.Store.ClaimMany(claim, now)
	if err != nil {
		return res, err
	}
	var rows []capture.Row
	for _, c := range claimed {
		if c.Stale != "" {
			res.Stale++
			res.Done = append(res.Done, Done{Row: c.Row, Fenced: c.Stale})
			continue
		}
		rows = append(rows, c.Row)
	}
	res.Claimed = len(rows)
	for _, row := range rows {
		if e.AfterClaim != nil {
			if err := e.AfterClaim(row); err != nil {
				return res, err
			}
		}
	}
	outs := e.callAll(ctx, rows)
	for _, row := range rows {
		if e.AfterCall != nil {
			if err := e.AfterCall(row); err != nil {
				return res, err
			}
		}
	}
	done := make([]store.Completion, len(rows))
	for i, row := range rows {
		done[i] = store.Completion{Key: row.IdempotencyKey, Outcome: outs[i]}
	}
	if err := e.Store.CompleteMany(done, now); err != nil {
		return res, err
	}
	for i, row := range rows {
		row.Observed = outs[i].Observed
		if outs[i].Err != nil {
			res.Failed++
		} else {
			res.Succeeded++
		}
		res.Done = append(res.Done, Done{Row: row, Err: outs[i].Err})
	}
	return res, nil
}

// runEach is Run one row at a time: claim, call, record. Without a
// Batcher there is nothing to carry together, and a crash between two
// rows leaves only the one it interrupted running.
func (e *Executor) runEach(ctx context.Context, now time.Time, max int, keys []string) (Result, error) {
	var res Result
	for i, k := range keys {
		if max > 0 && res.Claimed >= max {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		free := e.exempt(k)
		if e.Ready != nil && !free && e.Ready() != nil {
			if e.ReadyExempt == nil {
				res.Deferred = len(keys) - i
				break
			}
			// Exempt rows further on may still run.
			res.Deferred++
			continue
		}
		row, err := e.Store.Claim(k, now)
		if errors.Is(err, store.ErrStale) {
			res.Stale++
			res.Done = append(res.Done, Done{Row: row, Fenced: strings.TrimPrefix(err.Error(), store.ErrStale.Error()+": ")})
			continue
		}
		if err != nil {
			return res, err
		}
		res.Claimed++
		if e.AfterClaim != nil {
			if err := e.AfterClaim(row); err != nil {
				return res, err
			}
		}
		var out store.Outcome
		if e.Ready != nil && !free {
			if err := e.Ready(); err != nil {
				out.Err, out.NotCalled = fmt.Errorf("not called: %w", err), true
			}
		}
		if out.Err == nil {
			out = e.call(ctx, &row)
		}
		if e.AfterCall != nil {
			if err := e.AfterCall(row); err != nil {
				return res, err
			}
		}
		if err := e.Store.Complete(k, out, now); err != nil {
			return res, err
		}
		if out.Err != nil {
			res.Failed++
		} else {
			res.Succeeded++
		}
		res.Done = append(res.Done, Done{Row: row, Err: out.Err})
	}
	return res, nil
}

// batching says whether any provider batches.
func (e *Executor) batching() bool {
	for _, p := range e.Providers {
		if _, ok := p.(Batcher); ok {
			return true
		}
	}
	return false
}

// group is the rows one call carries.
type group struct {
	kind     capture.Kind
	provider string
	target   string
	flag     bool // reassign for an assign
	// tokened says the rows carry an etcd line revision: a call carries
	// tokens for all its addresses or for none.
	tokened bool
	rows    []int
}

// groupKey says which group a row joins; ok is false for rows called one
// by one.
func (e *Executor) groupKey(row *capture.Row) (g group, ok bool) {
	p := e.Providers[row.Provider]
	_, batches := p.(Batcher)
	rev, _ := e.lineRevision(row)
	g = group{kind: row.Kind, provider: row.Provider, target: row.Target, tokened: rev != 0}
	switch row.Kind {
	case capture.Assign:
		g.flag = row.Params[capture.ParamAllowReassignment] == "true"
		return g, batches
	case capture.Unassign:
		return g, batches
	case capture.EnableForwarding, capture.DisableForwarding:
		// Forwarding is a NIC's setting: one call sets it for every
		// address the rows name.
		return g, p != nil
	}
	return g, false
}

// callAll makes the provider calls for rows and returns their outcomes,
// in the order of rows.
func (e *Executor) callAll(ctx context.Context, rows []capture.Row) []store.Outcome {
	outs := make([]store.Outcome, len(rows))
	// Ready once more, right before the calls.
	var notReady error
	if e.Ready != nil {
		if err := e.Ready(); err != nil {
			notReady = fmt.Errorf("not called: %w", err)
		}
	}
	type gk struct {
		kind             capture.Kind
		provider, target string
		flag, tokened    bool
	}
	groups := map[gk]*group{}
	var order []any    // *group or a row index
	var observed []int // rows of the group's calls so far, to describe
	for i := range rows {
		if notReady != nil && !(e.ReadyExempt != nil && e.ReadyExempt(rows[i].Kind)) {
			outs[i].Err, outs[i].NotCalled = notReady, true
			continue
		}
		g, ok := e.groupKey(&rows[i])
		if !ok {
			order = append(order, i)
			continue
		}
		k := gk{g.kind, g.provider, g.target, g.flag, g.tokened}
		if groups[k] == nil {
			groups[k] = &g
			order = append(order, &g)
		}
		groups[k].rows = append(groups[k].rows, i)
	}
	for _, o := range order {
		// Ready again right before each call, as for a row alone: a
		// batch of calls that waits on the provider must not run past
		// the pass's contact window.
		if e.Ready != nil {
			if err := e.Ready(); err != nil {
				idx := []int{}
				switch o := o.(type) {
				case int:
					idx = append(idx, o)
				case *group:
					idx = o.rows
				}
				for _, i := range idx {
					if e.ReadyExempt == nil || !e.ReadyExempt(rows[i].Kind) {
						outs[i].Err, outs[i].NotCalled = fmt.Errorf("not called: %w", err), true
					} else {
						outs[i] = e.call(ctx, &rows[i])
					}
				}
				continue
			}
		}
		switch o := o.(type) {
		case int:
			outs[o] = e.call(ctx, &rows[o])
		case *group:
			if o.kind == capture.EnableForwarding || o.kind == capture.DisableForwarding {
				// One call sets the NIC's forwarding for every row.
				e.observe(ctx, o.provider, e.callGroup(ctx, o, o.rows, rows, outs), rows, outs)
				continue
			}
			for start := 0; start < len(o.rows); start += MaxBatch {
				part := o.rows[start:min(start+MaxBatch, len(o.rows))]
				if e.Ready != nil && start > 0 {
					if err := e.Ready(); err != nil {
						for _, i := range part {
							outs[i].Err, outs[i].NotCalled = fmt.Errorf("not called: %w", err), true
						}
						continue
					}
				}
				observed = append(observed, e.callGroup(ctx, o, part, rows, outs)...)
			}
			// The group's rows are observed once all its calls are made,
			// in one describe: describing after every call of up to
			// MaxBatch addresses made a thousand-address move describe
			// ten times, and pushed its last sends past the pass's
			// contact window.
			e.observe(ctx, o.provider, observed, rows, outs)
			observed = observed[:0]
		}
	}
	return outs
}

// observe describes the rows at idx, all of one provider, after their
// calls, and records what it saw in outs.
func (e *Executor) observe(ctx context.Context, provider string, idx []int, rows []capture.Row, outs []store.Outcome) {
	if len(idx) == 0 {
		return
	}
	obs := e.observeAll(ctx, e.Providers[provider], rows, idx)
	for j, i := range idx {
		outs[i].Observed = obs[j]
	}
}

// callGroup makes one call for the rows at idx, all of group g, and
// returns the rows left to observe (callAll describes a group's rows once
// all its calls are made); a row alone is called and observed as by call.
func (e *Executor) callGroup(ctx context.Context, g *group, idx []int, rows []capture.Row, outs []store.Outcome) []int {
	p := e.Providers[g.provider]
	if len(idx) == 1 && g.kind != capture.EnableForwarding && g.kind != capture.DisableForwarding {
		outs[idx[0]] = e.call(ctx, &rows[idx[0]])
		return nil
	}
	// The tokens are read again now, after the Ready that came right
	// before: a row whose token changed since the grouping (its epoch no
	// longer confirmed, or newly on the line) is left for a later run,
	// as the call carries tokens for all its addresses or for none.
	reqs := make([]provider.Request, 0, len(idx))
	called := make([]int, 0, len(idx))
	for _, i := range idx {
		r := &rows[i]
		rev, err := e.lineRevision(r)
		if err == nil && (rev != 0) != g.tokened {
			err = fmt.Errorf("not called: the row's etcd line token changed while its call was prepared (%s at epoch %d)", r.Key, r.Epoch)
		}
		if err != nil {
			outs[i] = store.Outcome{Err: err, NotCalled: true}
			continue
		}
		reqs = append(reqs, provider.Request{NIC: r.Target, Address: r.Address, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey, LineRevision: rev})
		called = append(called, i)
	}
	if len(called) == 0 {
		return nil
	}
	idx = called
	var err error
	cctx := e.gated(ctx, g.kind)
	switch g.kind {
	case capture.Assign:
		err = p.(Batcher).AssignMany(cctx, g.target, reqs, g.flag)
	case capture.Unassign:
		err = p.(Batcher).UnassignMany(cctx, g.target, reqs)
	case capture.EnableForwarding, capture.DisableForwarding:
		// The NIC's setting, once, under the first row's token.
		err = p.SetForwarding(cctx, reqs[0], g.kind == capture.EnableForwarding)
	}
	for j, i := range idx {
		rev := reqs[j].LineRevision
		if g.kind == capture.EnableForwarding || g.kind == capture.DisableForwarding {
			rev = reqs[0].LineRevision // the one call's token
		}
		outs[i] = store.Outcome{Err: err, NotCalled: errors.Is(err, gate.ErrNotReady)}
		if !outs[i].NotCalled {
			outs[i].LineRevision = rev
		}
	}
	return idx
}

// observeAll describes the rows' addresses after a call: in one call when
// the provider batches.
func (e *Executor) observeAll(ctx context.Context, p provider.Provider, rows []capture.Row, idx []int) []string {
	out := make([]string, len(idx))
	b, ok := p.(Batcher)
	if !ok {
		for j, i := range idx {
			out[j] = observe(ctx, p, &rows[i])
		}
		return out
	}
	addrs := make([]netip.Addr, len(idx))
	for j, i := range idx {
		addrs[j] = rows[i].Address
	}
	all, err := b.DescribeMany(ctx, addrs)
	for j, a := range addrs {
		o, ok := all[a]
		switch {
		case err != nil:
			out[j] = "describe failed: " + err.Error()
		case !ok || o.NIC == "":
			out[j] = "unassigned"
		default:
			out[j] = fmt.Sprintf("on %s, forwarding %v", o.NIC, o.Forwarding)
		}
	}
	return out
}

// call makes the provider call for a row and observes the result.
func (e *Executor) call(ctx context.Context, row *capture.Row) store.Outcome {
	p, ok := e.Providers[row.Provider]
	if !ok {
		return store.Outcome{Err: fmt.Errorf("no provider %q is configured", row.Provider)}
	}
	rev, err := e.lineRevision(row)
	if err != nil {
		return store.Outcome{Err: err, NotCalled: true}
	}
	req := provider.Request{NIC: row.Target, Address: row.Address, Epoch: row.Epoch, IdempotencyKey: row.IdempotencyKey, LineRevision: rev}
	cctx := e.gated(ctx, row.Kind)
	switch row.Kind {
	case capture.Assign:
		err = p.Assign(cctx, req, row.Params[capture.ParamAllowReassignment] == "true")
	case capture.ProxyARPStart:
		// Proxy-ARP has no atomic move: authority comes from elsewhere
		// (VRRP), so the provider is asked only to start answering.
		err = p.Assign(cctx, req, false)
	case capture.Unassign, capture.ProxyARPStop:
		err = p.Unassign(cctx, req)
	case capture.EnableForwarding:
		err = p.SetForwarding(cctx, req, true)
	case capture.DisableForwarding:
		err = p.SetForwarding(cctx, req, false)
	default:
		err = fmt.Errorf("unknown action kind %q", row.Kind)
	}
	out := store.Outcome{Err: err, Observed: observe(ctx, p, row), NotCalled: errors.Is(err, gate.ErrNotReady)}
	if !out.NotCalled {
		out.LineRevision = req.LineRevision
	}
	return out
}

// observe describes the address after a call, as the row records it.
func observe(ctx context.Context, p provider.Provider, row *capture.Row) string {
	o, err := p.Describe(ctx, row.Address)
	switch {
	case err != nil:
		return "describe failed: " + err.Error()
	case o.NIC == "":
		return "unassigned"
	}
	return fmt.Sprintf("on %s, forwarding %v", o.NIC, o.Forwarding)
}
