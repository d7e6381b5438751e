package handclock_test

import (
	"context"
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

func TestSleepWakesOnAdvance(t *testing.T) {
	c := handclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan error, 1)
	go func() { done <- c.Sleep(context.Background(), time.Second) }()
	deadline := time.Now().Add(30 * time.Second)
	for c.Sleepers() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sleep never registered")
		}
		time.Sleep(time.Millisecond)
	}
	c.Advance(999 * time.Millisecond)
	if c.Sleepers() != 1 {
		t.Fatalf("a sleep of 1 s woke after 999 ms: %d sleepers left", c.Sleepers())
	}
	c.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Second); err != context.Canceled {
		t.Fatalf("sleep with an ended context: %v, want context.Canceled", err)
	}
	if c.Sleepers() != 0 {
		t.Fatalf("an abandoned sleep stays registered: %d", c.Sleepers())
	}
}
