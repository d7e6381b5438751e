package daemon

import (
	"testing"
	"time"
)

// TestRetryAfter: a failed provider call is run again two reconcile
// intervals later, at least a second and at most ten seconds (the store's
// default, which every interval got before: 8 s outages after a provider
// fault had healed).
func TestRetryAfter(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{10 * time.Millisecond, time.Second},
		{500 * time.Millisecond, time.Second},
		{time.Second, 2 * time.Second},
		{3 * time.Second, 6 * time.Second},
		{5 * time.Second, 10 * time.Second},
		{time.Minute, 10 * time.Second},
	} {
		if got := retryAfter(c.interval); got != c.want {
			t.Errorf("reconcile interval %s: retry after %s, want %s", c.interval, got, c.want)
		}
	}
}
