// Package gate is the one place that decides whether an action is stale.
// It is called at import (a stale action is not imported), by the journal
// sweep (stale pending and approved rows are skipped), and at execute, in
// the transaction that claims a row right before the provider call. A
// zombie's actions carry an old epoch and die here.
package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipfence/ipfence/capture"
)

// Check returns why action a is stale against its key's current record, or
// "" when it may proceed. An action is stale when its epoch is not the
// current one, when it is an acquire for a node that is no longer the
// holder, or when it is a release by a node that is the holder again.
func Check(a *capture.Action, cur capture.EpochRecord, known bool) string {
	switch {
	case !known:
		return fmt.Sprintf("no epoch is recorded for %s", a.Key)
	case a.Epoch != cur.Epoch:
		return fmt.Sprintf("epoch %d is not the current epoch %d", a.Epoch, cur.Epoch)
	case a.Kind.Acquire() && a.Holder != cur.Holder:
		return fmt.Sprintf("acquire for %s, but the holder at epoch %d is %s", a.Holder, cur.Epoch, holderName(cur.Holder))
	case !a.Kind.Acquire() && a.Holder == cur.Holder:
		return fmt.Sprintf("release by %s, which is the holder again at epoch %d", a.Holder, cur.Epoch)
	}
	return ""
}

func holderName(h string) string {
	if h == "" {
		return "nobody"
	}
	return h
}

// readyKey is the context key of the readiness check WithReady attaches.
type readyKey struct{}

// WithReady returns ctx carrying the node's readiness check, for a driver
// to ask with Ready as the last thing before it sends a change. The
// executor asks readiness before a call too, but a driver may look first
// (a describe, pages of one, backoff) and a paused process may stop
// anywhere in between: only a check made right before the send, after any
// pause, sees the time the pause took and the epoch records that moved
// meanwhile.
func WithReady(ctx context.Context, ready func() error) context.Context {
	if ready == nil {
		return ctx
	}
	return context.WithValue(ctx, readyKey{}, ready)
}

// ErrNotReady wraps the readiness check's error when a driver refused to
// send a change: the provider was not called.
var ErrNotReady = errors.New("not sent: this node is not ready to act")

// Ready asks the readiness check ctx carries: nil when it carries none or
// the check passes, else the check's error wrapped in ErrNotReady.
func Ready(ctx context.Context) error {
	f, _ := ctx.Value(readyKey{}).(func() error)
	if f == nil {
		return nil
	}
	if err := f(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return nil
}
