package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Test is one run's configuration.
type Test struct {
	// Name names the test's folder in the store.
	Name string
	// Nodes are the nodes clients are spread over: thread t's clients open
	// on Nodes[t % len(Nodes)]. Empty means one unnamed node.
	Nodes []string
	// Concurrency is the number of client threads.
	Concurrency int
	Client      Client
	// Nemesis injects faults; nil means none.
	Nemesis Nemesis
	// Generator schedules clients and nemesis (see verify/gen).
	Generator gen.Generator
	// Checker judges the history; nil means none (always valid).
	Checker checker.Checker
	// Store is the store's root folder; Dir, when set, is the run's folder
	// instead of a new one under Store.
	Store, Dir string
	// Seed and Command are written beside the history, so the run can be
	// repeated.
	Seed    uint64
	Command []string
	// Progress receives the progress line (a terminal) or log lines;
	// nil shows nothing.
	Progress io.Writer
	// TTY says Progress is a terminal.
	TTY bool
	// TimeLimit is shown as time left on the progress line; the generator
	// is what ends the run.
	TimeLimit time.Duration
	// LogEvery spaces the log lines when Progress is not a terminal
	// (default 10s).
	LogEvery time.Duration
	// Teardown, when set, runs after the nemesis has healed and the
	// clients have torn down, before the checkers: workloads use it to
	// collect what the system kept (a record of mutations, logs) while it
	// still runs. Its error makes the verdict unknown.
	Teardown func(ctx context.Context, dir string) error
}

// Outcome is what a run produced.
type Outcome struct {
	Dir     string
	Valid   linear.Verdict
	Results checker.Result
	// Events is the history.
	Events []history.Event
	// Interrupted says the run was cut short (Ctrl-C); the history and the
	// verdict cover what happened until then.
	Interrupted bool
	// Ops counts client operations invoked.
	Ops      int
	Duration time.Duration
}

// TeardownF is the nemesis operation the harness records around the
// nemesis's Teardown, which heals every fault after the run, interrupted
// or not.
const TeardownF = "teardown"

// teardownTimeout bounds healing and tearing down after the run.
const teardownTimeout = 2 * time.Minute

