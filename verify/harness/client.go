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

// ClientFunc adapts a function to Client, as http.HandlerFunc adapts one
// to a handler, for a system whose client keeps no connection: each
// operation is f(ctx, node, op), and Open, Setup, Teardown and Close do
// nothing.
type ClientFunc func(ctx context.Context, node string, op Op) Completion

// Open returns a client bound to node.
func (f ClientFunc) Open(_ context.Context, node string) (Client, error) {
	return boundFunc{f: f, node: node}, nil
}

// Setup does nothing.
func (f ClientFunc) Setup(context.Context) error { return nil }

// Invoke calls f on no node; the harness invokes only clients it opened.
func (f ClientFunc) Invoke(ctx context.Context, op Op) Completion { return f(ctx, "", op) }

// Teardown does nothing.
func (f ClientFunc) Teardown(context.Context) error { return nil }

// Close does nothing.
func (f ClientFunc) Close(context.Context) error { return nil }

// boundFunc is a ClientFunc opened on a node.
type boundFunc struct {
	f    ClientFunc
	node string
}

func (b boundFunc) Open(_ context.Context, node string) (Client, error) {
	return boundFunc{f: b.f, node: node}, nil
}
func (b boundFunc) Setup(context.Context) error { return nil }
func (b boundFunc) Invoke(ctx context.Context, op Op) Completion {
	return b.f(ctx, b.node, op)
}
func (b boundFunc) Teardown(context.Context) error { return nil }
func (b boundFunc) Close(context.Context) error    { return nil }

// Result is the completion of an operation that returned v and err: OK(v)
// when err is nil, and otherwise Info with err's text, since an error
// (a timeout, a lost connection) seldom proves the operation did not
// happen. A client that knows an error means "certainly not done" returns
// Fail itself.
func Result(v history.Value, err error) Completion {
	if err != nil {
		return Info(nil, err.Error())
	}
	return OK(v)
}
