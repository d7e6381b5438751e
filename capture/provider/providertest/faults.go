package providertest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
)

// Faults is what a test offers to break the provider under test, so that
// the same fault cases run against every provider: the in-memory one
// directly, a cloud driver through its simulator's admin API.
type Faults interface {
	// FailMutations makes every mutating call fail, before it takes
	// effect, with err (provider.ErrThrottled or provider.ErrUnavailable),
	// until Heal.
	FailMutations(err error)
	// SetDelay makes mutations visible only after d, as a cloud that
	// remaps asynchronously does.
	SetDelay(d time.Duration)
	// Heal removes every fault.
	Heal()
}

// RunFaults runs the fault cases of the contract: throttling, server
// errors, asynchronous remap, an old holder's late release after a seize,
// and two nodes acquiring the same address at once. newProvider builds a
// fresh provider and the handle on its faults.
func RunFaults(t *testing.T, newProvider func(t *testing.T, nics []string) (provider.Provider, Faults)) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s *suite, f Faults)
	}{
		{"Throttled", func(t *testing.T, s *suite, f Faults) { testFailure(t, s, f, provider.ErrThrottled) }},
		{"ServerError", func(t *testing.T, s *suite, f Faults) { testFailure(t, s, f, provider.ErrUnavailable) }},
		{"AsyncRemap", testAsyncRemap},
		{"LateReleaseAfterSeize", testLateReleaseAfterSeize},
		{"TwoAcquireAtOnce", testTwoAcquireAtOnce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, f := newProvider(t, slices.Clone(NICs))
			t.Cleanup(f.Heal)
			rec, _ := p.(provider.Recorder)
			tc.run(t, &suite{t: t, p: p, rec: rec, ctx: t.Context()}, f)
		})
	}
}

// A failed call changes nothing, reports the fault's kind, and the same
// call succeeds once the fault is gone.
func testFailure(t *testing.T, s *suite, f Faults, kind error) {
	a := addr(40)
	s.assign("eni-a", a, false)
	n := len(s.mutations())
	f.FailMutations(kind)
	calls := map[string]error{
		"Assign":        s.p.Assign(s.ctx, s.req("eni-b", a), true),
		"Unassign":      s.p.Unassign(s.ctx, s.req("eni-a", a)),
		"SetForwarding": s.p.SetForwarding(s.ctx, s.req("eni-a", a), true),
	}
	for name, err := range calls {
		if !errors.Is(err, kind) {
			t.Errorf("%s under %v = %v, want it", name, kind, err)
		}
	}
	f.Heal()
	s.expect(a, "eni-a", false)
	s.expectRecorded(n)
	s.assign("eni-b", a, true)
	s.expect(a, "eni-b", false)
}

// A move acknowledged before it is visible: the address shows on exactly
// one NIC at every look, the old one until the new one.
func testAsyncRemap(t *testing.T, s *suite, f Faults) {
	a := addr(41)
	s.assign("eni-a", a, false)
	f.SetDelay(300 * time.Millisecond)
	s.assign("eni-b", a, true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs, err := s.p.Describe(s.ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if obs.NIC != "eni-a" && obs.NIC != "eni-b" {
			t.Fatalf("during the remap %s is on %q", a, obs.NIC)
		}
		if obs.NIC == "eni-b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move never became visible")
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.Heal()
}

// A seize (acquire with reassignment) followed by the old holder's late
// release: the release is scoped to the old NIC and cannot strip the new
// holder.
func testLateReleaseAfterSeize(t *testing.T, s *suite, f Faults) {
	a := addr(42)
	s.assign("eni-a", a, false)
	s.assign("eni-b", a, true)
	s.unassign("eni-a", a)
	s.expect(a, "eni-b", false)
}

// Two nodes acquire one address at the same time. Without reassignment one
// wins and the other is told the address is elsewhere; with it, both calls
// succeed and the address ends on exactly one of them.
func testTwoAcquireAtOnce(t *testing.T, s *suite, f Faults) {
	for round, reassign := range []bool{false, true} {
		a := addr(byte(43 + round))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, nic := range []string{"eni-a", "eni-b"} {
			wg.Go(func() {
				<-start
				errs[i] = s.p.Assign(s.ctx, s.req(nic, a), reassign)
			})
		}
		close(start)
		wg.Wait()
		obs, err := s.p.Describe(s.ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if obs.NIC != "eni-a" && obs.NIC != "eni-b" {
			t.Fatalf("reassign=%t: %s ended on %q", reassign, a, obs.NIC)
		}
		if reassign {
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("reassign: errors %v", errs)
			}
			continue
		}
		winner := 0
		if obs.NIC == "eni-b" {
			winner = 1
		}
		if errs[winner] != nil || !errors.Is(errs[1-winner], provider.ErrAssignedElsewhere) {
			t.Fatalf("without reassign: holder %s, errors %v", obs.NIC, errs)
		}
	}
}
