package oci_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var budgetStart = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// budgeted builds a driver paced by a budget on a clock the test
// advances, without jitter.
func budgeted(t *testing.T, e *env, clock *handclock.Clock, read, write callbudget.Limit) (*oci.Driver, *callbudget.Budget) {
	t.Helper()
	b := callbudget.New(callbudget.Options{
		Limits: callbudget.Limits{Read: read, Write: write}, Clock: clock,
		Jitter: func(time.Duration) time.Duration { return 0 },
	})
	_, pemKey := testKey(t)
	return e.driver(t, pemKey, func(o *oci.Options) { o.Budget = b }), b
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

// A burst of reads past the bucket reaches OCI no more than the bucket's
// size at once.
func TestBudgetHoldsABurst(t *testing.T) {
	e := newEnv(t, []string{"vnic-a"})
	clock := handclock.New(budgetStart)
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 3, Rate: 1}, callbudget.Limit{Burst: 10, Rate: 10})
	const calls = 5
	list := ocisim.OpListPrivateIps
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := drv.Describe(t.Context(), ip)
			errs <- err
		}()
	}
	waitUntil(t, "3 lists sent and 2 waiting", func() bool {
		return clock.Sleepers() == 2 && e.cnt.count(list) == 3 || e.cnt.count(list) > 3
	})
	if n := e.cnt.count(list); n != 3 {
		t.Fatalf("%d lists reached OCI at once, want the bucket's 3", n)
	}
	clock.Advance(2 * time.Second)
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.cnt.count(list); n != calls {
		t.Fatalf("%d lists in all, want %d", n, calls)
	}
	if st := b.Stats(callbudget.Read); st.Waited != 2 || st.Wait != 3*time.Second {
		t.Fatalf("read stats %+v, want 2 waits of 3 s in all", st)
	}
}

// A storm of 429s pauses every read, not only the throttled one, for the
// backoff (OCI's answer here carries no Retry-After); the driver's read
// retry and another call then succeed. A throttled write is not retried,
// and pauses the writes after it; nothing is lost.
func TestBudgetPausesOn429(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	clock := handclock.New(budgetStart)
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	list := ocisim.OpListPrivateIps
	e.cnt.setFail(list, failure{n: 1, status: http.StatusTooManyRequests, code: "TooManyRequests"})
	first := make(chan error, 1)
	go func() {
		_, err := drv.Describe(t.Context(), ip)
		first <- err
	}()
	waitUntil(t, "the throttled list's retry waits for the pause", func() bool { return clock.Sleepers() == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := drv.Describe(t.Context(), ip)
		second <- err
	}()
	waitUntil(t, "another describe waits too", func() bool { return clock.Sleepers() == 2 || e.cnt.count(list) > 1 })
	if n := e.cnt.count(list); n != 1 {
		t.Fatalf("%d lists reached OCI during the pause, want only the throttled one", n)
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

	create := ocisim.OpCreatePrivateIp
	e.cnt.setFail(create, failure{n: 1, status: http.StatusTooManyRequests, code: "TooManyRequests"})
	if err := drv.Assign(t.Context(), req("vnic-a", 1), false); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled assign: %v", err)
	}
	if n := e.cnt.count(create); n != 1 {
		t.Fatalf("the throttled create was sent %d times, want once", n)
	}
	done := make(chan error, 1)
	go func() { done <- drv.Assign(t.Context(), req("vnic-a", 2), false) }()
	waitUntil(t, "the next create waits for the write pause", func() bool { return clock.Sleepers() == 1 })
	if n := e.cnt.count(create); n != 1 {
		t.Fatalf("a create went out during the write pause (%d sent)", n)
	}
	clock.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if obs, err := drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-a" {
		t.Fatalf("after the storm the address is on %q (%v), want vnic-a", obs.NIC, err)
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
	e := newEnv(t, []string{"vnic-a"})
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	b.Throttled(callbudget.Write, 5*time.Second)
	var asked time.Time
	ctx := gate.WithReady(t.Context(), func() error { asked = clock.Now(); return nil })
	done := make(chan error, 1)
	go func() { done <- drv.SetForwarding(ctx, provider.Request{NIC: "vnic-a", Address: ip}, true) }()
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
	e := newEnv(t, []string{"vnic-a"})
	drv, b := budgeted(t, e, clock, callbudget.Limit{Burst: 10, Rate: 10}, callbudget.Limit{Burst: 10, Rate: 10})
	b.Throttled(callbudget.Write, 5*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- drv.SetForwarding(ctx, provider.Request{NIC: "vnic-a", Address: ip}, true) }()
	waitUntil(t, "the write waits for the pause", func() bool { return clock.Sleepers() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a write whose context ended while it waited: %v, want context.Canceled", err)
	}
	if n := e.cnt.count(ocisim.OpUpdateVnic); n != 0 {
		t.Fatalf("%d writes sent, want none", n)
	}
}
