package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
)

// drainGrace is how long an interrupted run waits for operations already
// invoked to complete before it gives up on them (they stay open in the
// history, which reads as info).
const drainGrace = 10 * time.Second

// job is an operation handed to a worker.
type job struct {
	op      gen.Op
	process history.Process
}

// done is a worker's report of a completed operation.
type done struct {
	thread int
	event  history.Event
}

// interpreter runs a generator over real time, following the protocol in
// verify/gen's documentation.
type interpreter struct {
	g        gen.Generator
	threads  int
	seed     uint64 // the test's seed, given to the generator in every Context
	rec      *Recorder
	progress *progress
	// per thread, index th+1 (the nemesis thread is -1):
	busy    []bool
	process []history.Process
	jobs    []chan job
	nodes   []string
	waiting []*gen.Op // handed out, to be invoked at its Time
	// outstanding counts operations invoked and not completed.
	outstanding int
	dones       chan done
	free        []int
	exhausted   bool
	handed      int
}

func (in *interpreter) now() time.Duration { return time.Duration(in.rec.Now()) }

// freeThreads lists the idle threads in ascending order.
func (in *interpreter) freeThreads() []int {
	in.free = in.free[:0]
	for i, b := range in.busy {
		if !b {
			in.free = append(in.free, i-1)
		}
	}
	return in.free
}

func (in *interpreter) ctx(now time.Duration) gen.Context {
	return gen.Context{Seed: in.seed, Time: now, Threads: in.threads, Free: in.freeThreads()}
}

// invoke records op's invocation on its thread, tells the generator and
// hands it to the worker.
func (in *interpreter) invoke(op gen.Op) {
	th := op.Thread
	v, err := history.Normalize(op.Value)
	if err != nil {
		v = fmt.Sprint(op.Value)
	}
	e := in.rec.Record(history.Event{Process: in.process[th+1], Type: history.Invoke, F: op.F, Value: v, Node: in.nodes[th+1]})
	in.outstanding++
	if !in.exhausted {
		in.g = in.g.Update(in.ctx(time.Duration(e.Time)), gen.Event{Thread: th, Kind: gen.Invoked, F: op.F, Value: op.Value, Time: time.Duration(e.Time)})
	}
	in.jobs[th+1] <- job{op: op, process: in.process[th+1]}
}

// complete takes a worker's report.
func (in *interpreter) complete(d done) {
	in.outstanding--
	in.busy[d.thread+1] = false
	if d.thread == gen.NemesisThread {
		in.progress.fault(d.event.F)
	} else {
		in.progress.completed(d.event.Type)
		if d.event.Type == history.Info {
			// The process may still be running the operation: the thread
			// goes on as a new process, so no process has two operations
			// open at once.
			in.process[d.thread+1] += history.Process(in.threads)
		}
	}
	if !in.exhausted {
		in.g = in.g.Update(in.ctx(time.Duration(d.event.Time)), gen.Event{Thread: d.thread, Kind: gen.Completed, F: d.event.F, Value: d.event.Value, Time: time.Duration(d.event.Time), OK: d.event.Type == history.OK})
	}
}

// errStuck is returned when the generator waits for something that can
// never happen.
var errStuck = errors.New("the generator is stuck: it is pending with no operation outstanding and no time to wake up")

// protectedRun is run, turning a panic in the generator into an error: the
// operations in flight are then drained as after an interrupt, and the run
// goes on to heal and check what happened.
func (in *interpreter) protectedRun(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = in.drain(fmt.Errorf("the generator panicked: %v", p))
		}
	}()
	return in.run(ctx)
}

// run interprets until the generator is exhausted and every operation has
// completed, or ctx is done (then it waits up to drainGrace for operations
// in flight). It returns ctx's error when interrupted.
func (in *interpreter) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Deliver what has happened: completions first, then invocations
		// of waiting ops that are due, in ascending thread order.
		for drained := false; !drained; {
			select {
			case d := <-in.dones:
				in.complete(d)
			default:
				drained = true
			}
		}
		now := in.now()
		for i, w := range in.waiting {
			if w != nil && w.Time <= now {
				in.waiting[i] = nil
				in.invoke(*w)
			}
		}
		// Ask until the generator has nothing for now.
		var wake time.Duration
		for !in.exhausted {
			now = in.now()
			c := in.ctx(now)
			op, next, st := in.g.Next(c)
			if next == nil {
				return fmt.Errorf("at %v the generator returned no next generator", now)
			}
			in.g = next
			if st == gen.Ready {
				if !slices.Contains(c.Free, op.Thread) {
					return fmt.Errorf("at %v the generator handed %s %v to thread %d, which is not free (free: %v)", now, op.F, op.Value, op.Thread, c.Free)
				}
				if op.Time < c.Time {
					return fmt.Errorf("at %v the generator handed %s %v to thread %d for %v, in the past", now, op.F, op.Value, op.Thread, op.Time)
				}
				in.busy[op.Thread+1] = true
				in.handed++
				if op.Time <= now {
					in.invoke(op)
				} else {
					w := op
					in.waiting[op.Thread+1] = &w
				}
				continue
			}
			if st == gen.Pending {
				if op.Time > c.Time {
					wake = op.Time
				}
				break
			}
			if st == gen.Exhausted {
				in.exhausted = true
				break
			}
			return fmt.Errorf("at %v the generator answered with status %v", now, st)
		}
		// Sleep until the next thing that can change the answer.
		next := time.Duration(math.MaxInt64)
		if wake > 0 && !in.exhausted {
			next = wake
		}
		nwait := 0
		for _, w := range in.waiting {
			if w != nil {
				nwait++
				next = min(next, w.Time)
			}
		}
		if in.exhausted && in.outstanding == 0 && nwait == 0 {
			return nil
		}
		if in.outstanding == 0 && next == math.MaxInt64 {
			return errStuck
		}
		if next != math.MaxInt64 {
			timer.Reset(max(next-in.now(), 0))
		}
		select {
		case d := <-in.dones:
			in.complete(d)
		case <-timer.C:
		case <-ctx.Done():
			return in.drain(ctx.Err())
		}
		if next != math.MaxInt64 && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// drain, after an interruption, drops the ops not yet invoked and waits a
