// Package providertest is the contract suite every provider.Provider must
// pass: the in-memory provider, the HTTP client in front of it, and the
// cloud drivers against their simulators. One suite, so that the semantics
// the capture safety argument leans on (an address on at most one NIC,
// atomic moves, NIC-scoped unassign, harmless repeats) are checked the same
// way everywhere.
//
// The suite reads its own writes: after a call returns, the next Describe
// must show its effect. A provider that applies changes asynchronously
// must be built with no delay for the suite; its asynchronous behaviour is
// the business of its own tests.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// NICs are the NICs every subtest's provider is built with. NICs start
// with no addresses and forwarding off, as a new cloud NIC does.
var NICs = []string{"eni-a", "eni-b", "eni-c"}

// unknownNIC exists in no provider the suite builds.
const unknownNIC = "eni-missing"

// addr returns 10.0.0.n.
func addr(n byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, n}) }

// Run runs the contract suite as subtests of t. newProvider builds a fresh
// provider whose NICs are exactly nics, with no addresses assigned; it is
// called once per subtest. When the provider is a provider.Recorder its
// record is checked too.
func Run(t *testing.T, newProvider func(t *testing.T, nics []string) provider.Provider) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s *suite)
	}{
		{"AssignThenDescribe", testAssignThenDescribe},
		{"AssignElsewhereWithoutReassign", testAssignElsewhereWithoutReassign},
		{"Reassign", testReassign},
		{"UnassignWrongNIC", testUnassignWrongNIC},
		{"UnassignRightNIC", testUnassignRightNIC},
		{"Idempotent", testIdempotent},
		{"Forwarding", testForwarding},
		{"UnknownNIC", testUnknownNIC},
		{"DescribeUnknownAddress", testDescribeUnknownAddress},
		{"ConcurrentReassign", testConcurrentReassign},
		{"Record", testRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, slices.Clone(NICs))
			rec, _ := p.(provider.Recorder)
			tc.run(t, &suite{t: t, p: p, rec: rec, ctx: t.Context()})
		})
	}
}

// suite is one subtest's provider with helpers that fail the test on an
// unexpected error.
type suite struct {
	t   *testing.T
	p   provider.Provider
	rec provider.Recorder // nil when the provider keeps no record
	ctx context.Context
	seq atomic.Uint64
}

// req builds a request with a fresh epoch and idempotency key, as the
// journal would for a new action.
func (s *suite) req(nic string, a netip.Addr) provider.Request {
	n := s.seq.Add(1)
	return provider.Request{NIC: nic, Address: a, Epoch: capture.Epoch(n), IdempotencyKey: fmt.Sprintf("suite:%s:%s:epoch:%d", nic, a, n)}
}

func (s *suite) assign(nic string, a netip.Addr, reassign bool) {
	s.t.Helper()
	if err := s.p.Assign(s.ctx, s.req(nic, a), reassign); err != nil {
		s.t.Fatalf("Assign(%s, %s, reassign=%t) = %v, want nil", nic, a, reassign, err)
	}
}

func (s *suite) unassign(nic string, a netip.Addr) {
	s.t.Helper()
	if err := s.p.Unassign(s.ctx, s.req(nic, a)); err != nil {
		s.t.Fatalf("Unassign(%s, %s) = %v, want nil", nic, a, err)
	}
}

func (s *suite) forward(nic string, a netip.Addr, on bool) {
	s.t.Helper()
	if err := s.p.SetForwarding(s.ctx, s.req(nic, a), on); err != nil {
		s.t.Fatalf("SetForwarding(%s, %t) = %v, want nil", nic, on, err)
	}
}

// expect fails unless Describe(a) reports nic and forwarding.
func (s *suite) expect(a netip.Addr, nic string, forwarding bool) {
	s.t.Helper()
	obs, err := s.p.Describe(s.ctx, a)
	if err != nil {
		s.t.Fatalf("Describe(%s) = %v, want nil error", a, err)
	}
	want := provider.Observation{Address: a, NIC: nic, Forwarding: forwarding}
	if obs != want {
		s.t.Fatalf("Describe(%s) = %+v, want %+v", a, obs, want)
	}
}

// mutations returns the record, or nil when there is none.
func (s *suite) mutations() []provider.Mutation {
	if s.rec == nil {
		return nil
	}
	return s.rec.Mutations()
}

