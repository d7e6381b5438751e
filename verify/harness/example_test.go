package harness_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// store is the system under test of the examples: a register behind a
// lock, which a fault can freeze.
type store struct {
	mu     sync.Mutex
	value  int
	frozen bool
}

// invoke is the client: one operation on the store. A frozen store
// times out, and a timed-out write may or may not have happened: Info.
func (s *store) invoke(_ context.Context, _ string, op harness.Op) harness.Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return harness.Info(nil, "timeout")
	}
	if op.F == "write" {
		s.value = op.Value.(int)
		return harness.OK(op.Value)
	}
	return harness.OK(s.value)
}

// A whole test of a small system: a client, a generator of reads and
// writes, a checker, and the verdict as a typed value.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	s := &store{}
	register, _ := model.Lookup("register")
	out, err := harness.Run(context.Background(), harness.Test{
		Name: "register", Nodes: []string{"n1", "n2"}, Concurrency: 4,
		Client: harness.ClientFunc(s.invoke), Store: dir, Seed: 1,
		Generator: gen.Clients(gen.Limit(200, gen.Fn(1, func(_ gen.Context, r *gen.Rand) gen.Op {
			if r.IntN(2) == 0 {
				return gen.F("read", nil)
			}
			return gen.F("write", r.IntN(10))
		}))),
		Checker: checker.Linearizable(checker.LinearOptions{Model: register, Semantics: model.Options{Initial: 0}}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("valid:", out.Valid(), "ops:", out.Ops, "problems:", len(out.Problems))
	// Output: valid: true ops: 200 problems: 0
}

// A custom fault: a nemesis that freezes the store. The harness records
// its operations in the history and heals it at the end, even after an
// interrupt or a panic.
type freezer struct{ s *store }

func (f freezer) Setup(context.Context) error { return nil }

func (f freezer) Invoke(_ context.Context, op harness.Op) harness.Completion {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.frozen = op.F == "start-freeze"
	return harness.Info("frozen: "+fmt.Sprint(f.s.frozen), nil)
}

func (f freezer) Teardown(context.Context) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.frozen = false
	return nil
}

// Stats is valid when every kind of operation succeeded at least once,
// which the read after the freeze does.
func Example_customFault() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	s := &store{}
	out, err := harness.Run(context.Background(), harness.Test{
		Name: "freeze", Concurrency: 2, Client: harness.ClientFunc(s.invoke), Nemesis: freezer{s}, Store: dir,
		Generator: gen.Phases(
			gen.Any(
				gen.Clients(gen.Limit(40, gen.Delay(time.Millisecond, gen.Repeat(gen.F("read", nil))))),
				gen.Nemesis(gen.Limit(2, nemesis.Schedule(1, nemesis.Choices{Kinds: []string{"freeze"}}, 5*time.Millisecond, 10*time.Millisecond)))),
			// Once the fault has stopped, a read that must succeed.
			gen.Clients(gen.Once(gen.F("read", nil)))),
		Checker: checker.Stats(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range out.Events {
		if e.Process == history.Nemesis && e.Type == history.Info {
			fmt.Println(e.F, history.Show(e.Value))
		}
	}
	fmt.Println("valid:", out.Valid())
	// Output:
	// start-freeze "frozen: true"
	// stop-freeze "frozen: false"
	// teardown "healed"
	// valid: true
}