// while for those in flight.
func (in *interpreter) drain(cause error) error {
	in.exhausted = true
	for i := range in.waiting {
		in.waiting[i] = nil
	}
	deadline := time.After(drainGrace)
	for in.outstanding > 0 {
		select {
		case d := <-in.dones:
			in.complete(d)
		case <-deadline:
			return fmt.Errorf("%w; %d operations did not complete within %v and stay open in the history", cause, in.outstanding, drainGrace)
		}
	}
	return cause
}

// worker invokes the ops handed to one thread.
type worker struct {
	thread  int
	node    string
	base    Client // the test's client, which opens per-process clients
	client  Client
	nemesis Nemesis
	rec     *Recorder
	stale   bool // the last op ended in info: reopen before the next
	dones   chan<- done
	panics  *problems
}

func (w *worker) loop(ctx context.Context, jobs <-chan job, wg *sync.WaitGroup) {
	defer wg.Done()
	for j := range jobs {
		op := Op{Process: j.process, F: j.op.F, Value: j.op.Value}
		var c Completion
		if w.thread == gen.NemesisThread {
			c = w.invokeNemesis(ctx, op)
			// Jepsen's convention: a fault's start and end are info, since
			// nothing a nemesis does is a client-visible outcome.
			c.Type = history.Info
		} else {
			c = w.invokeClient(ctx, op)
		}
		v, err := history.Normalize(c.Value)
		if err != nil {
			v, c.Error = fmt.Sprint(c.Value), fmt.Sprintf("the client returned a value the history cannot hold: %v", err)
		}
		ev, err := history.Normalize(c.Error)
		if err != nil {
			ev = fmt.Sprint(c.Error)
		}
		e := w.rec.Record(history.Event{Process: j.process, Type: c.Type, F: j.op.F, Value: v, Error: ev, Node: w.node})
		w.dones <- done{thread: w.thread, event: e}
	}
	if w.client != nil {
		cl := w.client
		if err := protect("the client's Close", func() error { return cl.Close(context.WithoutCancel(ctx)) }); err != nil && w.panics != nil && strings.Contains(err.Error(), "panicked") {
			w.panics.add(err.Error())
		}
	}
}

// invokeNemesis invokes op on the nemesis; a panic is an info completion
// with the panic's text, and a problem of the run (the faults are still
// healed at the end).
func (w *worker) invokeNemesis(ctx context.Context, op Op) (c Completion) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("the nemesis panicked on %s: %v", op.F, r)
			c = Info(op.Value, msg)
			if w.panics != nil {
				w.panics.add(msg)
			}
		}
	}()
	return w.nemesis.Invoke(ctx, op)
}

func (w *worker) invokeClient(ctx context.Context, op Op) (c Completion) {
	defer func() {
		if r := recover(); r != nil {
			// Whatever the client did may have reached the system: the
			// outcome is unknown, and the run did not go as designed.
			msg := fmt.Sprintf("the client panicked: %v", r)
			c = Info(op.Value, msg)
			if w.panics != nil {
				w.panics.add(fmt.Sprintf("%s (process %s, %s %s)", msg, op.Process, op.F, history.Show(op.Value)))
			}
		}
		switch c.Type {
		case history.OK, history.Fail:
		case history.Info:
			w.stale = true
		default:
			c = Info(c.Value, fmt.Sprintf("the client answered %s, which is not a completion", c.Type))
			w.stale = true
		}
	}()
	if w.stale && w.client != nil {
		w.client.Close(ctx)
		w.client = nil
	}
	w.stale = false
	if w.client == nil {
		cl, err := w.base.Open(ctx, w.node)
		if err != nil {
			// Nothing was sent: the operation certainly did not happen.
			return Fail(op.Value, "opening a client for node "+w.node+": "+err.Error())
		}
		w.client = cl
	}
	return w.client.Invoke(ctx, op)
}
