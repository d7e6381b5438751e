// Package handclock is a clock a test advances by hand, for code that takes
// its time from a func() time.Time: what falls inside a window, or after
// it, is then decided by the test, not by how busy the machine is.
package handclock

import (
	"context"
	"sync"
	"time"
)

// Clock reads the time it was set to; safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	sleeper []sleeper
}

// sleeper is a Sleep waiting for the clock to reach at.
type sleeper struct {
	at   time.Time
	wake chan struct{}
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d, waking the sleeps it carries past
// their end.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.sleeper[:0]
	for _, s := range c.sleeper {
		if c.now.Before(s.at) {
			kept = append(kept, s)
			continue
		}
		close(s.wake)
	}
	c.sleeper = kept
}

// Sleep returns once Advance has moved the clock d past the time of the
// call, or with the context's error when it ends first.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return ctx.Err()
	}
	s := sleeper{at: c.now.Add(d), wake: make(chan struct{})}
	c.sleeper = append(c.sleeper, s)
	c.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		for i, o := range c.sleeper {
			if o.wake == s.wake {
				c.sleeper = append(c.sleeper[:i], c.sleeper[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Sleepers is how many Sleeps are waiting for the clock.
func (c *Clock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleeper)
}