// expectRecorded fails unless the record grew by exactly want since it
// held n mutations. Times are checked to be set and non-decreasing, then
// ignored, since the suite does not control the provider's clock.
func (s *suite) expectRecorded(n int, want ...provider.Mutation) {
	s.t.Helper()
	if s.rec == nil {
		return
	}
	ms := s.rec.Mutations()
	if len(ms) < n {
		s.t.Fatalf("record shrank from %d to %d mutations", n, len(ms))
	}
	checkTimes(s.t, ms)
	got := ms[n:]
	want = slices.Clone(want)
	for i := range want {
		if i < len(got) {
			want[i].Time = got[i].Time
		}
	}
	if !slices.Equal(got, want) {
		s.t.Fatalf("new mutations:\n got %+v\nwant %+v", got, want)
	}
}

// checkTimes fails unless every mutation has a time and times never go
// back: the record is in apply order.
func checkTimes(t *testing.T, ms []provider.Mutation) {
	t.Helper()
	for i, m := range ms {
		if m.Time.IsZero() {
			t.Fatalf("mutation %d (%+v) has no time", i, m)
		}
		if i > 0 && m.Time.Before(ms[i-1].Time) {
			t.Fatalf("mutation %d at %v is before mutation %d at %v", i, m.Time, i-1, ms[i-1].Time)
		}
	}
}

func testAssignThenDescribe(t *testing.T, s *suite) {
	a, other := addr(1), addr(2)
	s.expect(a, "", false)
	s.assign("eni-a", a, false)
	s.expect(a, "eni-a", false)
	// Only the assigned address moved.
	s.expect(other, "", false)
	s.assign("eni-b", other, false)
	s.expect(a, "eni-a", false)
	s.expect(other, "eni-b", false)
}

func testAssignElsewhereWithoutReassign(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	err := s.p.Assign(s.ctx, s.req("eni-b", a), false)
	if !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("Assign to eni-b while on eni-a without reassignment = %v, want ErrAssignedElsewhere", err)
	}
	s.expect(a, "eni-a", false)
	s.expectRecorded(n)
}

func testReassign(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	r := s.req("eni-b", a)
	if err := s.p.Assign(s.ctx, r, true); err != nil {
		t.Fatalf("Assign to eni-b with reassignment = %v, want nil", err)
	}
	s.expect(a, "eni-b", false)
	s.expectRecorded(n, provider.Mutation{Call: capture.Assign, NIC: "eni-b", Address: a, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey, From: "eni-a"})
	// Taking it off the new NIC leaves it on none: the move left nothing
	// behind on the old one.
	s.unassign("eni-b", a)
	s.expect(a, "", false)
	// Reassignment of a free address is a plain assign.
	s.assign("eni-c", a, true)
	s.expect(a, "eni-c", false)
}

func testUnassignWrongNIC(t *testing.T, s *suite) {
	a, free := addr(1), addr(2)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	// A late release by an old holder must not strip the new one.
	s.unassign("eni-b", a)
	s.expect(a, "eni-a", false)
	s.unassign("eni-b", free)
	s.expect(free, "", false)
	s.expectRecorded(n)
}

func testUnassignRightNIC(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	s.forward("eni-a", a, true)
	s.expect(a, "eni-a", true)
	n := len(s.mutations())
	r := s.req("eni-a", a)
	if err := s.p.Unassign(s.ctx, r); err != nil {
		t.Fatalf("Unassign from eni-a = %v, want nil", err)
	}
	// No NIC holds it, so no forwarding is reported for it.
	s.expect(a, "", false)
	s.expectRecorded(n, provider.Mutation{Call: capture.Unassign, NIC: "eni-a", Address: a, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey})
	// Once free, it can go to another NIC without reassignment.
	s.assign("eni-b", a, false)
	s.expect(a, "eni-b", false)
}

func testIdempotent(t *testing.T, s *suite) {
	a := addr(1)
	n := len(s.mutations())
	first := s.req("eni-a", a)
	if err := s.p.Assign(s.ctx, first, false); err != nil {
		t.Fatalf("Assign = %v, want nil", err)
	}
	s.assign("eni-a", a, false)
	s.assign("eni-a", a, true)
	// The same request again, as after a crash between call and journal.
	if err := s.p.Assign(s.ctx, first, false); err != nil {
		t.Fatalf("repeated Assign = %v, want nil", err)
	}
	s.expect(a, "eni-a", false)
	s.forward("eni-a", a, true)
	s.forward("eni-a", a, true)
	s.expect(a, "eni-a", true)
	s.forward("eni-a", a, false)
	s.forward("eni-a", a, false)
	s.expect(a, "eni-a", false)
	s.unassign("eni-a", a)
	s.unassign("eni-a", a)
	s.expect(a, "", false)
	if s.rec == nil {
		return
	}
	// Each change once, whatever the repeats.
	var calls []capture.Kind
	for _, m := range s.mutations()[n:] {
		calls = append(calls, m.Call)
	}
	want := []capture.Kind{capture.Assign, capture.EnableForwarding, capture.DisableForwarding, capture.Unassign}
	if !slices.Equal(calls, want) {
		t.Fatalf("recorded calls = %v, want %v", calls, want)
	}
}

