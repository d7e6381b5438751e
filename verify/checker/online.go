package checker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
)

// Online is a checker that takes the history while the test runs, so
// that little is left to do when it ends. Its final Result is the one its
// offline form gives on the same run.
type Online interface {
	// Feed takes the next events, in the history's order. The harness
	// calls it from one goroutine, never concurrently with Result.
	Feed(ctx context.Context, events []history.Event)
	// Early returns a false verdict already certain from the events fed
	// so far, or nil: a test may report it before it ends.
	Early() *Result
	// Result judges the run, whose events are exactly those fed.
	Result(ctx context.Context, r *Run) Result
}

// Offline makes an online checker of c that does nothing until the end,
// then checks the run: for checkers with no incremental form (plots,
// statistics), to compose with those that have one.
func Offline(c Checker) Online { return offline{c} }

type offline struct{ c Checker }

func (offline) Feed(context.Context, []history.Event) {}
func (offline) Early() *Result                        { return nil }
func (o offline) Result(ctx context.Context, r *Run) Result {
	return o.c.Check(ctx, r)
}

// OnlineTransactional is Transactional fed as the test runs: the
// transactions are read as they complete (isolation.Stream), and the end
// leaves only the analysis. With o.History set it can only run at the
// end, as Transactional.
func OnlineTransactional(o TransactionalOptions) Online {
	if o.History != nil {
		return Offline(Transactional(o))
	}
	return &onlineTxn{o: o}
}

type onlineTxn struct {
	o      TransactionalOptions
	stream *isolation.Stream
	err    error
}

func (t *onlineTxn) Feed(_ context.Context, events []history.Event) {
	if t.err != nil {
		return
	}
	if t.stream == nil {
		if t.stream, t.err = isolation.NewStream(t.o.Isolation); t.err != nil {
			return
		}
	}
	t.err = t.stream.Feed(events...)
}

func (t *onlineTxn) Early() *Result { return nil }

func (t *onlineTxn) Result(ctx context.Context, r *Run) Result {
	if t.stream == nil && t.err == nil {
		t.Feed(ctx, nil) // an empty history: the stream says what Check says
	}
	if t.err != nil {
		return txnResult(r, r.Events, nil, t.err)
	}
	if t.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.o.Timeout)
		defer cancel()
	}
	res, err := t.stream.Result(ctx)
	return txnResult(r, r.Events, res, err)
}

// OnlineLinearizable is Linearizable fed as the test runs: each time the
// history has doubled it checks it so far (lincheck.Online), so that a
// violation shows in Early long before the end; the final Result is
// Linearizable's on the whole run. With o.History set it can only run at
// the end.
func OnlineLinearizable(o LinearOptions) Online {
	if o.History != nil {
		return Offline(Linearizable(o))
	}
	sem := o.Semantics
	return &onlineLin{o: o, on: lincheck.NewOnline("history", history.JSONL,
		lincheck.Options{Model: o.Model, Semantics: &sem, Timeout: o.Timeout})}
}

type onlineLin struct {
	o     LinearOptions
	on    *lincheck.Online
	mu    sync.Mutex // Early may be read by another goroutine while Feed runs
	early *Result
	err   error
}

func (l *onlineLin) Feed(ctx context.Context, events []history.Event) {
	if l.err != nil {
		return
	}
	rep, err := l.on.Feed(ctx, events...)
	if err != nil {
		// The final check reports it; the prefixes stop.
		l.err = err
		return
	}
	if rep == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.early == nil {
		res := Result{Valid: linear.False, Fields: map[string]any{
			"model": rep.Model, "early": true, "events": len(l.on.Events()), "failure": rep.Failure,
		}}
		if rep.Failure != nil {
			op := FromLincheck(rep.Failure.Op)
			res.Failure = &Failure{Summary: fmt.Sprintf("the first %d events: %s", len(l.on.Events()), rep.Failure.Reason),
				Op: &op, Ops: []OpRef{op}, Linear: rep.Failure}
		}
		l.early = &res
	}
}

func (l *onlineLin) Early() *Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.early
}

func (l *onlineLin) Result(ctx context.Context, r *Run) Result {
	return Linearizable(l.o).Check(ctx, r)
}

// ComposeOnline composes online checkers as Compose composes checkers:
// each is fed every event; Early is the first early false by name; the
// results are checked concurrently and combined, false beating unknown
// beating true, a panic making its checker unknown.
func ComposeOnline(checkers map[string]Online) Online {
	return &composed{names: slices.Sorted(maps.Keys(checkers)), checkers: checkers, panics: map[string]Result{}}
}

type composed struct {
	names    []string
	checkers map[string]Online
	mu       sync.Mutex
	panics   map[string]Result // checkers whose Feed panicked, with the panic
}

func (c *composed) Feed(ctx context.Context, events []history.Event) {
	for _, name := range c.names {
		c.mu.Lock()
		_, broken := c.panics[name]
		c.mu.Unlock()
		if broken {
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.mu.Lock()
					c.panics[name] = Panicked("checker "+name, p)
					c.mu.Unlock()
				}
			}()
			c.checkers[name].Feed(ctx, events)
		}()
	}
}

func (c *composed) Early() *Result {
	for _, name := range c.names {
		if e := c.checkers[name].Early(); e != nil {
			out := *e
			if out.Failure != nil {
				f := *out.Failure
				f.Checker = joinName(name, f.Checker)
				out.Failure = &f
			}
			out.Fields = map[string]any{"checkers": map[string]Result{name: *e}}
			return &out
		}
	}
	return nil
}

func joinName(outer, inner string) string {
	if inner == "" {
		return outer
	}
	return outer + "/" + inner
}

func (c *composed) Result(ctx context.Context, r *Run) Result {
	c.mu.Lock()
	panics := maps.Clone(c.panics)
	c.mu.Unlock()
	byName := map[string]Checker{}
	for _, name := range c.names {
		if p, ok := panics[name]; ok {
			byName[name] = Func(func(context.Context, *Run) Result { return p })
			continue
		}
		byName[name] = Func(func(ctx context.Context, r *Run) Result { return c.checkers[name].Result(ctx, r) })
	}
	return Compose(byName).Check(ctx, r)
}

// FeedAll feeds a finished run's events to o, in batches of n events (all
// at once when n < 1), and returns its result: the online checker used
// offline, for comparing the two, and for runs recorded without one.
func FeedAll(ctx context.Context, o Online, r *Run, n int) Result {
	if n < 1 {
		n = max(len(r.Events), 1)
	}
	for i := 0; i < len(r.Events); i += n {
		o.Feed(ctx, r.Events[i:min(i+n, len(r.Events))])
	}
	return o.Result(ctx, r)
}
