// Package handclock is a clock a test advances by hand, for code that takes
// its time from a func() time.Time: what falls inside a window, or after
// it, is then decided by the test, not by how busy the machine is.
package handclock

import (
	"sync"
	"time"
)

// Clock reads the time it was set to; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
