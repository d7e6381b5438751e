// Package memory is an in-memory provider with the semantics of a cloud's
// secondary-IP API: an address is on at most one NIC, a move with
// reassignment is atomic, and unassigning is NIC-scoped. It keeps the
// authoritative record of every mutation it applied, which is what the
// checkers read, and it can inject faults and delay visibility the way a
// cloud applies changes asynchronously.
//
// Handler serves a provider over HTTP and Client talks to it, so that the
// provider (and its record) can live in one process while the daemon that
// calls it runs in another that a test kills.
package memory

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// DescribeCall is the call kind Fail sees for Describe. It is not an action
// kind (capture.Kind.Valid reports false): Describe changes nothing, but a
// test still needs to make it fail, for example to exercise the describe
// that follows every provider call.
const DescribeCall capture.Kind = "describe"

// Options configure a Provider.
type Options struct {
	// NICs are the NICs that exist; a call naming any other fails with
	// provider.ErrUnknownNIC. Every NIC starts with no addresses and
	// forwarding off, as a new cloud NIC does.
	NICs []string
	// Clock gives mutation times and decides when delayed mutations
	// become visible; nil means time.Now.
	Clock func() time.Time
	// Delay, when positive, makes mutations asynchronous: a call is
	// acknowledged at once and becomes visible Delay later. See Provider.
	Delay time.Duration
	// Fail, when it returns an error for a call, makes that call fail with
	// the error and change nothing. Describe is reported as DescribeCall.
	Fail func(call capture.Kind, req provider.Request) error
}

// Provider is the in-memory provider. It is safe for concurrent use.
//
// With a delay, each mutation is acknowledged at once and queued with an
// apply time of Clock()+Delay. The queue is first in, first out: a mutation
// never overtakes one acknowledged before it, so when SetDelay shortens the
// delay a new mutation waits for the apply time of the last queued one. A
// queued mutation becomes visible (to Describe, Holder, Forwarding, to the
// checks of later calls, and in Mutations) once Clock() reaches its apply
// time. Nothing runs in the background: each method first applies, in
// order, every queued mutation that is due, stamping each with its apply
// time rather than with the moment it was noticed.
//
// A call's errors are decided against the visible state when it is made;
// its effect is decided against the state when it applies, as the cloud
// does. So a queued mutation that is no longer legal or no longer needed
// when its turn comes is dropped and not recorded: an assign without
// reassignment whose address has meanwhile gone to another NIC (the call
// succeeded but its effect is lost, as with an asynchronous failure only a
// later describe reveals), an assign to the NIC that already holds the
// address, an unassign from a NIC that no longer holds it (so a late
// release never strips a new holder), and a forwarding change to the
// setting the NIC already has. Applying one mutation at a time against the
// current state is what keeps an address on at most one NIC at every
// instant, however calls and delays interleave.
type Provider struct {
	clock func() time.Time

	mu    sync.Mutex
	delay time.Duration
	fail  func(call capture.Kind, req provider.Request) error
	// names lists the NICs sorted, so that scans are deterministic.
	names []string
	nics  map[string]*nic
	// queue holds acknowledged mutations not yet visible, in apply order.
	queue []pending
	log   []provider.Mutation
}

// nic is one NIC's visible state. Addresses live on NICs, as in the cloud,
// rather than in one address → NIC map: the at-most-one-NIC rule is then
// something this package keeps, and the contract suite can catch a
// provider that breaks it.
type nic struct {
	forwarding bool
	addrs      map[netip.Addr]bool
}

// pending is an acknowledged mutation waiting for its apply time.
type pending struct {
	at       time.Time
	call     capture.Kind
	req      provider.Request
	reassign bool
}

// New returns a provider with the given NICs, all empty. It panics on an
// empty NIC name, which Describe could not tell from "no NIC".
func New(o Options) *Provider {
	p := &Provider{
		clock: o.Clock,
		delay: o.Delay,
		fail:  o.Fail,
		nics:  make(map[string]*nic, len(o.NICs)),
	}
	if p.clock == nil {
		p.clock = time.Now
	}
	for _, name := range o.NICs {
		if name == "" {
			panic("memory: empty NIC name")
		}
		if p.nics[name] == nil {
			p.nics[name] = &nic{addrs: make(map[netip.Addr]bool)}
			p.names = append(p.names, name)
		}
	}
	slices.Sort(p.names)
	return p
}

// SetFail replaces the fault injector; nil injects nothing.
func (p *Provider) SetFail(f func(call capture.Kind, req provider.Request) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = f
}

// SetDelay changes the delay of mutations made from now on. Mutations
// already queued keep their apply times.
func (p *Provider) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Assign implements provider.Provider. Assigning an address to the NIC
// that already holds it succeeds and records nothing: checkers count
// recorded mutations as effects, and a repeat has none.
func (p *Provider) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	if err := p.enter(ctx, capture.Assign, req); err != nil {
		return err
	}
	defer p.mu.Unlock()
	if err := p.check(capture.Assign, req); err != nil {
		return err
	}
	if h := p.holder(req.Address); h != "" && h != req.NIC && !reassign {
		return fmt.Errorf("memory: assign %s to %s: %w (%s)", req.Address, req.NIC, provider.ErrAssignedElsewhere, h)
	}
	p.submit(capture.Assign, req, reassign)
	return nil
}

// Unassign implements provider.Provider. Only the NIC named in the request
// loses the address; when it does not hold it, nothing is recorded.
func (p *Provider) Unassign(ctx context.Context, req provider.Request) error {
	if err := p.enter(ctx, capture.Unassign, req); err != nil {
		return err
	}
	defer p.mu.Unlock()
	if err := p.check(capture.Unassign, req); err != nil {
		return err
	}
	p.submit(capture.Unassign, req, false)
	return nil
}

