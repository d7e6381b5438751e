package control

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestWaitListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shut := closed.Addr().String()
	closed.Close()
	defer ln.Close()
	ctx := context.Background()
	if err := WaitListening(ctx, open, time.Minute, func() bool { return true }); err != nil {
		t.Errorf("listening address: %v", err)
	}
	if err := WaitListening(ctx, shut, time.Minute, func() bool { return false }); !errors.Is(err, ErrGone) {
		t.Errorf("a daemon that exited: %v, want ErrGone", err)
	}
	if err := WaitListening(ctx, shut, 300*time.Millisecond, func() bool { return true }); !errors.Is(err, ErrNotListening) {
		t.Errorf("nothing listening: %v, want ErrNotListening", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := WaitListening(cancelled, shut, time.Minute, func() bool { return true }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
