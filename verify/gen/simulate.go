package gen

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Simulate runs g against virtual time, following the package's protocol
// with threads client threads and the nemesis thread: a thread handed an op
// invokes it at op.Time (or at once if that has passed), the op completes
// latency(op) later, and both events go back to g through Update. There is
// no clock and no goroutine: time jumps from one event (or wake-up time) to
// the next, and events of one instant are ordered as the protocol says, so
// the result is a function of g, threads and latency alone.
//
// Simulate stops when g is exhausted and its ops have completed, when g is
// stuck (Pending, with nothing outstanding and no wake-up time), or before
// the first instant later than until. It returns the events in order.
//
// It panics if g breaks the protocol (an op for a thread that is not free,
// an op scheduled in the past, no status), or if latency returns a duration
// that is not positive: with instant completions, an endless generator
// would never let virtual time move.
func Simulate(g Generator, threads int, latency func(op Op) time.Duration, until time.Duration) []Event {
	return SimulateSeed(0, g, threads, latency, until)
}

// SimulateSeed is Simulate in a run whose seed (Context.Seed) is seed, as
// the harness runs a test whose Test.Seed is seed.
func SimulateSeed(seed uint64, g Generator, threads int, latency func(op Op) time.Duration, until time.Duration) []Event {
	var events []Event
	sim := simulation{seed: seed}
	err := sim.run(g, threads, latency, until, -1, func(ev Event) { events = append(events, ev) })
	if err != nil {
		panic(err)
	}
	return events
}

// simulation holds a simulated run's seed.
type simulation struct{ seed uint64 }

// thread states in a simulation.
const (
	idle    = iota
	waiting // handed an op, to be invoked at its time
	running // invoked, to complete at its time
)

type simThread struct {
	state int
	op    Op
	at    time.Duration // invoke time when waiting, completion time when running
	lat   time.Duration
}

// simulate is Simulate, reporting protocol breaches as errors, and handing
// out at most maxOps ops when maxOps >= 0 (benchmarks run a fixed number).
func simulate(g Generator, threads int, latency func(Op) time.Duration, until time.Duration, maxOps int, emit func(Event)) error {
	return simulation{}.run(g, threads, latency, until, maxOps, emit)
}

func (sim simulation) run(g Generator, threads int, latency func(Op) time.Duration, until time.Duration, maxOps int, emit func(Event)) error {
	ts := make([]simThread, threads+1) // ts[th+1] is thread th
	buf := make([]int, 0, threads+1)
	free := func() []int {
		buf = buf[:0]
		for i := range ts {
			if ts[i].state == idle {
				buf = append(buf, i-1)
			}
		}
		return buf
	}
	var now time.Duration
	done := false
	handed := 0
	event := func(th int, kind EventKind) {
		t := &ts[th+1]
		// Every simulated op takes effect: nothing runs that could fail.
		ev := Event{Thread: th, Kind: kind, F: t.op.F, Value: t.op.Value, Time: now, OK: kind == Completed}
		if kind == Invoked {
			t.state, t.at = running, now+t.lat
		} else {
			t.state = idle
		}
		emit(ev)
		if !done {
			g = g.Update(Context{Seed: sim.seed, Time: now, Threads: threads, Free: free()}, ev)
		}
	}
	for {
		var wake time.Duration
	ask:
		for !done {
			ctx := Context{Seed: sim.seed, Time: now, Threads: threads, Free: free()}
			op, next, st := g.Next(ctx)
			if next == nil {
				return fmt.Errorf("gen: at %v the generator returned no next generator", now)
			}
			g = next
			switch st {
			case Ready:
				if !slices.Contains(ctx.Free, op.Thread) {
					return fmt.Errorf("gen: at %v the generator handed %s %v to thread %d, which is not free (free: %v)", now, op.F, op.Value, op.Thread, ctx.Free)
				}
				if op.Time < now {
					return fmt.Errorf("gen: at %v the generator handed %s %v to thread %d for %v, in the past", now, op.F, op.Value, op.Thread, op.Time)
				}
				lat := latency(op)
				if lat <= 0 {
					return fmt.Errorf("gen: latency of %s %v is %v; it must be positive", op.F, op.Value, lat)
				}
				ts[op.Thread+1] = simThread{state: waiting, op: op, at: op.Time, lat: lat}
				handed++
				if maxOps >= 0 && handed >= maxOps {
					done = true
				}
				if op.Time == now {
					event(op.Thread, Invoked)
				}
			case Pending:
				wake = wakeAt(op, now)
				break ask
			case Exhausted:
				done = true
			default:
				return fmt.Errorf("gen: at %v the generator answered with %v", now, st)
			}
		}
		next := time.Duration(math.MaxInt64)
		for i := range ts {
			if ts[i].state != idle {
				next = min(next, ts[i].at)
			}
		}
		if !done && wake != 0 {
			next = min(next, wake)
		}
		if next == math.MaxInt64 || next > until {
			return nil
		}
		now = next
		for i := range ts {
			if ts[i].state == running && ts[i].at == now {
				event(i-1, Completed)
			}
		}
		for i := range ts {
			if ts[i].state == waiting && ts[i].at == now {
				event(i-1, Invoked)
			}
		}
	}
}
