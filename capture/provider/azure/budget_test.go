package azure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var budgetStart = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// budgeted builds a driver paced by a budget on a clock the test
// advances, without jitter.
func budgeted(t *testing.T, e *env, clock *handclock.Clock, read, write callbudget.Limit) (*azure.Driver, *callbudget.Budget) {
	t.Helper()
	b := callbudget.New(callbudget.Options{
		Limits: callbudget.Limits{Read: read, Write: write}, Clock: clock,
		Jitter: func(time.Duration) time.Duration { return 0 },
	})
	// azcore gives up on a read whose Retry-After (the simulator's is
	// 1 s) is longer than MaxRetryDelay.
	return e.driver(t, func(o *azure.Options) { o.Budget, o.MaxRetryDelay = b, 2*time.Second }), b
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

// A burst of reads past the bucket reaches ARM no more than the bucket's
// size at once.
func TestBudgetHoldsABurst(t *testing.T) {
	e := newEnv(t, []string{"nic-a"})
	clock := handclock.New(budgetStart)
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 3, Rate: 1}, callbudget.Limit{Burst: 10, Rate: 10})
	const calls = 5
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := drv.Describe(t.Context(), ip)
			errs <- err
		}()
	}
	waitUntil(t, "3 lists sent and 2 waiting", func() bool {
		return clock.Sleepers() == 2 && e.cnt.count("GET list") == 3 || e.cnt.count("GET list") > 3
	})
	if n := e.cnt.count("GET list"); n != 3 {
		t.Fatalf("%d lists reached ARM at once, want the bucket's 3", n)
	}
	clock.Advance(2 * time.Second)
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.cnt.count("GET list"); n != calls {
		t.Fatalf("%d lists in all, want %d", n, calls)
	}
	if st := b.Stats(callbudget.Read); st.Waited != 2 || st.Wait != 3*time.Second {
		t.Fatalf("read stats %+v, want 2 waits of 3 s in all", st)
	}
}

// A 429 pauses every read for its Retry-After, not only the one
// throttled: azcore's retry of it and another call of the driver wait
// until the budget's clock passes the pause, and then succeed. A throttled PUT is not retried, and pauses the writes after it.
func TestBudgetPausesOn429(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	clock := handclock.New(budgetStart)
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	throttle := func(op string) {
		t.Helper()
		if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{op: {{Code: armsim.CodeTooManyRequests, Rate: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	heal := func() {
		t.Helper()
		if err := e.sim.SetFaults(armsim.Faults{}); err != nil {
			t.Fatal(err)
		}
	}
	throttle(armsim.OpList)
	first := make(chan error, 1)
	go func() {
		_, err := drv.Describe(t.Context(), ip)
		first <- err
	}()
	waitUntil(t, "the throttled list's retry waits for the pause", func() bool { return clock.Sleepers() == 1 })
	heal()
	second := make(chan error, 1)
	go func() {
		_, err := drv.Describe(t.Context(), ip)
		second <- err
	}()
	waitUntil(t, "another describe waits too", func() bool { return clock.Sleepers() == 2 || e.cnt.count("GET list") > 1 })
	if n := e.cnt.count("GET list"); n != 1 {
		t.Fatalf("%d lists reached ARM during the pause, want only the throttled one", n)
	}
	clock.Advance(2 * time.Second)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("describe after the pause: %v", err)
		}
	}
	if st := b.Stats(callbudget.Read); st.Throttled != 1 || st.Retries != 1 || st.Waited != 2 {
		t.Fatalf("read stats %+v, want 1 throttled, 1 retry, 2 waits", st)
	}

	throttle(armsim.OpPut)
	if err := drv.Assign(t.Context(), req("nic-a", 1), false); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled assign: %v", err)
	}
	if n := e.cnt.count("PUT nic"); n != 1 {
		t.Fatalf("the throttled PUT was sent %d times, want once", n)
	}
	heal()
	done := make(chan error, 1)
	go func() { done <- drv.Assign(t.Context(), req("nic-a", 2), false) }()
	waitUntil(t, "the next PUT waits for the write pause", func() bool { return clock.Sleepers() == 1 })
	if n := e.cnt.count("PUT nic"); n != 1 {
		t.Fatalf("a PUT went out during the write pause (%d sent)", n)
	}
	clock.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expect(t, drv, "nic-a", false)
	if st := b.Stats(callbudget.Write); st.Throttled != 1 || st.Retries != 0 || st.Waited != 1 {
		t.Fatalf("write stats %+v, want 1 throttled, no retry, 1 wait", st)
	}
}

// The readiness check stays the last step before the send: it is asked
// after the wait for the budget, not before (a long wait between the
// check and the send would let a paused pass act).
func TestBudgetWaitsBeforeReadiness(t *testing.T) {
	clock := handclock.New(budgetStart)
	e := newEnv(t, []string{"nic-a"})
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	b.Throttled(callbudget.Write, 5*time.Second)
	var asked time.Time
	ctx := gate.WithReady(t.Context(), func() error { asked = clock.Now(); return nil })
	done := make(chan error, 1)
	go func() { done <- drv.SetForwarding(ctx, provider.Request{NIC: "nic-a", Address: ip}, true) }()
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
	e := newEnv(t, []string{"nic-a"})
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	b.Throttled(callbudget.Write, 5*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- drv.SetForwarding(ctx, provider.Request{NIC: "nic-a", Address: ip}, true) }()
	waitUntil(t, "the write waits for the pause", func() bool { return clock.Sleepers() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a write whose context ended while it waited: %v, want context.Canceled", err)
	}
	if n := e.cnt.count("PUT nic"); n != 0 {
		t.Fatalf("%d writes sent, want none", n)
	}
}
