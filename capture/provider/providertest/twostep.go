package providertest

import (
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

// RunTwoStep runs the contract suite for a provider whose API has no
// atomic move, Azure's: a NIC's addresses change only by writing that
// NIC, and ARM refuses an address another NIC holds, so a move is two
// writes, off the old NIC and then onto the new one, and between them the
// address is on no NIC. Such a provider still never puts an address on two
// NICs. Every subtest of Run that involves no move of a held address runs
// unchanged; the three that assert the one-call move (Reassign,
// ConcurrentReassign, Record) are replaced by versions that assert the
// two-step one instead: the record shows the move as an unassign from the
// old NIC and then an assign (From empty) to the new one, observers may
// see the address on no NIC during a move but never anywhere else, and a
// racing mover may be refused with conflict (the provider's error for a
// conditional write whose read was superseded, such as a 412 on an etag),
// having changed nothing more after the refusal.
func RunTwoStep(t *testing.T, conflict error, newProvider func(t *testing.T, nics []string) provider.Provider) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s *suite)
	}{
		{"AssignThenDescribe", testAssignThenDescribe},
		{"AssignElsewhereWithoutReassign", testAssignElsewhereWithoutReassign},
		{"ReassignTwoStep", testReassignTwoStep},
		{"UnassignWrongNIC", testUnassignWrongNIC},
		{"UnassignRightNIC", testUnassignRightNIC},
		{"Idempotent", testIdempotent},
		{"Forwarding", testForwarding},
		{"UnknownNIC", testUnknownNIC},
		{"DescribeUnknownAddress", testDescribeUnknownAddress},
		{"ConcurrentReassignTwoStep", func(t *testing.T, s *suite) { testConcurrentReassignTwoStep(t, s, conflict) }},
		{"RecordTwoStep", testRecordTwoStep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, slices.Clone(NICs))
			rec, _ := p.(provider.Recorder)
			tc.run(t, &suite{t: t, p: p, rec: rec, ctx: t.Context()})
		})
	}
}

func testReassignTwoStep(t *testing.T, s *suite) {
	a := addr(1)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	r := s.req("eni-b", a)
	if err := s.p.Assign(s.ctx, r, true); err != nil {
		t.Fatalf("Assign to eni-b with reassignment = %v, want nil", err)
	}
	s.expect(a, "eni-b", false)
	s.expectRecorded(n,
		provider.Mutation{Call: capture.Unassign, NIC: "eni-a", Address: a, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey},
		provider.Mutation{Call: capture.Assign, NIC: "eni-b", Address: a, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey})
	s.unassign("eni-b", a)
	s.expect(a, "", false)
	s.assign("eni-c", a, true)
	s.expect(a, "eni-c", false)
}

