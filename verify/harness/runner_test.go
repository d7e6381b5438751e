package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// flaky answers info on every third op and panics on the fifth, to show
// how the harness handles indeterminate ops and broken clients.
type flaky struct {
	mu     sync.Mutex
	n      int
	opens  []string
	closed int
}

type flakyClient struct{ f *flaky }

func (c *flakyClient) Open(_ context.Context, node string) (Client, error) {
	c.f.mu.Lock()
	c.f.opens = append(c.f.opens, node)
	c.f.mu.Unlock()
	return c, nil
}
func (c *flakyClient) Setup(context.Context) error    { return nil }
func (c *flakyClient) Teardown(context.Context) error { return nil }
func (c *flakyClient) Close(context.Context) error {
	c.f.mu.Lock()
	c.f.closed++
	c.f.mu.Unlock()
	return nil
}
func (c *flakyClient) Invoke(_ context.Context, op Op) Completion {
	c.f.mu.Lock()
	c.f.n++
	n := c.f.n
	c.f.mu.Unlock()
	switch {
	case n == 5:
		panic("boom")
	case n%3 == 0:
		return Info(nil, "timeout")
	}
	return OK(int64(n))
}

func TestInfoMovesThreadToANewProcess(t *testing.T) {
	f := &flaky{}
	out, err := Run(t.Context(), Test{
		Name: "flaky", Nodes: []string{"n1"}, Concurrency: 2, Client: &flakyClient{f},
		Generator: gen.Clients(gen.RepeatN(10, gen.F("op", nil))), Store: t.TempDir(),
		Checker: checker.Compose(map[string]checker.Checker{"errors": checker.UnhandledErrors()}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := history.Pair(out.Events)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 10 {
		t.Fatalf("%d ops", len(ops))
	}
	// After an info (ops 3, 5 (the panic), 6, 9) the thread continues as
	// process p+2: no process id is reused after an info.
	infoProcs := map[history.Process]bool{}
	infos := 0
	for _, o := range ops {
		if infoProcs[o.Process] {
			t.Fatalf("process %s used after its info: %+v", o.Process, o)
		}
		if o.Type == history.Info {
			infos++
			infoProcs[o.Process] = true
		}
	}
	if infos != 4 {
		t.Fatalf("%d info ops, want 4 (three timeouts and a panic)", infos)
	}
	errs := out.Results.Fields["checkers"].(map[string]checker.Result)["errors"].Fields["errors"].([]checker.ErrorCount)
	if len(errs) != 2 || errs[0].Error != `"timeout"` || errs[0].Count != 3 || !strings.Contains(errs[1].Error, "the client panicked: boom") {
		t.Fatalf("errors: %+v", errs)
	}
	// One open for setup and teardown each, two for the threads, and one
	// more after each info.
	if want := 2 + 2 + infos - countTrailingInfos(ops); len(f.opens) != want {
		t.Fatalf("%d opens, want %d", len(f.opens), want)
	}
	if f.closed != len(f.opens) {
		t.Fatalf("%d opens, %d closes", len(f.opens), f.closed)
	}
}

// countTrailingInfos counts threads whose last op was info: those never
// reopen.
func countTrailingInfos(ops []history.Op) int {
	last := map[history.Process]history.Op{}
	for _, o := range ops {
		last[o.Process%2] = o
	}
	n := 0
	for _, o := range last {
		if o.Type == history.Info {
			n++
		}
	}
	return n
}

// faults is a nemesis that keeps track of what is broken.
type faults struct {
	mu     sync.Mutex
	active map[string]bool
	log    []string
	healed bool
}

func (n *faults) Setup(context.Context) error { n.active = map[string]bool{}; return nil }
func (n *faults) Invoke(ctx context.Context, op Op) Completion {
	n.mu.Lock()
	n.log = append(n.log, op.F)
	if kind, ok := strings.CutPrefix(op.F, "start-"); ok {
		n.active[kind] = true
	} else if kind, ok := strings.CutPrefix(op.F, "stop-"); ok {
		delete(n.active, kind)
	}
	n.mu.Unlock()
	return Info("n1", nil)
}
func (n *faults) Teardown(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.active)
	n.healed = true
	return nil
}

// signalWriter collects what is written and closes seen the first time the
// text contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestNemesisRecordedAndHealedOnInterrupt(t *testing.T) {
	nem := &faults{}
	ctx, cancel := context.WithCancel(t.Context())
	g := gen.Any(
		gen.Clients(gen.Stagger(3, time.Millisecond, gen.Repeat(gen.F("read", nil)))),
		gen.Nemesis(gen.Cycle(gen.Sleep(20*time.Millisecond), gen.Once(gen.NemesisOp("start-pause", nil)),
			gen.Sleep(20*time.Millisecond), gen.Once(gen.NemesisOp("stop-pause", nil)))),
	)
	// Interrupt once a progress line has named the active fault, the
	// progress has logged a few lines, and the nemesis has begun two
	// faults and ended the first (start, stop, start, and the next stop
	// invoked: the three before it are recorded whole); or after 30 s,
	// and the assertions below fail. A fixed delay would make the test
	// depend on the machine's load.
	prog := &signalWriter{want: "faults: pause", seen: make(chan struct{})}
	go func() {
		defer cancel()
		select {
		case <-prog.seen:
		case <-time.After(30 * time.Second):
			return
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			nem.mu.Lock()
			invoked := len(nem.log)
			nem.mu.Unlock()
			if invoked >= 4 && strings.Count(prog.String(), "\n") >= 3 {
				return
			}
		}
	}()
	out, err := Run(ctx, Test{
		Name: "nem", Concurrency: 2, Client: &regClient{r: &register{}}, Nemesis: nem, Generator: g,
		Store: t.TempDir(), Progress: prog, LogEvery: 20 * time.Millisecond,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if !out.Interrupted || !nem.healed || len(nem.active) != 0 {
		t.Fatalf("interrupted %v healed %v active %v", out.Interrupted, nem.healed, nem.active)
	}
	var nemEvents []history.Event
	for _, e := range out.Events {
		if e.Process == history.Nemesis {
			nemEvents = append(nemEvents, e)
			if e.Type != history.Invoke && e.Type != history.Info {
				t.Fatalf("nemesis event %+v is not info", e)
			}
		}
	}
	if len(nemEvents) < 4 || nemEvents[0].F != "start-pause" || nemEvents[1].Type != history.Info || nemEvents[1].Value != "n1" {
		t.Fatalf("nemesis events %v", nemEvents)
	}
	fs := checker.Faults(nemEvents)
	if len(fs) < 2 || fs[0].Name != "pause n1" || fs[0].End <= fs[0].Start {
		t.Fatalf("faults %+v", fs)
	}
	res := readResults(t, out.Dir)
	if res["interrupted"] != true {
		t.Fatalf("results: %v", res)
	}
	// Not a terminal: plain log lines, with the active fault named.
	lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
	if len(lines) < 3 || !strings.Contains(prog.String(), "faults: pause") || !strings.Contains(prog.String(), "interrupted: healing") {
		t.Fatalf("progress output:\n%s", prog.String())
	}
	if strings.Contains(prog.String(), "\r") {
		t.Fatalf("carriage returns in log output:\n%q", prog.String())
	}
}

func TestProgressOnATerminalRewritesOneLine(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, true, time.Minute, time.Second)
	p.completed(history.OK)
	p.completed(history.Info)
	p.fault("start-partition")
	p.tick(p.start.Add(2 * time.Second))
	p.fault("stop-partition")
	p.tick(p.start.Add(3 * time.Second))
	p.finish()
	want := "\r\x1b[K2s: 2 ops (ok 1, fail 0, info 1), faults: partition, 58s left" +
		"\r\x1b[K3s: 2 ops (ok 1, fail 0, info 1), faults: none, 57s left"
	if got := b.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 {
		t.Fatalf("got %q", got)
	}
}

// The same seed gives the same operations; another seed, others.
func TestSameSeedSameOps(t *testing.T) {
	ops := func(seed uint64) []string {
		g := gen.Clients(gen.Limit(200, gen.Fn(seed, func(_ gen.Context, r *gen.Rand) gen.Op {
			return gen.F([]string{"read", "write"}[r.IntN(2)], int64(r.IntN(100)))
		})))
		out, err := Run(t.Context(), Test{Name: "seed", Concurrency: 3, Client: &regClient{r: &register{}}, Generator: g, Store: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, e := range out.Events {
			if e.Type == history.Invoke && e.Process >= 0 {
				s = append(s, e.F+" "+history.Show(e.Value))
			}
		}
		return s
	}
	a, b, c := ops(7), ops(7), ops(8)
	if len(a) != 200 || !slices.Equal(a, b) {
		t.Fatalf("seed 7 twice differs:\n%v\n%v", a[:10], b[:10])
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same ops")
	}
}

// stuckGen waits forever for an event that never comes.
type stuckGen struct{}

func (stuckGen) Next(gen.Context) (gen.Op, gen.Generator, gen.Status) {
	return gen.Op{}, stuckGen{}, gen.Pending
}
func (stuckGen) Update(gen.Context, gen.Event) gen.Generator { return stuckGen{} }

// busyGen hands out an op for a thread that is not free.
type busyGen struct{}

func (busyGen) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	return gen.Op{Thread: 99, F: "read", Time: ctx.Time}, busyGen{}, gen.Ready
}
func (busyGen) Update(gen.Context, gen.Event) gen.Generator { return busyGen{} }

func TestBrokenGeneratorsEndTheRun(t *testing.T) {
	for name, g := range map[string]gen.Generator{"stuck": stuckGen{}, "busy": busyGen{}} {
		out, err := Run(t.Context(), Test{Name: name, Concurrency: 1, Client: &regClient{r: &register{}}, Generator: g, Store: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if out.Verdict != linear.Unknown {
			t.Fatalf("%s: valid %v", name, out.Verdict)
		}
		errs, _ := out.Results.Fields["harness_errors"].([]string)
		want := map[string]string{"stuck": "the generator is stuck", "busy": "to thread 99, which is not free"}[name]
		if len(errs) != 1 || !strings.Contains(errs[0], want) {
			t.Fatalf("%s: harness errors %q, want %q", name, errs, want)
		}
	}
}

func TestBadTestConfig(t *testing.T) {
	if _, err := Run(t.Context(), Test{Name: "x", Concurrency: 0}); err == nil || !strings.Contains(err.Error(), "concurrency must be at least 1") {
		t.Fatal(err)
	}
	if _, err := Run(t.Context(), Test{Name: "a/b", Concurrency: 1, Client: &regClient{r: &register{}}, Generator: stuckGen{}, Store: t.TempDir()}); err == nil || !strings.Contains(err.Error(), `test name "a/b" cannot name a folder`) {
		t.Fatal(err)
	}
	store := t.TempDir()
	os.WriteFile(filepath.Join(store, "latest"), []byte("x"), 0o644)
	if _, err := Run(t.Context(), Test{Name: "x", Concurrency: 1, Client: &regClient{r: &register{}}, Generator: stuckGen{}, Store: store}); err == nil || !strings.Contains(err.Error(), "is not a symbolic link") {
		t.Fatal(err)
	}
}

// A harness killed mid-run leaves a history that parses.
func TestRecorderSurvivesSIGKILL(t *testing.T) {
	if os.Getenv("HARNESS_RECORDER_CHILD") != "" {
		rec, err := NewRecorder(os.Getenv("HARNESS_RECORDER_CHILD"))
		if err != nil {
			os.Exit(3)
		}
		for i := 0; ; i++ {
			rec.Record(history.Event{Process: history.Process(i % 4), Type: history.Invoke, F: "write", Value: strings.Repeat("v", i%300)})
			rec.Record(history.Event{Process: history.Process(i % 4), Type: history.OK, F: "write", Value: strings.Repeat("v", i%300)})
		}
	}
	path := filepath.Join(t.TempDir(), HistoryFile)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecorderSurvivesSIGKILL$")
	cmd.Env = append(os.Environ(), "HARNESS_RECORDER_CHILD="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it mid-stream, once it has written plenty (how long that takes
	// depends on the machine's load, so wait for the file, not a clock).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 256<<10 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child wrote less than 256 KiB of history in a minute")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Parse("killed", data, history.JSONL)
	if err != nil {
		t.Fatalf("the history of a killed harness does not parse: %v", err)
	}
	if len(h.Events) < 1000 {
		t.Fatalf("only %d events in 256 KiB", len(h.Events))
	}
	// Only whole lines are written, but the kernel may stop a write of
	// a killed process between two pages: then the last line is torn,
	// and only the last.
	if lines := strings.Count(string(data), "\n"); h.TornLine != 0 && h.TornLine != lines+1 {
		t.Fatalf("torn line %d in a file of %d whole lines", h.TornLine, lines)
	}
	for i, e := range h.Events {
		if e.Index != int64(i) {
			t.Fatalf("event %d has index %d", i, e.Index)
		}
	}
}

// A ClientFunc is a client bound to the node it was opened on, and Result
// makes an error unknown, never failed.
func TestClientFuncAndResult(t *testing.T) {
	var nodes []string
	var mu sync.Mutex
	f := ClientFunc(func(_ context.Context, node string, op Op) Completion {
		mu.Lock()
		nodes = append(nodes, node)
		mu.Unlock()
		if op.F == "bad" {
			return Result(nil, errors.New("connection reset"))
		}
		return Result(int64(7), nil)
	})
	out, err := Run(t.Context(), Test{Name: "fn", Nodes: []string{"a", "b"}, Concurrency: 2, Client: f, Store: t.TempDir(),
		Generator: gen.Clients(gen.Seq(gen.RepeatN(4, gen.F("good", nil)), gen.Once(gen.F("bad", nil))))})
	if err != nil {
		t.Fatal(err)
	}
	ops, _, _ := history.Pair(out.Events)
	if len(ops) != 5 || ops[0].Output != int64(7) || ops[4].Type != history.Info || ops[4].Error != "connection reset" {
		t.Fatalf("ops: %+v", ops)
	}
	slices.Sort(nodes)
	if len(nodes) != 5 || nodes[0] != "a" || nodes[4] != "b" {
		t.Fatalf("nodes the ops went to: %v", nodes)
	}
}
