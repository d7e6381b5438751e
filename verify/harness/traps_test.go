package harness_test

// The traps a Go engineer fell into testing a 3-replica register with the
// library (issue 15): each is a case here that now works, or fails with an
// error that says what to do.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// replicas is an in-memory register of three replicas. A write goes to
// all three; a read goes to the node's replica. lag makes replica n1 miss
// every write after the first (the planted bug: reads served from a stale
// replica). timeouts makes every fifth operation time out after taking
// effect, which the client must report as info.
type replicas struct {
	mu       sync.Mutex
	vals     map[string]int
	lag      bool
	timeouts bool
	n        atomic.Int64
}

func newReplicas() *replicas {
	return &replicas{vals: map[string]int{"n1": 0, "n2": 0, "n3": 0}}
}

type regClient struct {
	r    *replicas
	node string
}

func (c *regClient) Open(_ context.Context, node string) (harness.Client, error) {
	return &regClient{r: c.r, node: node}, nil
}
func (c *regClient) Setup(context.Context) error    { return nil }
func (c *regClient) Teardown(context.Context) error { return nil }
func (c *regClient) Close(context.Context) error    { return nil }

func (c *regClient) Invoke(_ context.Context, op harness.Op) harness.Completion {
	// An operation takes a while, as over a network, so that the threads
	// overlap and each does its share.
	time.Sleep(200 * time.Microsecond)
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var res harness.Completion
	switch op.F {
	case "write":
		for n := range r.vals {
			if !(r.lag && n == "n1" && r.vals[n] != 0) {
				r.vals[n] = op.Value.(int) // the value as the generator made it: an int
			}
		}
		res = harness.OK(op.Value)
	case "read":
		res = harness.OK(r.vals[c.node]) // an int, as a Go store returns it
	}
	if r.timeouts && r.n.Add(1)%5 == 0 {
		// Took effect, but the answer was lost.
		return harness.Info(nil, "timeout")
	}
	return res
}

// regOps are reads and writes of ints, drawn from stream 1 of the run; the
// values are many, so that a stale read seldom matches a later write.
func regOps() gen.Generator {
	return gen.Fn(1, func(_ gen.Context, r *gen.Rand) gen.Op {
		if r.IntN(2) == 0 {
			return gen.F("read", nil)
		}
		return gen.F("write", 1+r.IntN(1000))
	})
}

// registerFuncs is the register as a user writes it with model.Funcs: the
// initial value is an int 0, and reads are compared with Returned.
var registerFuncs = model.Funcs[any]{
	Name: "my-register",
	Init: func() any { return 0 },
	Step: func(s any, op history.Op) (any, bool) {
		if op.F == "write" {
			return op.Input, true
		}
		return s, model.Returned(op, s)
	},
}

func test(t *testing.T, r *replicas, m model.Model, initial any) harness.Test {
	return harness.Test{
		Name: "traps", Nodes: []string{"n1", "n2", "n3"}, Concurrency: 3,
		Client: &regClient{r: r}, Store: t.TempDir(), Seed: 1,
		// Reads first, so that some return the initial value.
		Generator: gen.Clients(gen.Seq(gen.Limit(3, gen.Repeat(gen.F("read", nil))), gen.Limit(297, regOps()))),
		Checker: checker.Compose(map[string]checker.Checker{
			"linear": checker.Linearizable(checker.LinearOptions{Model: m, Semantics: model.Options{Initial: initial}}),
		}),
	}
}

