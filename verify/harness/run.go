package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	// Online, instead of Checker, judges the history as it is recorded:
	// the recorder's new events are fed to it every 50 ms while the test
	// runs, an early failure it finds is logged at once, and at the end
	// only its Result is left (checker.Offline wraps the checkers with
	// no online form). Set one of Checker and Online.
	Online checker.Online
	// Store is the store's root folder, required: the run goes to a new
	// folder under it. Dir, when set, is the run's folder instead (Store
	// may then be empty).
	Store, Dir string
	// Seed feeds every random choice of the generator: the generators of
	// verify/gen (and the nemesis schedule) draw from sources derived from
	// Seed and the stream number each was built with (gen.Context.Rand),
	// so the same Seed replays the same operations and faults, and
	// another Seed gives another run without touching the code. Seed is
	// written beside the history with Command, so the run can be
	// repeated. Seed 0 leaves each generator its stream's sequence.
	Seed    uint64
	Command []string
	// Progress receives the progress line (a terminal) or log lines;
	// nil shows nothing.
	Progress io.Writer
	// TTY says Progress is a terminal.
	TTY bool
	// TimeLimit bounds the run; 0 means the generator alone ends it. The
	// setup of the nemesis and the clients must finish within TimeLimit;
	// no operation is handed out later than TimeLimit after the first
	// could be (the generator is cut there, as gen.TimeLimit cuts);
	// operations still in flight get 10 s more, after which their context
	// is cancelled and those that do not return stay open (info). Healing
	// and tearing down then get up to 2 minutes whatever the limit, since
	// a fault left behind outlives the test. The checkers get
	// CheckTimeout, or else TimeLimit again but at least a minute; a
	// checker still running then is unknown. So a run ends within about
	// 2 × TimeLimit + 2 minutes even when the system, the generator or a
	// checker hangs.
	TimeLimit time.Duration
	// CheckTimeout bounds the checkers (see TimeLimit); 0 means
	// TimeLimit's rule, or no bound without a TimeLimit.
	CheckTimeout time.Duration
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
	Dir string
	// Verdict is the combined verdict: true, false, or unknown when a
	// checker could not decide or the run did not go as designed (see
	// Problems).
	Verdict linear.Verdict
	// Results is the checkers' combined result, as results.json holds it.
	Results checker.Result
	// Problems says what went wrong in the harness itself: a panic in a
	// client, the generator, the nemesis or a checker (with the panic's
	// text), a failed heal or teardown. Any problem makes the verdict
	// unknown, never valid.
	Problems []string
	// Events is the history.
	Events []history.Event
	// Interrupted says the run was cut short (Ctrl-C); the history and the
	// verdict cover what happened until then.
	Interrupted bool
	// Ops counts client operations invoked.
	Ops      int
	Duration time.Duration
}

// Valid reports whether the verdict is true: every checker found the
// history valid and the run went as designed.
func (o *Outcome) Valid() bool { return o != nil && o.Verdict == linear.True }

// Checker returns the result of the checker of that name (a key of
// checker.Compose's map, at any depth), and whether there is one.
func (o *Outcome) Checker(name string) (checker.Result, bool) {
	if o == nil {
		return checker.Result{}, false
	}
	return o.Results.Checker(name)
}

// Failure returns the first failure the checkers explained (by checker
// name, depth first), or nil when none found the history invalid.
func (o *Outcome) Failure() *checker.Failure {
	if o == nil {
		return nil
	}
	return o.Results.FirstFailure()
}

// TeardownF is the nemesis operation the harness records around the
// nemesis's Teardown, which heals every fault after the run, interrupted
// or not.
const TeardownF = "teardown"

// teardownTimeout bounds healing and tearing down after the run.
const teardownTimeout = 2 * time.Minute

