// Package harness runs Jepsen-style tests: a generator's operations are
// handed to one worker per logical process, which invokes them on a client
// of the system under test (or on the nemesis, which injects faults); a
// recorder streams every invocation and completion to history.jsonl as it
// happens; when the generator is exhausted the faults are healed, the
// checkers read the history, and everything lands in one folder of the
// store.
//
// The generator is pure (verify/gen); the harness is its interpreter, the
// only place where real time passes.
package harness

import (
	"context"

	"github.com/ipfence/ipfence/verify/history"
)

// Op is an operation a worker hands to its client or nemesis.
type Op struct {
	Process history.Process
	F       string
	Value   history.Value
}

// Completion is how an operation ended. Type is OK when it took effect, Fail
// when it certainly did not, and Info when nobody knows: a client that
// times out or loses its connection must answer Info, never Fail. The zero
// Type (Invoke) is not a completion; the worker turns it into Info with an
// error saying so.
type Completion struct {
	Type  history.Type
	Value history.Value
	Error history.Value
}

// OK, Fail and Info build completions.
func OK(v history.Value) Completion { return Completion{Type: history.OK, Value: v} }

// Fail is a completion for an operation that certainly did not happen.
func Fail(v history.Value, err history.Value) Completion {
	return Completion{Type: history.Fail, Value: v, Error: err}
}

// Info is a completion for an operation whose effect is unknown.
func Info(v history.Value, err history.Value) Completion {
	return Completion{Type: history.Info, Value: v, Error: err}
}

// Client talks to the system under test for one logical process.
//
// The harness opens a client per process: Open is called on the test's
// client value and returns a new client bound to a node. Setup runs once,
// on the first client opened, before any operation; Teardown once, at the
// end, on a client of its own. A worker whose operation completed with Info
// closes its client and opens a new one for its next process, since the
// connection may be in any state.
type Client interface {
	Open(ctx context.Context, node string) (Client, error)
	Setup(ctx context.Context) error
	Invoke(ctx context.Context, op Op) Completion
	Teardown(ctx context.Context) error
	Close(ctx context.Context) error
}

// Nemesis injects faults. Its operations are recorded with process
// history.Nemesis and type Info at both ends, as Jepsen records them.
// Teardown must heal every fault the nemesis may have left, and must work
// even when an Invoke was interrupted halfway.
type Nemesis interface {
	Setup(ctx context.Context) error
	Invoke(ctx context.Context, op Op) Completion
	Teardown(ctx context.Context) error
}

// NoopNemesis is a nemesis that injects nothing, for tests without faults.
type NoopNemesis struct{}

// Setup does nothing.
func (NoopNemesis) Setup(context.Context) error { return nil }

// Invoke answers the operation unchanged.
func (NoopNemesis) Invoke(_ context.Context, op Op) Completion { return Info(op.Value, nil) }

// Teardown does nothing.
func (NoopNemesis) Teardown(context.Context) error { return nil }
