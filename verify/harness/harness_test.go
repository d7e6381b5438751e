package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// register is a system under test: one integer register, atomic unless
// stale is set, in which case reads may answer from a copy that writes
// leave behind (the planted bug).
type register struct {
	mu       sync.Mutex
	value    int64
	cached   int64
	stale    bool
	reads    atomic.Int64
	setups   atomic.Int64
	teardown atomic.Int64
	opened   atomic.Int64
}

type regClient struct {
	r    *register
	node string
}

func (c *regClient) Open(_ context.Context, node string) (Client, error) {
	c.r.opened.Add(1)
	return &regClient{r: c.r, node: node}, nil
}
func (c *regClient) Setup(context.Context) error    { c.r.setups.Add(1); return nil }
func (c *regClient) Teardown(context.Context) error { c.r.teardown.Add(1); return nil }
func (c *regClient) Close(context.Context) error    { return nil }

func (c *regClient) Invoke(_ context.Context, op Op) Completion {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch op.F {
	case "read":
		n := r.reads.Add(1)
		if r.stale && n%7 == 0 {
			return OK(r.cached)
		}
		return OK(r.value)
	case "write":
		r.cached = r.value
		r.value = op.Value.(int64)
		return OK(op.Value)
	}
	return Fail(op.Value, "unknown f "+op.F)
}

func registerGen(seed uint64, d time.Duration) gen.Generator {
	return gen.TimeLimit(d, gen.Clients(gen.Stagger(seed, 200*time.Microsecond, gen.Fn(seed, func(_ gen.Context, r *gen.Rand) gen.Op {
		if r.IntN(2) == 0 {
			return gen.F("read", nil)
		}
		return gen.F("write", int64(r.IntN(5)))
	}))))
}

func registerChecker() checker.Checker {
	return checker.Compose(map[string]checker.Checker{
		"linear": checker.Linearizable(checker.LinearOptions{Model: mustModel("cas-register"), Semantics: model.Options{Initial: int64(0)}}),
		"stats":  checker.Stats(),
		"perf":   checker.Perf(),
		"errors": checker.UnhandledErrors(),
	})
}

func mustModel(name string) model.Model {
	m, err := model.Lookup(name)
	if err != nil {
		panic(err)
	}
	return m
}

func readResults(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("results.json: %v\n%s", err, b)
	}
	return m
}

func TestRunValidRegister(t *testing.T) {
	store := t.TempDir()
	reg := &register{}
	out, err := Run(t.Context(), Test{
		Name: "register", Nodes: []string{"a", "b"}, Concurrency: 4, Client: &regClient{r: reg},
		Generator: registerGen(1, 400*time.Millisecond), Checker: registerChecker(),
		Store: store, Seed: 1, Command: []string{"ipfence", "test", "it's"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != linear.True {
		t.Fatalf("valid = %v: %+v", out.Verdict, out.Results.Fields)
	}
	if out.Ops < 100 {
		t.Fatalf("only %d ops in 400ms", out.Ops)
	}
	if reg.setups.Load() != 1 || reg.teardown.Load() != 1 {
		t.Fatalf("setup %d, teardown %d; want 1 each", reg.setups.Load(), reg.teardown.Load())
	}
	// The store: the folder under store/register, both latest links, the
	// history as the run recorded it, the seed and the command.
	if got, _ := filepath.EvalSymlinks(filepath.Join(store, "latest")); got != out.Dir {
		t.Fatalf("store/latest → %s, want %s", got, out.Dir)
	}
	if got, _ := filepath.EvalSymlinks(filepath.Join(store, "register", "latest")); got != out.Dir {
		t.Fatalf("store/register/latest → %s, want %s", got, out.Dir)
	}
	data, err := os.ReadFile(filepath.Join(out.Dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Parse("history.jsonl", data, history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	// Every op's two events, and the heal's two.
	if len(h.Events) != len(out.Events) || len(h.Events) != 2*out.Ops+2 {
		t.Fatalf("history.jsonl has %d events, the run %d, ops %d", len(h.Events), len(out.Events), out.Ops)
	}
	nodes := map[string]bool{}
	for i, e := range h.Events {
		if e.Index != int64(i) || (i > 0 && e.Time < h.Events[i-1].Time) {
			t.Fatalf("event %d out of order: %+v", i, e)
		}
		if e.Process >= 0 {
			nodes[e.Node] = true
		}
	}
	if last := h.Events[len(h.Events)-1]; last.Process != history.Nemesis || last.F != TeardownF || last.Value != "healed" {
		t.Fatalf("the history does not end with the heal: %+v", last)
	}
	if !nodes["a"] || !nodes["b"] || len(nodes) != 2 {
		t.Fatalf("nodes in the history: %v", nodes)
	}
	if b, _ := os.ReadFile(filepath.Join(out.Dir, SeedFile)); string(b) != "1\n" {
		t.Fatalf("seed file %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out.Dir, CommandFile)); string(b) != "ipfence test 'it'\\''s'\n" {
		t.Fatalf("command file %q", b)
	}
	for _, f := range []string{TimelineFile, LatencyFile, RateFile, "linear.html"} {
		if fi, err := os.Stat(filepath.Join(out.Dir, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	res := readResults(t, out.Dir)
	if res["valid"] != true {
		t.Fatalf("results.json valid = %v", res["valid"])
	}
	cs := res["checkers"].(map[string]any)
	for _, name := range []string{"linear", "stats", "perf", "errors"} {
		c, ok := cs[name].(map[string]any)
		if !ok || c["valid"] != true {
			t.Fatalf("checker %s: %v", name, cs[name])
		}
	}
	stats := cs["stats"].(map[string]any)
	if int(stats["count"].(float64)) != out.Ops {
		t.Fatalf("stats count %v, ops %d", stats["count"], out.Ops)
	}
}

// The planted bug: a register that sometimes serves a stale read must be
// found out.
func TestRunCatchesStaleReads(t *testing.T) {
	out, err := Run(t.Context(), Test{
		Name: "register", Concurrency: 3, Client: &regClient{r: &register{stale: true}},
		Generator: registerGen(2, 300*time.Millisecond), Checker: registerChecker(), Store: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != linear.False {
		t.Fatalf("valid = %v, want false: %+v", out.Verdict, out.Results.Fields)
	}
	lin := readResults(t, out.Dir)["checkers"].(map[string]any)["linear"].(map[string]any)
	if lin["valid"] != false || lin["failure"] == nil {
		t.Fatalf("linear: %v", lin)
	}
}
