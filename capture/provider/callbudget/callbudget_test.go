package callbudget_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func TestBucketBurstAndRefill(t *testing.T) {
	b := callbudget.NewBucket(callbudget.Limit{Burst: 3, Rate: 2}, t0)
	for i := range 3 {
		if d := b.Take(t0); d != 0 {
			t.Fatalf("call %d of a burst of 3 waits %v, want 0", i+1, d)
		}
	}
	// The fourth and fifth wait for the refill, half a second apart.
	if d := b.Take(t0); d != 500*time.Millisecond {
		t.Fatalf("the 4th call waits %v, want 500ms", d)
	}
	if d := b.Take(t0); d != time.Second {
		t.Fatalf("the 5th call waits %v, want 1s", d)
	}
	// Ten seconds refill the bucket to its burst, not to 20 tokens.
	now := t0.Add(10 * time.Second)
	for i := range 3 {
		if d := b.Take(now); d != 0 {
			t.Fatalf("after a long rest, call %d waits %v, want 0", i+1, d)
		}
	}
	if d := b.Take(now); d != 500*time.Millisecond {
		t.Fatalf("past the burst after a rest, a call waits %v, want 500ms", d)
	}
}

func TestBucketClockGoingBackRefillsNothing(t *testing.T) {
	b := callbudget.NewBucket(callbudget.Limit{Burst: 1, Rate: 1}, t0)
	b.Take(t0)
	// The clock steps back 5 s, then forward to t0+1s: only the one
	// second after t0 earns a token, not the 5 s spent going back.
	if d := b.Take(t0.Add(-5 * time.Second)); d != 6*time.Second {
		t.Fatalf("with the clock 5 s back, a call waits %v, want 6s (nothing refilled)", d)
	}
	if d := b.Take(t0.Add(time.Second)); d != time.Second {
		t.Fatalf("a second after t0, the 3rd call waits %v, want 1s", d)
	}
}

func TestBucketPauseAndGive(t *testing.T) {
	b := callbudget.NewBucket(callbudget.Limit{Burst: 10, Rate: 4}, t0)
	b.Pause(t0, 2*time.Second)
	if got := b.PausedUntil(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("paused until %v, want t0+2s", got)
	}
	// A full bucket is emptied by the pause; the first call goes when it
	// ends, the next a refill later.
	if d := b.Take(t0); d != 2*time.Second+250*time.Millisecond {
		t.Fatalf("the first call in a pause waits %v, want 2.25s", d)
	}
	b.Give(t0)
	if d := b.Take(t0.Add(time.Second)); d != 2*time.Second-time.Second+250*time.Millisecond {
		t.Fatalf("after a token given back, a call waits %v, want 1.25s", d)
	}
	// A shorter pause does not cut a longer one short.
	b.Pause(t0, time.Second)
	if got := b.PausedUntil(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("a shorter pause moved the end to %v", got)
	}
}

func newBudget(clock *handclock.Clock, jitter func(time.Duration) time.Duration) *callbudget.Budget {
	return callbudget.New(callbudget.Options{
		Limits: callbudget.Limits{Read: callbudget.Limit{Burst: 2, Rate: 1}, Write: callbudget.Limit{Burst: 1, Rate: 1}},
		Clock:  clock, Jitter: jitter, Backoff: time.Second, MaxBackoff: 8 * time.Second,
	})
}

func TestThrottledPausesWithBoundedJitter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		jitter func(time.Duration) time.Duration
		want   time.Duration
	}{
		{"no jitter", func(time.Duration) time.Duration { return 0 }, 4 * time.Second},
		{"most jitter", func(max time.Duration) time.Duration { return max }, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := handclock.New(t0)
			b := newBudget(clock, tc.jitter)
			b.Throttled(callbudget.Read, 4*time.Second)
			st := b.Stats(callbudget.Read)
			if st.Throttled != 1 {
				t.Fatalf("throttled = %d, want 1", st.Throttled)
			}
			// Both reads of the account wait, not only the throttled one.
			errs := make(chan error, 2)
			for range 2 {
				go func() { errs <- b.Wait(context.Background(), callbudget.Read) }()
			}
			waitFor(t, func() bool { return clock.Sleepers() == 2 })
			clock.Advance(tc.want - time.Millisecond)
			if n := clock.Sleepers(); n != 2 {
				t.Fatalf("%d of 2 reads went before the pause of %v ended", 2-n, tc.want)
			}
			// Writes are another bucket: not paused.
			if err := b.Wait(context.Background(), callbudget.Write); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Second)
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if st := b.Stats(callbudget.Read); st.Waited != 2 {
				t.Fatalf("waited = %d, want 2", st.Waited)
			}
		})
	}
}

