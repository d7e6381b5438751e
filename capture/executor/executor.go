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
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture"
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
	// Ready, when set, is asked before every claim and again right before
	// every provider call: an error before a claim ends the run (the rows
	// stay approved for a later one), and after a claim fails the row
	// without calling the provider. The daemon uses it to act only while
	// its view of the cluster is fresh: a node that was paused, or cut off
	// from a majority, may hold rows whose epochs the cluster has moved
	// past without its knowing, and its gate cannot tell.
	Ready func() error
	// ReadyExempt, when set, names action kinds that do not wait for
	// Ready: on premises a release only stops this host answering for the
	// address, which can never make a second holder, and a node that lost
	// its VRRP authority must release even when cut off from its peers.
	ReadyExempt func(capture.Kind) bool
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

// Run executes up to max approved rows (all when max <= 0), in import
// order. now is the time input recorded on the rows.
func (e *Executor) Run(ctx context.Context, now time.Time, max int) (Result, error) {
	var res Result
	keys, err := e.Store.Approved()
	if err != nil {
		return res, err
	}
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
				out.Err = fmt.Errorf("not called: %w", err)
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

// call makes the provider call for a row and observes the result.
func (e *Executor) call(ctx context.Context, row *capture.Row) store.Outcome {
	p, ok := e.Providers[row.Provider]
	if !ok {
		return store.Outcome{Err: fmt.Errorf("no provider %q is configured", row.Provider)}
	}
	req := provider.Request{NIC: row.Target, Address: row.Address, Epoch: row.Epoch, IdempotencyKey: row.IdempotencyKey}
	var err error
	switch row.Kind {
	case capture.Assign:
		err = p.Assign(ctx, req, row.Params[capture.ParamAllowReassignment] == "true")
	case capture.ProxyARPStart:
		// Proxy-ARP has no atomic move: authority comes from elsewhere
		// (VRRP), so the provider is asked only to start answering.
		err = p.Assign(ctx, req, false)
	case capture.Unassign, capture.ProxyARPStop:
		err = p.Unassign(ctx, req)
	case capture.EnableForwarding:
		err = p.SetForwarding(ctx, req, true)
	case capture.DisableForwarding:
		err = p.SetForwarding(ctx, req, false)
	default:
		err = fmt.Errorf("unknown action kind %q", row.Kind)
	}
	return store.Outcome{Err: err, Observed: observe(ctx, p, row)}
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