// testConcurrentReassignTwoStep races seizes of one address, as
// testConcurrentReassign does: every observation shows it on one NIC or,
// mid-move, on none; every failed seize is a conflict; the record replays
// as unassigns from the holder and assigns onto no holder, and leaves the
// address where Describe finds it.
func testConcurrentReassignTwoStep(t *testing.T, s *suite, conflict error) {
	const (
		movers    = 6
		moves     = 25
		observers = 3
	)
	a := addr(9)
	s.assign(NICs[0], a, false)
	n := len(s.mutations())
	var movesDone sync.WaitGroup
	var succeeded, refused atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, movers+observers)
	for g := range movers {
		movesDone.Go(func() {
			nic := NICs[g%len(NICs)]
			for range moves {
				err := s.p.Assign(s.ctx, s.req(nic, a), true)
				switch {
				case err == nil:
					succeeded.Add(1)
				case errors.Is(err, conflict):
					refused.Add(1)
				default:
					errs <- fmt.Errorf("assign to %s with reassignment: %w", nic, err)
					return
				}
			}
		})
	}
	var observersDone sync.WaitGroup
	var observed, between atomic.Int64
	for range observers {
		observersDone.Go(func() {
			for {
				obs, err := s.p.Describe(s.ctx, a)
				if err != nil {
					errs <- fmt.Errorf("describe of %s: %w", a, err)
					return
				}
				if obs.NIC == "" {
					between.Add(1)
				} else if !slices.Contains(NICs, obs.NIC) {
					errs <- fmt.Errorf("observed %s on %q during moves, want one of %v or none", a, obs.NIC, NICs)
					return
				}
				observed.Add(1)
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
	if succeeded.Load() == 0 {
		t.Fatalf("none of %d seizes succeeded (%d refused as conflicts)", movers*moves, refused.Load())
	}
	if observed.Load() < observers {
		t.Fatalf("%d observations, want at least %d", observed.Load(), observers)
	}
	t.Logf("%d seizes succeeded, %d refused as conflicts; %d of %d observations saw the address between two NICs", succeeded.Load(), refused.Load(), between.Load(), observed.Load())
	obs, err := s.p.Describe(s.ctx, a)
	if err != nil {
		t.Fatalf("Describe = %v", err)
	}
	if ms := s.mutations(); ms != nil {
		checkTwoStepMoves(t, a, NICs[0], ms[n:], obs.NIC)
	}
	if obs.NIC != "" {
		s.unassign(obs.NIC, a)
	}
	s.expect(a, "", false)
}

// checkTwoStepMoves replays a record of two-step moves of a from holder:
// an unassign only from the NIC holding the address, an assign only when
// no NIC holds it, and the end where Describe says.
func checkTwoStepMoves(t *testing.T, a netip.Addr, holder string, ms []provider.Mutation, final string) {
	t.Helper()
	for i, m := range ms {
		if m.Address != a || (m.Call != capture.Assign && m.Call != capture.Unassign) {
			t.Fatalf("mutation %d = %+v, want only assigns and unassigns of %s", i, m, a)
		}
		if m.From != "" {
			t.Fatalf("mutation %d = %+v moved the address in one step, which this provider cannot", i, m)
		}
		switch m.Call {
		case capture.Unassign:
			if m.NIC != holder {
				t.Fatalf("mutation %d took %s off %s, but it was on %q", i, a, m.NIC, holder)
			}
			holder = ""
		case capture.Assign:
			if holder != "" {
				t.Fatalf("mutation %d put %s on %s while %s held it: on two NICs", i, a, m.NIC, holder)
			}
			holder = m.NIC
		}
	}
	if holder != final {
		t.Fatalf("the record leaves %s on %q, Describe says %q", a, holder, final)
	}
}

// testRecordTwoStep is testRecord with the move recorded in two steps.
func testRecordTwoStep(t *testing.T, s *suite) {
	if s.rec == nil {
		t.Skip("provider keeps no record of mutations")
	}
	a := addr(1)
	if ms := s.mutations(); len(ms) != 0 {
		t.Fatalf("fresh provider recorded %+v, want nothing", ms)
	}
	mut := func(call capture.Kind, nic string, r provider.Request) provider.Mutation {
		return provider.Mutation{Call: call, NIC: nic, Address: r.Address, Epoch: r.Epoch, IdempotencyKey: r.IdempotencyKey}
	}
	assign := provider.Request{NIC: "eni-a", Address: a, Epoch: 7, IdempotencyKey: "pool:azure:eni-a:assign-secondary-ip:10.0.0.1:epoch:7"}
	if err := s.p.Assign(s.ctx, assign, false); err != nil {
		t.Fatal(err)
	}
	want := []provider.Mutation{mut(capture.Assign, "eni-a", assign)}
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
	move := provider.Request{NIC: "eni-b", Address: a, Epoch: 8, IdempotencyKey: "pool:azure:eni-b:assign-secondary-ip:10.0.0.1:epoch:8"}
	if err := s.p.Assign(s.ctx, move, true); err != nil {
		t.Fatal(err)
	}
	want = append(want, mut(capture.Unassign, "eni-a", move), mut(capture.Assign, "eni-b", move))
	on := provider.Request{NIC: "eni-b", Address: a, Epoch: 8, IdempotencyKey: "pool:azure:eni-b:ensure-forwarding-enabled:10.0.0.1:epoch:8"}
	if err := s.p.SetForwarding(s.ctx, on, true); err != nil {
		t.Fatal(err)
	}
	m := mut(capture.EnableForwarding, "eni-b", on)
	m.Enabled = true
	want = append(want, m)
	release := provider.Request{NIC: "eni-b", Address: a, Epoch: 9, IdempotencyKey: "pool:azure:eni-b:unassign-secondary-ip:10.0.0.1:epoch:9"}
	if err := s.p.Unassign(s.ctx, release); err != nil {
		t.Fatal(err)
	}
	want = append(want, mut(capture.Unassign, "eni-b", release))
	s.expectRecorded(0, want...)
	ms := s.mutations()
	ms[0].NIC = "tampered"
	if got := s.mutations()[0].NIC; got != "eni-a" {
		t.Fatalf("after editing a returned record, the provider's first mutation is on %q, want eni-a", got)
	}
}