func run(t *testing.T, tt harness.Test) *harness.Outcome {
	t.Helper()
	out, err := harness.Run(t.Context(), tt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustLookup(name string) model.Model {
	m, err := model.Lookup(name)
	if err != nil {
		panic(err)
	}
	return m
}

// Trap: Initial: 0 (an int) was unequal to the int64 0 reads return, and
// the int values a client returns were not the int64s the history holds.
func TestTrapIntInitialIsInt64(t *testing.T) {
	out := run(t, test(t, newReplicas(), mustLookup("register"), 0))
	if !out.Valid() {
		t.Fatalf("a correct register with Initial 0 (an int): %v, %v", out.Verdict, out.Failure())
	}
	lin, ok := out.Checker("linear")
	if !ok || lin.Valid != linear.True || lin.Fields["ops"] != 300 {
		t.Fatalf("linear: %v %+v", ok, lin)
	}
	// And a user's model whose Init returns an int 0.
	if out := run(t, test(t, newReplicas(), registerFuncs.Model(), nil)); !out.Valid() {
		t.Fatalf("Funcs with Init 0 (an int): %v, %v", out.Verdict, out.Failure())
	}
	// Reads before any write return 0: the history holds int64 0.
	var zeros int
	for _, e := range out.Events {
		if e.Type == history.OK && e.F == "read" && e.Value == int64(0) {
			zeros++
		}
	}
	if zeros == 0 {
		t.Fatal("no read returned the int64 0: the test does not exercise the trap")
	}
}

// Trap: info meant one thing in history.Op and another in linear.Op, so a
// natural model mishandled info operations and a correct system failed.
func TestTrapInfoOperations(t *testing.T) {
	r := newReplicas()
	r.timeouts = true
	out := run(t, test(t, r, registerFuncs.Model(), nil))
	if !out.Valid() {
		t.Fatalf("a correct register whose answers are sometimes lost: %v, %v", out.Verdict, out.Failure())
	}
	infos := 0
	for _, e := range out.Events {
		if e.Type == history.Info && e.Process >= 0 {
			infos++
		}
	}
	if infos < 50 {
		t.Fatalf("only %d info completions", infos)
	}
	// A model that builds linear.Ops by hand from the completion's
	// position is refused, and the error says what to use.
	out = run(t, test(t, r, handBuilt{}, nil))
	lin, _ := out.Checker("linear")
	msg, _ := lin.Fields["error"].(string)
	if out.Verdict != linear.Unknown || !strings.Contains(msg, "ended in info, so its outcome is unknown") || !strings.Contains(msg, "model.Interval") {
		t.Fatalf("hand-built intervals: %v, %q", out.Verdict, msg)
	}
}

// handBuilt is a register model that makes the mistake: linear.Op's Return
// from history.Op's Return, which an info completion has.
type handBuilt struct{}

func (handBuilt) Name() string { return "hand-built" }
func (handBuilt) Doc() string  { return "a register with hand-built intervals" }
func (handBuilt) Compile(ops []history.Op, opt model.Options) ([]linear.Partition, error) {
	parts, err := mustLookup("register").Compile(ops, opt)
	if err != nil {
		return nil, err
	}
	for i, lo := range parts[0].Ops {
		parts[0].Ops[i].Return = ops[lo.ID].Return
	}
	return parts, nil
}

// countingNemesis counts heals; it panics on its second fault when told.
type countingNemesis struct {
	panicOn  string
	invokes  atomic.Int64
	teardown atomic.Int64
}

func (n *countingNemesis) Setup(context.Context) error { return nil }
func (n *countingNemesis) Invoke(_ context.Context, op harness.Op) harness.Completion {
	if n.invokes.Add(1) == 2 && n.panicOn == "invoke" {
		panic("the nemesis broke")
	}
	return harness.Info(op.Value, nil)
}
func (n *countingNemesis) Teardown(context.Context) error { n.teardown.Add(1); return nil }

type panicGen struct{ after int }

func (g panicGen) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	if g.after == 0 {
		panic("the generator broke")
	}
	if len(ctx.Free) == 0 || ctx.Free[len(ctx.Free)-1] < 0 {
		return gen.Op{}, g, gen.Pending
	}
	return gen.Op{F: "read", Thread: ctx.Free[len(ctx.Free)-1], Time: ctx.Time}, panicGen{g.after - 1}, gen.Ready
}
func (g panicGen) Update(gen.Context, gen.Event) gen.Generator { return g }

type panicClient struct{ regClient }

func (c *panicClient) Open(ctx context.Context, node string) (harness.Client, error) {
	return &panicClient{regClient{r: c.r, node: node}}, nil
}
func (c *panicClient) Invoke(ctx context.Context, op harness.Op) harness.Completion {
	if c.r.n.Add(1) == 7 {
		panic("the client broke")
	}
	return c.regClient.Invoke(ctx, op)
}

// Trap: a panic in user code killed the run: no heal, no results. Now a
// panic in the client, the generator, the nemesis or a checker is
// recorded, the nemesis heals, results.json is written, and the verdict
// is unknown with the panic's text.
func TestTrapPanicsAreRecordedAndHealed(t *testing.T) {
	faults := gen.Nemesis(nemesis.Schedule(2, nemesis.Choices{Kinds: []string{"noop"}}, 5*time.Millisecond, 5*time.Millisecond))
	cases := map[string]struct {
		mutate func(tt *harness.Test, nem *countingNemesis)
		text   string
	}{
		"client": {func(tt *harness.Test, _ *countingNemesis) {
			tt.Client = &panicClient{regClient{r: newReplicas()}}
		}, "the client panicked: the client broke"},
		"generator": {func(tt *harness.Test, _ *countingNemesis) {
			tt.Generator = panicGen{after: 20}
		}, "the generator panicked: the generator broke"},
		"nemesis": {func(_ *harness.Test, nem *countingNemesis) {
			nem.panicOn = "invoke"
		}, "the nemesis panicked on stop-noop: the nemesis broke"},
		"checker": {func(tt *harness.Test, _ *countingNemesis) {
			tt.Checker = checker.Compose(map[string]checker.Checker{
				"broken": checker.Func(func(context.Context, *checker.Run) checker.Result { panic("the checker broke") }),
				"stats":  checker.Stats(),
			})
		}, "checker broken panicked: the checker broke"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			nem := &countingNemesis{}
			tt := test(t, newReplicas(), mustLookup("register"), 0)
			tt.Generator = gen.Any(gen.Clients(gen.Limit(100, gen.Stagger(3, time.Millisecond, regOps()))), gen.TimeLimit(200*time.Millisecond, faults))
			tt.Nemesis = nem
			c.mutate(&tt, nem)
			out := run(t, tt)
			if out.Verdict != linear.Unknown {
				t.Fatalf("verdict %v, want unknown", out.Verdict)
			}
			if !slices.ContainsFunc(out.Problems, func(p string) bool { return strings.Contains(p, c.text) }) {
				t.Fatalf("problems %q, want one with %q", out.Problems, c.text)
			}
			if nem.teardown.Load() != 1 {
				t.Fatalf("the nemesis healed %d times, want 1", nem.teardown.Load())
			}
			last := out.Events[len(out.Events)-1]
			if last.F != harness.TeardownF || last.Value != "healed" {
				t.Fatalf("the history ends with %v, not the heal", last)
			}
			b, err := os.ReadFile(filepath.Join(out.Dir, harness.ResultsFile))
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Valid  any      `json:"valid"`
				Errors []string `json:"harness_errors"`
			}
			if err := json.Unmarshal(b, &res); err != nil || res.Valid != "unknown" || !strings.Contains(strings.Join(res.Errors, "\n"), c.text) {
				t.Fatalf("results.json: %v %s", err, b)
			}
		})
	}
}