func testForwarding(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	s.forward("eni-a", a, true)
	s.expect(a, "eni-a", true)
	s.forward("eni-a", a, false)
	s.expect(a, "eni-a", false)
	// Describe reports the holder's setting, not another NIC's.
	s.forward("eni-b", a, true)
	s.expect(a, "eni-a", false)
	// The setting belongs to the NIC: moving the address to eni-b
	// brings it under eni-b's forwarding.
	s.assign("eni-b", a, true)
	s.expect(a, "eni-b", true)
	// Forwarding is per NIC, not per address: a second address on eni-b
	// is forwarded too.
	b := addr(2)
	s.assign("eni-b", b, false)
	s.expect(b, "eni-b", true)
	// Forwarding may be set on a NIC that holds no address.
	s.forward("eni-c", netip.Addr{}, true)
	s.assign("eni-c", addr(3), false)
	s.expect(addr(3), "eni-c", true)
}

func testUnknownNIC(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	calls := map[string]func() error{
		"Assign":               func() error { return s.p.Assign(s.ctx, s.req(unknownNIC, a), false) },
		"Assign(reassign)":     func() error { return s.p.Assign(s.ctx, s.req(unknownNIC, a), true) },
		"Assign(free address)": func() error { return s.p.Assign(s.ctx, s.req(unknownNIC, addr(2)), false) },
		"Unassign":             func() error { return s.p.Unassign(s.ctx, s.req(unknownNIC, a)) },
		"SetForwarding(true)":  func() error { return s.p.SetForwarding(s.ctx, s.req(unknownNIC, a), true) },
		"SetForwarding(false)": func() error { return s.p.SetForwarding(s.ctx, s.req(unknownNIC, a), false) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, provider.ErrUnknownNIC) {
			t.Errorf("%s on %s = %v, want ErrUnknownNIC", name, unknownNIC, err)
		}
	}
	// A move to a NIC that does not exist must not take the address
	// off the one that does.
	s.expect(a, "eni-a", false)
	s.expect(addr(2), "", false)
	s.expectRecorded(n)
}

func testDescribeUnknownAddress(t *testing.T, s *suite) {
	s.assign("eni-a", addr(1), false)
	s.forward("eni-a", addr(1), true)
	for _, a := range []netip.Addr{addr(200), netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("fd00::1")} {
		s.expect(a, "", false)
	}
}

