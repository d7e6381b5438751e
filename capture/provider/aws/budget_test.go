package aws_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var budgetStart = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// testBudget paces on a clock the test advances, without jitter.
func testBudget(clock *handclock.Clock, read, write callbudget.Limit) *callbudget.Budget {
	return callbudget.New(callbudget.Options{
		Limits: callbudget.Limits{Read: read, Write: write}, Clock: clock,
		Jitter: func(time.Duration) time.Duration { return 0 },
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A burst past the bucket reaches EC2 no more than the bucket's size at
// once; the rest go one a refill later.
func TestBudgetHoldsABurst(t *testing.T) {
	clock := handclock.New(budgetStart)
	b := testBudget(clock, callbudget.Limit{Burst: 3, Rate: 1}, callbudget.Limit{Burst: 10, Rate: 10})
	e := newEnvWith(t, []string{"eni-a"}, b)
	const calls = 5
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := e.drv.Describe(t.Context(), ip)
			errs <- err
		}()
	}
	const action = "DescribeNetworkInterfaces"
	waitUntil(t, "3 describes sent and 2 waiting", func() bool { return clock.Sleepers() == 2 && e.cnt.count(action) == 3 || e.cnt.count(action) > 3 })
	if n := e.cnt.count(action); n != 3 {
		t.Fatalf("%d describes reached EC2 at once, want the bucket's 3", n)
	}
	clock.Advance(time.Second)
	waitUntil(t, "a 4th describe a second later", func() bool { return e.cnt.count(action) == 4 })
	if n := clock.Sleepers(); n != 1 {
		t.Fatalf("%d describes still wait a second later, want 1", n)
	}
	clock.Advance(time.Second)
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats(callbudget.Read)
	if st.Waited != 2 || st.Wait != 3*time.Second || st.Throttled != 0 {
		t.Fatalf("read stats %+v, want 2 waits of 3 s in all, none throttled", st)
	}
}

// RequestLimitExceeded pauses every read of the account, not only the
// one throttled; the driver's read retry then succeeds, and a throttled
// write is never retried but pauses the writes after it.
func TestBudgetPausesOnRequestLimitExceeded(t *testing.T) {
	clock := handclock.New(budgetStart)
	b := testBudget(clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	e := newEnvWith(t, []string{"eni-a", "eni-b"}, b)
	const action = "DescribeNetworkInterfaces"
	e.cnt.setFail(action, failure{n: 1, status: 503, code: "RequestLimitExceeded"})
	type result struct {
		nic string
		err error
	}
	first := make(chan result, 1)
	go func() {
		obs, err := e.drv.Describe(t.Context(), ip)
		first <- result{obs.NIC, err}
	}()
	waitUntil(t, "the throttled describe's retry waits for the pause", func() bool { return clock.Sleepers() == 1 })
	second := make(chan result, 1)
	go func() {
		obs, err := e.drv.Describe(t.Context(), ip)
		second <- result{obs.NIC, err}
	}()
	waitUntil(t, "a second describe waits for the pause too", func() bool { return clock.Sleepers() == 2 || e.cnt.count(action) > 1 })
	if n := e.cnt.count(action); n != 1 {
		t.Fatalf("%d describes reached EC2 during the pause, want only the throttled one", n)
	}
	clock.Advance(time.Second)
	for _, ch := range []chan result{first, second} {
		if r := <-ch; r.err != nil || r.nic != "" {
			t.Fatalf("describe after the pause: %q %v", r.nic, r.err)
		}
	}
	if n := e.cnt.count(action); n != 3 {
		t.Fatalf("describes sent %d times, want 3 (one throttled, its retry, the other)", n)
	}
	st := b.Stats(callbudget.Read)
	if st.Throttled != 1 || st.Retries != 1 || st.Waited != 2 {
		t.Fatalf("read stats %+v, want 1 throttled, 1 retry, 2 waits", st)
	}

	e.cnt.setFail("AssignPrivateIpAddresses", failure{n: 1, status: 503, code: "RequestLimitExceeded"})
	if err := e.drv.Assign(t.Context(), req("eni-a", 1), true); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled assign: %v", err)
	}
	if n := e.cnt.count("AssignPrivateIpAddresses"); n != 1 {
		t.Fatalf("the throttled assign was sent %d times, want once", n)
	}
	done := make(chan error, 1)
	go func() { done <- e.drv.Assign(t.Context(), req("eni-a", 2), true) }()
	waitUntil(t, "the next assign waits for the write pause", func() bool { return clock.Sleepers() == 1 })
	if n := e.cnt.count("AssignPrivateIpAddresses"); n != 1 {
		t.Fatalf("an assign went out during the write pause (%d sent)", n)
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "eni-a" {
		t.Fatalf("after the storm the address is on %q (%v), want eni-a", obs.NIC, err)
	}
	if st := b.Stats(callbudget.Write); st.Throttled != 1 || st.Retries != 0 || st.Waited != 1 {
		t.Fatalf("write stats %+v, want 1 throttled, no retry, 1 wait", st)
	}
}

// The readiness check stays the last step before the send: it is asked
// after the wait for the budget, not before (a long wait between the
// check and the send would let a paused pass act).
func TestBudgetWaitsBeforeReadiness(t *testing.T) {
	clock := handclock.New(budgetStart)
	b := testBudget(clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	e := newEnvWith(t, []string{"eni-a"}, b)
	b.Throttled(callbudget.Write, 5*time.Second)
	var asked time.Time
	ctx := gate.WithReady(t.Context(), func() error { asked = clock.Now(); return nil })
	done := make(chan error, 1)
	go func() { done <- e.drv.SetForwarding(ctx, req("eni-a", 1), true) }()
	waitUntil(t, "the write waits for the pause", func() bool { return clock.Sleepers() == 1 })
	clock.Advance(6 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if asked.Before(budgetStart.Add(5 * time.Second)) {
		t.Fatalf("readiness asked at %v, before the budget's pause ended at %v", asked, budgetStart.Add(5*time.Second))
	}
}

// A call whose context ends while it waits for the budget is not sent,
// and fails with the context's error.
func TestBudgetWaitEndsWithTheContext(t *testing.T) {
	clock := handclock.New(budgetStart)
	b := testBudget(clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	e := newEnvWith(t, []string{"eni-a"}, b)
	b.Throttled(callbudget.Write, 5*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.drv.SetForwarding(ctx, req("eni-a", 1), true) }()
	waitUntil(t, "the write waits for the pause", func() bool { return clock.Sleepers() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a write whose context ended while it waited: %v, want context.Canceled", err)
	}
	if n := e.cnt.count("ModifyNetworkInterfaceAttribute"); n != 0 {
		t.Fatalf("%d writes sent, want none", n)
	}
}