// Run runs the test: it sets up the nemesis and the clients, interprets the
// generator until it is exhausted or ctx is done, heals every fault (also
// when interrupted), tears down, checks, and writes results.json. The
// error is nil when the run completed and was checked, whatever the
// verdict; an interrupted run still returns its outcome, with ctx's error.
func Run(ctx context.Context, t Test) (*Outcome, error) {
	if t.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency must be at least 1, not %d", t.Concurrency)
	}
	if t.Client == nil || t.Generator == nil {
		return nil, errors.New("a test needs a client and a generator")
	}
	nem := t.Nemesis
	if nem == nil {
		nem = NoopNemesis{}
	}
	dir := t.Dir
	if dir == "" {
		var err error
		if dir, err = NewRunDir(t.Store, t.Name, time.Now()); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	} else if err := os.MkdirAll(filepath.Join(dir, LogDir), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := writeFile(dir, SeedFile, []byte(strconv.FormatUint(t.Seed, 10)+"\n")); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if len(t.Command) > 0 {
		if err := writeFile(dir, CommandFile, []byte(ShellQuote(t.Command)+"\n")); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	logEvery := t.LogEvery
	if logEvery <= 0 {
		logEvery = 10 * time.Second
	}
	prog := newProgress(t.Progress, t.TTY, t.TimeLimit, logEvery)
	out := &Outcome{Dir: dir}
	// Setup happens under ctx: an interrupt while setting up ends the run
	// after the same healing as any other.
	bg := context.WithoutCancel(ctx)
	if err := nem.Setup(ctx); err != nil {
		healCtx, cancel := context.WithTimeout(bg, teardownTimeout)
		defer cancel()
		return out, errors.Join(fmt.Errorf("nemesis setup: %w", err), nem.Teardown(healCtx))
	}
	nodes := t.Nodes
	if len(nodes) == 0 {
		nodes = []string{""}
	}
	setupClient, err := t.Client.Open(ctx, nodes[0])
	if err == nil {
		err = setupClient.Setup(ctx)
		setupClient.Close(bg)
	}
	if err != nil {
		healCtx, cancel := context.WithTimeout(bg, teardownTimeout)
		defer cancel()
		return out, errors.Join(fmt.Errorf("client setup: %w", err), nem.Teardown(healCtx))
	}

	rec, err := NewRecorder(filepath.Join(dir, HistoryFile))
	if err != nil {
		return out, fmt.Errorf("store: %w", err)
	}
	n := t.Concurrency
	in := &interpreter{
		g: t.Generator, threads: n, rec: rec, progress: prog,
		busy: make([]bool, n+1), process: make([]history.Process, n+1),
		jobs: make([]chan job, n+1), waiting: make([]*gen.Op, n+1),
		dones: make(chan done, n+1), nodes: make([]string, n+1),
	}
	var wg sync.WaitGroup
	for i := range in.jobs {
		th := i - 1
		in.jobs[i] = make(chan job, 1)
		w := &worker{thread: th, base: t.Client, nemesis: nem, rec: rec, dones: in.dones}
		if th == gen.NemesisThread {
			in.process[i] = history.Nemesis
		} else {
			in.process[i] = history.Process(th)
			w.node = nodes[th%len(nodes)]
		}
		in.nodes[i] = w.node
		wg.Add(1)
		go w.loop(ctx, in.jobs[i], &wg)
	}
	tickDone := make(chan struct{})
	var tickWG sync.WaitGroup
	tickWG.Go(func() {
		tk := time.NewTicker(min(250*time.Millisecond, logEvery))
		defer tk.Stop()
		for {
			select {
			case <-tickDone:
				return
			case now := <-tk.C:
				prog.tick(now)
			}
		}
	})
	start := time.Now()
	runErr := in.run(ctx)
	out.Duration = time.Since(start)
	out.Ops = in.handed
	close(tickDone)
	tickWG.Wait()
	prog.finish()
	if ctx.Err() != nil {
		out.Interrupted = true
		prog.logf("interrupted: healing every fault and checking what happened so far")
	}
	for _, ch := range in.jobs {
		close(ch)
	}

	// Heal, whatever happened: a fault left behind outlives the test.
	tctx, cancel := context.WithTimeout(bg, teardownTimeout)
	defer cancel()
	var problems []error
	// The heal is in the history like any nemesis operation, so that the
	// reports end every fault period here (see checker.Faults).
	rec.Record(history.Event{Process: history.Nemesis, Type: history.Invoke, F: TeardownF})
	healed := history.Event{Process: history.Nemesis, Type: history.Info, F: TeardownF, Value: "healed"}
	if err := nem.Teardown(tctx); err != nil {
		problems = append(problems, fmt.Errorf("nemesis teardown (healing): %w", err))
		healed.Error = err.Error()
	}
	rec.Record(healed)
	// Workers close their clients when their channels close; wait for that
	// only as long as the grace, since a hung client must not hang us.
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(drainGrace):
	}
	if tc, err := t.Client.Open(tctx, nodes[0]); err == nil {
		if err := tc.Teardown(tctx); err != nil {
			problems = append(problems, fmt.Errorf("client teardown: %w", err))
		}
		tc.Close(tctx)
	} else {
		problems = append(problems, fmt.Errorf("client teardown: %w", err))
	}
	if t.Teardown != nil {
		if err := t.Teardown(tctx, dir); err != nil {
			problems = append(problems, fmt.Errorf("collecting the system's records: %w", err))
		}
	}
	recErr := rec.Close()
	out.Events = rec.Events()

	// Check.
	var res checker.Result
	run, err := checker.NewRun(t.Name, out.Events, dir, rec.StartMono())
	switch {
	case err != nil:
		res = checker.Errorf("the history cannot be paired: %v", err)
	case t.Checker != nil:
		res = t.Checker.Check(bg, run)
	default:
		res = checker.Result{Valid: linear.True, Fields: map[string]any{}}
	}
	if res.Fields == nil {
		res.Fields = map[string]any{}
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		problems = append(problems, fmt.Errorf("running the generator: %w", runErr))
	}
	if recErr != nil {
		problems = append(problems, fmt.Errorf("history: %w", recErr))
	}
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.Error()
		}
		res.Fields["harness_errors"] = msgs
		// The run did not go as designed: a valid verdict would claim more
		// than was checked.
		if res.Valid == linear.True {
			res.Valid = linear.Unknown
		}
	}
	res.Fields["interrupted"] = out.Interrupted
	res.Fields["ops"] = out.Ops
	res.Fields["duration_s"] = out.Duration.Seconds()
	res.Fields["seed"] = t.Seed
	out.Results = res
	out.Valid = res.Valid
	if err := writeJSON(dir, ResultsFile, res); err != nil {
		return out, fmt.Errorf("store: %w", err)
	}
	if out.Interrupted {
		return out, ctx.Err()
	}
	return out, nil
}