// Trap: TimeLimit did not bound the run; the generator had to. Now an
// endless generator stops at the limit.
func TestTrapTimeLimitBoundsTheRun(t *testing.T) {
	tt := test(t, newReplicas(), mustLookup("register"), 0)
	latest := &latestOp{g: gen.Clients(gen.Stagger(2, time.Millisecond, regOps()))} // endless
	tt.Generator = latest
	tt.TimeLimit = 300 * time.Millisecond
	out := run(t, tt)
	if !out.Valid() || out.Ops == 0 {
		t.Fatalf("verdict %v, %d ops", out.Verdict, out.Ops)
	}
	// Every operation was handed out for a time before the limit (when it
	// was then invoked depends on the machine's load).
	if latest.max >= latest.first+tt.TimeLimit || latest.n != out.Ops {
		t.Fatalf("%d ops handed out (the run counts %d), the latest for %v, %v after the first ask: the limit is %v", latest.n, out.Ops, latest.max, latest.max-latest.first, tt.TimeLimit)
	}
	// A checker that never returns is given up on, unknown.
	tt.Generator = gen.Clients(gen.Limit(10, regOps()))
	tt.CheckTimeout = 50 * time.Millisecond
	tt.Checker = checker.Func(func(context.Context, *checker.Run) checker.Result { select {} })
	out = run(t, tt)
	if out.Verdict != linear.Unknown || !strings.Contains(out.Results.Fields["error"].(string), "did not return within 50ms") {
		t.Fatalf("a hung checker: %v %v", out.Verdict, out.Results.Fields)
	}
}

// latestOp passes g's operations through, noting the latest Time any was
// handed out for, and when it was first asked.
type latestOp struct {
	g          gen.Generator
	first, max time.Duration // the first ask's time, the latest op's
	asked      bool
	n          int
}

func (l *latestOp) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	if !l.asked {
		l.first, l.asked = ctx.Time, true
	}
	op, next, st := l.g.Next(ctx)
	l.g = next
	if st == gen.Ready {
		l.max = max(l.max, op.Time)
		l.n++
	}
	return op, l, st
}

func (l *latestOp) Update(ctx gen.Context, ev gen.Event) gen.Generator {
	l.g = l.g.Update(ctx, ev)
	return l
}

