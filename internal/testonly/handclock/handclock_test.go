package handclock_test

import (
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

func TestAdvance(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := handclock.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("a new clock reads %v, want %v", got, start)
	}
	c.Advance(1500 * time.Millisecond)
	c.Advance(-500 * time.Millisecond)
	if got, want := c.Now(), start.Add(time.Second); !got.Equal(want) {
		t.Fatalf("after +1.5 s and -0.5 s the clock reads %v, want %v", got, want)
	}
}