// testConcurrentReassign races many seizes of one address while observers
// describe it: the address must be on exactly one NIC at every
// observation (never on none, as a move split into unassign and assign
// would show), and afterwards on exactly one.
func testConcurrentReassign(t *testing.T, s *suite) {
	const (
		movers    = 6
		moves     = 25
		observers = 3
	)
	a := addr(9)
	s.assign(NICs[0], a, false)
	n := len(s.mutations())

	var movesDone sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, movers+observers)
	for g := range movers {
		movesDone.Go(func() {
			nic := NICs[g%len(NICs)]
			for range moves {
				if err := s.p.Assign(s.ctx, s.req(nic, a), true); err != nil {
					errs <- fmt.Errorf("assign to %s with reassignment: %w", nic, err)
					return
				}
			}
		})
	}
	var observersDone sync.WaitGroup
	var observed atomic.Int64
	for range observers {
		observersDone.Go(func() {
			for {
				obs, err := s.p.Describe(s.ctx, a)
				if err != nil {
					errs <- fmt.Errorf("describe of %s: %w", a, err)
					return
				}
				if !slices.Contains(NICs, obs.NIC) {
					errs <- fmt.Errorf("observed %s on %q during moves, want exactly one of %v", a, obs.NIC, NICs)
					return
				}
				observed.Add(1)
				// A short pause: against a remote provider, observers in
				// a tight loop would starve the movers.
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
	movesDone.Wait()
	close(stop)
	observersDone.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if observed.Load() < observers {
		t.Fatalf("%d observations, want at least %d", observed.Load(), observers)
	}

	obs, err := s.p.Describe(s.ctx, a)
	if err != nil {
		t.Fatalf("Describe = %v", err)
	}
	if !slices.Contains(NICs, obs.NIC) {
		t.Fatalf("after the moves %s is on %q, want one of %v", a, obs.NIC, NICs)
	}
	if ms := s.mutations(); ms != nil {
		checkMoves(t, a, NICs[0], ms[n:], obs.NIC)
	}
	// Taking it off its holder must leave it on none; a copy left on a
	// second NIC by a move that did not remove it would show up here.
	s.unassign(obs.NIC, a)
	s.expect(a, "", false)
}

// checkMoves replays recorded moves of a from holder and fails unless each
// left the NIC that held the address at that point, and the last one put
// it where it is now.
func checkMoves(t *testing.T, a netip.Addr, holder string, ms []provider.Mutation, final string) {
	t.Helper()
	for i, m := range ms {
		if m.Call != capture.Assign || m.Address != a {
			t.Fatalf("mutation %d = %+v, want only assigns of %s", i, m, a)
		}
		if m.From != holder {
			t.Fatalf("mutation %d moved %s from %q, but it was on %q", i, a, m.From, holder)
		}
		if m.NIC == holder {
			t.Fatalf("mutation %d assigned %s to %s, which already held it: a no-op was recorded", i, a, m.NIC)
		}
		holder = m.NIC
	}
	if holder != final {
		t.Fatalf("the record leaves %s on %q, Describe says %q", a, holder, final)
	}
}

// testRecord checks what a Recorder keeps: each effect once, with the
// request's epoch and idempotency key, the NIC a move came from, and the
// forwarding setting; no entry for no-ops or refused calls.
func testRecord(t *testing.T, s *suite) {
	if s.rec == nil {
		t.Skip("provider keeps no record of mutations")
	}
	a := addr(1)
	if ms := s.mutations(); len(ms) != 0 {
		t.Fatalf("fresh provider recorded %+v, want nothing", ms)
	}
	mut := func(call capture.Kind, r provider.Request) provider.Mutation {
		return provider.Mutation{Call: call, NIC: r.NIC, Address: r.Address, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey}
	}
	var want []provider.Mutation

	assign := provider.Request{NIC: "eni-a", Address: a, Epoch: 7, IdempotencyKey: "pool:aws:eni-a:assign-secondary-ip:10.0.0.1:epoch:7"}
	if err := s.p.Assign(s.ctx, assign, false); err != nil {
		t.Fatal(err)
	}
	want = append(want, mut(capture.Assign, assign))
	s.expectRecorded(0, want...)

	// No-ops and refusals leave no trace.
	s.assign("eni-a", a, false)
	s.assign("eni-a", a, true)
	s.unassign("eni-b", a)
	s.forward("eni-a", a, false)
	if err := s.p.Assign(s.ctx, s.req("eni-b", a), false); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("Assign elsewhere = %v, want ErrAssignedElsewhere", err)
	}
	if err := s.p.Assign(s.ctx, s.req(unknownNIC, a), true); !errors.Is(err, provider.ErrUnknownNIC) {
		t.Fatalf("Assign to unknown NIC = %v, want ErrUnknownNIC", err)
	}
	s.expectRecorded(0, want...)

	move := provider.Request{NIC: "eni-b", Address: a, Epoch: 8, IdempotencyKey: "pool:aws:eni-b:assign-secondary-ip:10.0.0.1:epoch:8"}
	if err := s.p.Assign(s.ctx, move, true); err != nil {
		t.Fatal(err)
	}
	m := mut(capture.Assign, move)
	m.From = "eni-a"
	want = append(want, m)

	on := provider.Request{NIC: "eni-b", Address: a, Epoch: 8, IdempotencyKey: "pool:aws:eni-b:ensure-forwarding-enabled:10.0.0.1:epoch:8"}
	if err := s.p.SetForwarding(s.ctx, on, true); err != nil {
		t.Fatal(err)
	}
	m = mut(capture.EnableForwarding, on)
	m.Enabled = true
	want = append(want, m)

	off := provider.Request{NIC: "eni-b", Address: a, Epoch: 9, IdempotencyKey: "pool:aws:eni-b:ensure-forwarding-disabled:10.0.0.1:epoch:9"}
	if err := s.p.SetForwarding(s.ctx, off, false); err != nil {
		t.Fatal(err)
	}
	want = append(want, mut(capture.DisableForwarding, off))

	release := provider.Request{NIC: "eni-b", Address: a, Epoch: 9, IdempotencyKey: "pool:aws:eni-b:unassign-secondary-ip:10.0.0.1:epoch:9"}
	if err := s.p.Unassign(s.ctx, release); err != nil {
		t.Fatal(err)
	}
	want = append(want, mut(capture.Unassign, release))
	s.expectRecorded(0, want...)

	// The record is a copy: changing it changes nothing in the provider.
	ms := s.mutations()
	ms[0].NIC = "tampered"
	if got := s.mutations()[0].NIC; got != "eni-a" {
		t.Fatalf("after editing a returned record, the provider's first mutation is on %q, want eni-a", got)
	}
}