func TestJitterIsBounded(t *testing.T) {
	// The default jitter, drawn many times, never pauses less than the
	// answer said nor more than a quarter longer.
	for range 200 {
		clock := handclock.New(t0)
		b := callbudget.New(callbudget.Options{Limits: callbudget.Limits{Read: callbudget.Limit{Burst: 1, Rate: 1000}, Write: callbudget.Limit{Burst: 1, Rate: 1000}}, Clock: clock})
		b.Throttled(callbudget.Read, 4*time.Second)
		done := make(chan error, 1)
		go func() { done <- b.Wait(context.Background(), callbudget.Read) }()
		waitFor(t, func() bool { return clock.Sleepers() == 1 })
		st := b.Stats(callbudget.Read)
		if st.Wait < 4*time.Second || st.Wait > 5*time.Second+time.Millisecond {
			t.Fatalf("a Retry-After of 4s made a wait of %v, want 4s to 5s (plus a refill)", st.Wait)
		}
		clock.Advance(6 * time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestBackoffGrowsWhileThrottledAndResets(t *testing.T) {
	clock := handclock.New(t0)
	b := newBudget(clock, func(time.Duration) time.Duration { return 0 })
	var got []time.Duration
	for range 5 {
		b.Throttled(callbudget.Read, 0)
		// A second throttled answer in the same pause (a call sent
		// before it) does not lengthen it.
		b.Throttled(callbudget.Read, 0)
		got = append(got, pausedFor(b, clock))
		clock.Advance(got[len(got)-1])
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
	b.Answered(callbudget.Read)
	b.Throttled(callbudget.Read, 0)
	if d := pausedFor(b, clock); d != time.Second {
		t.Fatalf("after an answer, the backoff is %v, want 1s again", d)
	}
}

// pausedFor is how long the read bucket is paused from now, read through a
// Wait with an ended context (which gives its token back): the wait less
// the one refill (1 s) that follows every pause, which empties the bucket.
func pausedFor(b *callbudget.Budget, clock *handclock.Clock) time.Duration {
	before := b.Stats(callbudget.Read).Wait
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = b.Wait(ctx, callbudget.Read)
	return b.Stats(callbudget.Read).Wait - before - time.Second
}

func TestWaitEndsWithTheContext(t *testing.T) {
	clock := handclock.New(t0)
	b := newBudget(clock, nil)
	if err := b.Wait(context.Background(), callbudget.Write); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, callbudget.Write) }()
	waitFor(t, func() bool { return clock.Sleepers() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose context ended: %v, want context.Canceled", err)
	}
	// The token the abandoned call reserved is back: a second later one
	// call goes at once.
	clock.Advance(time.Second)
	if d := callbudgetWait(b, clock); d != 0 {
		t.Fatalf("after an abandoned wait and 1 s, a write waits %v, want 0", d)
	}
}

func callbudgetWait(b *callbudget.Budget, clock *handclock.Clock) time.Duration {
	before := b.Stats(callbudget.Write).Wait
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background(), callbudget.Write) }()
	for {
		select {
		case <-done:
			return b.Stats(callbudget.Write).Wait - before
		default:
		}
		if clock.Sleepers() > 0 {
			clock.Advance(time.Hour)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRetriesAreCounted(t *testing.T) {
	b := newBudget(handclock.New(t0), nil)
	ctx := callbudget.Call(context.Background())
	for range 2 {
		if err := b.Wait(ctx, callbudget.Read); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wait(callbudget.Call(context.Background()), callbudget.Write); err != nil {
		t.Fatal(err)
	}
	if r, w := b.Stats(callbudget.Read).Retries, b.Stats(callbudget.Write).Retries; r != 1 || w != 0 {
		t.Fatalf("retries: read %d, write %d; want 1 and 0", r, w)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {t0.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{http.Header{"X-Ms-Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{http.Header{}, 0},
	} {
		if got := callbudget.RetryAfter(tc.h, t0); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	for _, l := range []callbudget.Limits{callbudget.EC2, callbudget.ARM, callbudget.OCI} {
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := (callbudget.Limits{Read: callbudget.Limit{Burst: 1, Rate: 1}}).Check(); err == nil {
		t.Fatal("a write bucket of 0 passed the check")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}
