package control

import (
	"context"
	"errors"
	"net"
	"time"
)

// ErrNotListening is returned by WaitListening when the address did not
// accept a connection in time.
var ErrNotListening = errors.New("not listening")

// WaitListening waits until addr accepts TCP connections, for at most
// limit: how a harness knows a daemon it started on a node is up, when
// the daemon says nothing the harness can read. running, asked between
// tries, ends the wait with ErrGone when the daemon has exited, so that a
// daemon that died at its start is reported at once, not after limit.
func WaitListening(ctx context.Context, addr string, limit time.Duration, running func() bool) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if !running() {
			return ErrGone
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return ErrNotListening
}