// Run runs the test: it sets up the nemesis and the clients, interprets the
// generator until it is exhausted, the time limit passes or ctx is done,
// heals every fault (also when interrupted), tears down, checks, and
// writes results.json. The error is nil when the run completed and was
// checked, whatever the verdict; an interrupted run still returns its
// outcome, with ctx's error. A panic in the client, the generator, the
// nemesis or a checker does not end the run: it is recorded (in the
// history when it ends an operation, and in Problems), the faults are
// healed, the results written, and the verdict is unknown.
func Run(ctx context.Context, t Test) (*Outcome, error) {
	if t.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency must be at least 1, not %d", t.Concurrency)
	}
	if t.Client == nil || t.Generator == nil {
		return nil, errors.New("a test needs a client and a generator")
	}
	if t.Checker != nil && t.Online != nil {
		return nil, errors.New("a test has a Checker or an Online checker, not both (wrap the offline one with checker.Offline and compose them with checker.ComposeOnline)")
	}
	if t.Store == "" && t.Dir == "" {
		return nil, errors.New("the test has no Store: name the folder runs are kept in (ipfence's commands use \"store\"); a run never writes into the working directory by default")
	}
	if t.TimeLimit < 0 {
		return nil, fmt.Errorf("time limit %v is negative", t.TimeLimit)
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
	bg := context.WithoutCancel(ctx)
	heal := func() error {
		healCtx, cancel := context.WithTimeout(bg, teardownTimeout)
		defer cancel()
		return protect("the nemesis's Teardown (healing)", func() error { return nem.Teardown(healCtx) })
	}
	// Setup happens under ctx (and the time limit): an interrupt while
	// setting up ends the run after the same healing as any other.
	setupCtx, cancelSetup := ctx, context.CancelFunc(func() {})
	if t.TimeLimit > 0 {
		setupCtx, cancelSetup = context.WithTimeout(ctx, t.TimeLimit)
	}
	defer cancelSetup()
	if err := protect("the nemesis's Setup", func() error { return nem.Setup(setupCtx) }); err != nil {
		return out, failSetup(out, fmt.Errorf("nemesis setup: %w", err), heal())
	}
	nodes := t.Nodes
	if len(nodes) == 0 {
		nodes = []string{""}
	}
	err := protect("the client's Open, Setup or Close", func() error {
		setupClient, err := t.Client.Open(setupCtx, nodes[0])
		if err == nil {
			err = setupClient.Setup(setupCtx)
			setupClient.Close(bg)
		}
		return err
	})
	if err != nil {
		return out, failSetup(out, fmt.Errorf("client setup: %w", err), heal())
	}
	cancelSetup()

	rec, err := NewRecorder(filepath.Join(dir, HistoryFile))
	if err != nil {
		return out, errors.Join(fmt.Errorf("store: %w", err), heal())
	}
	var feed *feeder
	if t.Online != nil {
		feed = startFeeding(bg, t.Online, rec, prog)
	}
	g := t.Generator
	// Operations run under runCtx: ctx, and the time limit with a grace
	// for the operations in flight when it passes.
	runCtx, cancelRun := ctx, context.CancelFunc(func() {})
	if t.TimeLimit > 0 {
		g = gen.TimeLimit(t.TimeLimit, g)
		runCtx, cancelRun = context.WithTimeout(ctx, t.TimeLimit+drainGrace)
	}
	defer cancelRun()
	n := t.Concurrency
	panics := &problems{}
	in := &interpreter{
		g: g, threads: n, seed: t.Seed, rec: rec, progress: prog,
		busy: make([]bool, n+1), process: make([]history.Process, n+1),
		jobs: make([]chan job, n+1), waiting: make([]*gen.Op, n+1),
		dones: make(chan done, n+1), nodes: make([]string, n+1),
	}
	var wg sync.WaitGroup
	for i := range in.jobs {
		th := i - 1
		in.jobs[i] = make(chan job, 1)
		w := &worker{thread: th, base: t.Client, nemesis: nem, rec: rec, dones: in.dones, panics: panics}
		if th == gen.NemesisThread {
			in.process[i] = history.Nemesis
		} else {
			in.process[i] = history.Process(th)
			w.node = nodes[th%len(nodes)]
		}
		in.nodes[i] = w.node
		wg.Add(1)
		go w.loop(runCtx, in.jobs[i], &wg)
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
	runErr := in.protectedRun(runCtx)
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
	var troubles []string
	// The heal is in the history like any nemesis operation, so that the
	// reports end every fault period here (see checker.Faults).
	rec.Record(history.Event{Process: history.Nemesis, Type: history.Invoke, F: TeardownF})
	healed := history.Event{Process: history.Nemesis, Type: history.Info, F: TeardownF, Value: "healed"}
	if err := protect("the nemesis's Teardown (healing)", func() error { return nem.Teardown(tctx) }); err != nil {
		troubles = append(troubles, fmt.Sprintf("nemesis teardown (healing): %v", err))
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
	if err := protect("the client's Teardown", func() error {
		tc, err := t.Client.Open(tctx, nodes[0])
		if err != nil {
			return err
		}
		defer tc.Close(tctx)
		return tc.Teardown(tctx)
	}); err != nil {
		troubles = append(troubles, fmt.Sprintf("client teardown: %v", err))
	}
	if t.Teardown != nil {
		if err := protect("the test's Teardown", func() error { return t.Teardown(tctx, dir) }); err != nil {
			troubles = append(troubles, fmt.Sprintf("collecting the system's records: %v", err))
		}
	}
	recErr := rec.Close()
	ended := time.Now()
	out.Events = rec.Events()
	if feed != nil {
		feed.stop()
	}

	// Check.
	var res checker.Result
	run, err := checker.NewRun(t.Name, out.Events, dir, rec.StartMono())
	switch {
	case err != nil:
		res = checker.Errorf("the history cannot be paired: %v", err)
	case feed != nil:
		res = feed.result(bg, run, t.checkTimeout())
	case t.Checker != nil:
		res = runChecker(bg, t.Checker, run, t.checkTimeout())
	default:
		res = checker.Result{Valid: linear.True, Fields: map[string]any{}}
	}
	if res.Fields == nil {
		res.Fields = map[string]any{}
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, context.DeadlineExceeded) {
		troubles = append(troubles, fmt.Sprintf("running the generator: %v", runErr))
	}
	if recErr != nil {
		troubles = append(troubles, fmt.Sprintf("history: %v", recErr))
	}
	troubles = append(panics.list(), troubles...)
	troubles = append(troubles, res.Panicked()...)
	if len(troubles) > 0 {
		res.Fields["harness_errors"] = troubles
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
	// How long the verdict took once the history was complete: what
	// online checking shortens.
	res.Fields["verdict_after_s"] = time.Since(ended).Seconds()
	if feed != nil {
		if e := feed.earlyFields(); e != nil {
			res.Fields["early"] = e
		}
	}
	out.Results = res
	out.Verdict = res.Valid
	out.Problems = troubles
	if err := writeJSON(dir, ResultsFile, res); err != nil {
		return out, fmt.Errorf("store: %w", err)
	}
	if out.Interrupted {
		return out, ctx.Err()
	}
	return out, nil
}

// failSetup ends a run whose setup failed: the faults were healed (healErr
// says how that went), and results.json says unknown, with why, so the
// store never holds a run folder without a verdict.
func failSetup(out *Outcome, err, healErr error) error {
	err = errors.Join(err, healErr)
	out.Verdict = linear.Unknown
	out.Problems = []string{err.Error()}
	out.Results = checker.Result{Valid: linear.Unknown, Fields: map[string]any{"harness_errors": out.Problems}}
	if werr := writeJSON(out.Dir, ResultsFile, out.Results); werr != nil {
		err = errors.Join(err, fmt.Errorf("store: %w", werr))
	}
	return err
}

// checkTimeout is how long the checkers may take (see Test.TimeLimit).
func (t *Test) checkTimeout() time.Duration {
	switch {
	case t.CheckTimeout > 0:
		return t.CheckTimeout
	case t.TimeLimit > 0:
		return max(t.TimeLimit, time.Minute)
	}
	return 0
}

// checkGrace is how long past its deadline a checker may take to return
// before the harness gives up on it.
const checkGrace = 5 * time.Second

// runChecker runs c with a deadline of limit (none when 0), containing a
// panic and giving up on a checker that does not return in time.
func runChecker(ctx context.Context, c checker.Checker, run *checker.Run, limit time.Duration) checker.Result {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	done := make(chan checker.Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- checker.Panicked("the checker", p)
			}
		}()
		done <- c.Check(ctx, run)
	}()
	var late <-chan time.Time
	if limit > 0 {
		tm := time.NewTimer(limit + checkGrace)
		defer tm.Stop()
		late = tm.C
	}
	select {
	case r := <-done:
		return r
	case <-late:
		return checker.Errorf("the checker did not return within %v (and %v of grace)", limit, checkGrace)
	}
}

// protect calls fn, turning a panic in it into an error with the panic's
// text: user code must not crash the run before the faults are healed.
func protect(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v", what, p)
		}
	}()
	return fn()
}

// problems collects what went wrong in workers, from any goroutine.
type problems struct {
	mu   sync.Mutex
	msgs []string
}

func (p *problems) add(msg string) {
	p.mu.Lock()
	p.msgs = append(p.msgs, msg)
	p.mu.Unlock()
}

func (p *problems) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}