// Trap: the seed had to be threaded by hand into each generator. Now
// Test.Seed alone replays or changes the operations and the faults.
func TestTrapSeedFeedsEveryChoice(t *testing.T) {
	record := func(seed uint64) (ops, faults []string) {
		tt := test(t, newReplicas(), mustLookup("register"), 0)
		tt.Seed = seed
		tt.Concurrency = 1
		tt.Nemesis = &countingNemesis{}
		choices := nemesis.Choices{Kinds: []string{"a", "b", "c"}, Values: map[string]nemesis.Choose{
			"a": func(r *gen.Rand) any { return r.IntN(1000) },
		}}
		tt.Generator = gen.Any(
			gen.Clients(gen.Limit(50, regOps())),
			gen.Nemesis(gen.Limit(6, nemesis.Schedule(9, choices, time.Millisecond, time.Millisecond))))
		out := run(t, tt)
		for _, e := range out.Events {
			if e.Type != history.Invoke {
				continue
			}
			s := e.F + " " + history.Show(e.Value)
			if e.Process == history.Nemesis {
				if e.F != harness.TeardownF {
					faults = append(faults, s)
				}
			} else {
				ops = append(ops, s)
			}
		}
		return ops, faults
	}
	o1, f1 := record(1)
	o1b, f1b := record(1)
	o2, f2 := record(2)
	if len(o1) != 50 || len(f1) != 6 {
		t.Fatalf("%d ops, %d faults", len(o1), len(f1))
	}
	if !slices.Equal(o1, o1b) || !slices.Equal(f1, f1b) {
		t.Fatalf("seed 1 twice:\n%v\n%v\n%v\n%v", o1, o1b, f1, f1b)
	}
	if slices.Equal(o1, o2) {
		t.Fatal("seeds 1 and 2 gave the same operations")
	}
	if slices.Equal(f1, f2) {
		t.Fatal("seeds 1 and 2 gave the same faults")
	}
}

// Trap: an empty Store wrote into the working directory.
func TestTrapMissingStoreIsAnError(t *testing.T) {
	wd, _ := os.Getwd()
	before, _ := os.ReadDir(wd)
	tt := test(t, newReplicas(), mustLookup("register"), 0)
	tt.Store = ""
	_, err := harness.Run(t.Context(), tt)
	if err == nil || !strings.Contains(err.Error(), "the test has no Store") {
		t.Fatalf("err = %v", err)
	}
	if after, _ := os.ReadDir(wd); len(after) != len(before) {
		t.Fatalf("the working directory changed: %d entries, then %d", len(before), len(after))
	}
}

// Trap: reading a failure took three type assertions, and three OpRef
// types disagreed on what Index means. Now the failure is a typed value,
// and Index is the completion's index whichever checker found it.
func TestTrapTypedFailure(t *testing.T) {
	r := newReplicas()
	r.lag = true
	out := run(t, test(t, r, mustLookup("register"), 0))
	if out.Valid() || out.Verdict != linear.False {
		t.Fatalf("the stale replica went unnoticed: %v", out.Verdict)
	}
	f := out.Failure()
	if f == nil || f.Checker != "linear" || f.Op == nil || f.Linear == nil || f.Op.F != "read" || f.Op.Type != "ok" {
		t.Fatalf("failure: %+v", f)
	}
	var fe error = f
	if !strings.HasPrefix(fe.Error(), "linear: ") || !strings.Contains(fe.Error(), "no order of the operations gets past this one") {
		t.Fatalf("failure as an error: %v", fe)
	}
	// Index and InvokeIndex are the op's completion and invoke events.
	ops, _, _ := history.Pair(out.Events)
	var found bool
	for _, o := range ops {
		if o.Index == f.Op.InvokeIndex {
			found = true
			if out.Events[o.Return].Index != f.Op.Index || o.Process != f.Op.Process {
				t.Fatalf("failure op %+v is not the op invoked at %d and completed at %d", f.Op, o.Index, out.Events[o.Return].Index)
			}
		}
	}
	if !found {
		t.Fatalf("no op was invoked at %d", f.Op.InvokeIndex)
	}
	if _, ok := out.Checker("nope"); ok {
		t.Fatal("a checker that does not exist was found")
	}
	if !errors.As(fe, new(*checker.Failure)) {
		t.Fatal("the failure is not a *checker.Failure")
	}
}

type panicSetup struct{ countingNemesis }

func (n *panicSetup) Setup(context.Context) error { panic("setup broke") }

// A panic while setting up ends the run with an error, after healing, and
// results.json says unknown with the panic's text.
func TestTrapPanicInSetup(t *testing.T) {
	nem := &panicSetup{}
	tt := test(t, newReplicas(), mustLookup("register"), 0)
	tt.Nemesis = nem
	out, err := harness.Run(t.Context(), tt)
	if err == nil || !strings.Contains(err.Error(), "the nemesis's Setup panicked: setup broke") {
		t.Fatalf("err = %v", err)
	}
	if nem.teardown.Load() != 1 || out.Verdict != linear.Unknown || len(out.Problems) != 1 {
		t.Fatalf("healed %d times, verdict %v, problems %q", nem.teardown.Load(), out.Verdict, out.Problems)
	}
	b, err := os.ReadFile(filepath.Join(out.Dir, harness.ResultsFile))
	if err != nil || !strings.Contains(string(b), `"valid": "unknown"`) || !strings.Contains(string(b), "setup broke") {
		t.Fatalf("results.json: %v %s", err, b)
	}
}