// SetForwarding implements provider.Provider. A mutation is recorded only
// when the setting changes.
func (p *Provider) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	call := capture.DisableForwarding
	if enabled {
		call = capture.EnableForwarding
	}
	if err := p.enter(ctx, call, req); err != nil {
		return err
	}
	defer p.mu.Unlock()
	if err := p.check(call, req); err != nil {
		return err
	}
	p.submit(call, req, false)
	return nil
}

// Describe implements provider.Provider. It reports the visible state.
func (p *Provider) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	if err := p.enter(ctx, DescribeCall, provider.Request{Address: addr}); err != nil {
		return provider.Observation{}, err
	}
	defer p.mu.Unlock()
	if !addr.IsValid() {
		return provider.Observation{}, errors.New("memory: describe: invalid address")
	}
	obs := provider.Observation{Address: addr, NIC: p.holder(addr)}
	if obs.NIC != "" {
		obs.Forwarding = p.nics[obs.NIC].forwarding
	}
	return obs, nil
}

// Mutations implements provider.Recorder: every visible mutation, in the
// order applied. No-ops and failed calls are not mutations.
func (p *Provider) Mutations() []provider.Mutation {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	return slices.Clone(p.log)
}

// Holder returns the NIC the address is visibly on, or "".
func (p *Provider) Holder(addr netip.Addr) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	return p.holder(addr)
}

// Forwarding reports whether the NIC visibly forwards; false for an
// unknown NIC.
func (p *Provider) Forwarding(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	n := p.nics[name]
	return n != nil && n.forwarding
}

// Flush applies every queued mutation now: those already due at their
// apply times, the rest at Clock(), in queue order.
func (p *Provider) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock()
	p.advance(now)
	for _, m := range p.queue {
		p.apply(m, now)
	}
	p.queue = nil
}

// enter runs the fault injector and, when it lets the call through, takes
// the lock and brings the visible state up to date; the caller unlocks.
// The injector runs outside the lock so that it may itself call the
// provider (to fail only while some NIC holds the address, say).
func (p *Provider) enter(ctx context.Context, call capture.Kind, req provider.Request) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s %s on %s: %w", call, req.Address, req.NIC, err)
	}
	p.mu.Lock()
	fail := p.fail
	p.mu.Unlock()
	if fail != nil {
		if err := fail(call, req); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.advance(p.clock())
	return nil
}

// check rejects a mutation naming an invalid address or an unknown NIC.
func (p *Provider) check(call capture.Kind, req provider.Request) error {
	if p.nics[req.NIC] == nil {
		return fmt.Errorf("memory: %s %s: %w %q", call, req.Address, provider.ErrUnknownNIC, req.NIC)
	}
	// SetForwarding's address is informational, so only the address
	// calls need one.
	if (call == capture.Assign || call == capture.Unassign) && !req.Address.IsValid() {
		return fmt.Errorf("memory: %s on %s: invalid address", call, req.NIC)
	}
	return nil
}

// submit queues an acknowledged mutation behind those already queued and
// applies it at once when it is already due (no delay, empty queue).
func (p *Provider) submit(call capture.Kind, req provider.Request, reassign bool) {
	now := p.clock()
	at := now.Add(p.delay)
	if n := len(p.queue); n > 0 && at.Before(p.queue[n-1].at) {
		at = p.queue[n-1].at
	}
	p.queue = append(p.queue, pending{at: at, call: call, req: req, reassign: reassign})
	p.advance(now)
}

// advance applies, in order, every queued mutation due by now.
func (p *Provider) advance(now time.Time) {
	i := 0
	for ; i < len(p.queue) && !p.queue[i].at.After(now); i++ {
		p.apply(p.queue[i], p.queue[i].at)
	}
	if i > 0 {
		p.queue = slices.Delete(p.queue, 0, i)
	}
}

// apply makes one mutation visible against the current state, recording
// it at time at when it changes something.
func (p *Provider) apply(m pending, at time.Time) {
	n := p.nics[m.req.NIC]
	rec := provider.Mutation{
		Time: at, Call: m.call, NIC: m.req.NIC, Address: m.req.Address,
		Epoch: m.req.Epoch, IdempotencyKey: m.req.IdempotencyKey, LineRevision: m.req.LineRevision,
	}
	switch m.call {
	case capture.Assign:
		from := p.holder(m.req.Address)
		if from == m.req.NIC || (from != "" && !m.reassign) {
			return
		}
		// Both halves of the move happen under one lock hold, so no
		// observer sees the address on two NICs or on none.
		if from != "" {
			delete(p.nics[from].addrs, m.req.Address)
		}
		n.addrs[m.req.Address] = true
		rec.From = from
	case capture.Unassign:
		if !n.addrs[m.req.Address] {
			return
		}
		delete(n.addrs, m.req.Address)
	case capture.EnableForwarding, capture.DisableForwarding:
		enabled := m.call == capture.EnableForwarding
		if n.forwarding == enabled {
			return
		}
		n.forwarding = enabled
		rec.Enabled = enabled
	}
	p.log = append(p.log, rec)
}

// holder returns the first NIC, in name order, that holds the address.
func (p *Provider) holder(addr netip.Addr) string {
	for _, name := range p.names {
		if p.nics[name].addrs[addr] {
			return name
		}
	}
	return ""
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Recorder = (*Provider)(nil)
)
