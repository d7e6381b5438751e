package gen

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// NemesisThread is the thread the fault schedule runs on; client threads are
// 0..n-1. It is -1 so that it sorts before every client thread.
const NemesisThread = -1

// Op is an operation a generator hands out for one thread.
type Op struct {
	// Thread is the thread that must run it. Ops given to Once, Repeat and
	// Fn use it only to say "nemesis": NemesisThread means the nemesis
	// thread alone may take the op; any other value means a client thread.
	Thread int
	// F names the operation (read, write, start, stop...).
	F string
	// Value is the operation's argument.
	Value any
	// Time is the earliest time (since the test started) it may be invoked;
	// the interpreter waits until then. Generators that sleep or stagger set
	// it. A handed-out op's Time is never before the Context's Time.
	Time time.Duration
}

// F returns a client operation: any free client thread may take it.
func F(f string, value any) Op { return Op{F: f, Value: value} }

// NemesisOp returns an operation only the nemesis thread may take.
func NemesisOp(f string, value any) Op {
	return Op{Thread: NemesisThread, F: f, Value: value}
}

// Context is what a generator sees when asked for an op.
//
// Routers (Clients, Nemesis, EachThread, Reserve) narrow it for the
// generators they wrap: those see only their own threads in Free and in
// Scope. An interpreter sets the exported fields; the others, zero, mean
// every thread and no time limit.
type Context struct {
	// Seed is the run's seed (the harness's Test.Seed). Every random
	// generator of this package draws from a source derived from Seed and
	// its own stream number (the seed argument it was built with), so one
	// seed replays a whole test and another gives another test; with Seed 0
	// a generator's source is its stream number alone. See Context.Rand.
	Seed uint64
	// Time is now, since the test started.
	Time time.Duration
	// Threads is the number of client threads.
	Threads int
	// Free lists the threads idle now, in ascending order, NemesisThread
	// first when idle. It belongs to the caller and is valid only during
	// the call.
	Free []int

	// scoped says lo and hi are set; otherwise the scope is every thread.
	scoped bool
	lo, hi int
	// horizon, when not 0, is the time from which no op may be scheduled
	// (a TimeLimit's end). It is enforced where ops get their Time, so that
	// a generator refusing a late op still reports when an earlier one may
	// come (Any beside a Sleep); a TimeLimit throwing the op away could not
	// learn that.
	horizon time.Duration
}

// Rand returns the source of stream in this run: NewRand(stream) when
// c.Seed is 0, and otherwise a source that depends on both, so that
// distinct streams of one run, and one stream of distinct runs, draw
// distinct sequences. Generators call it when first asked, which is how
// the test's seed reaches generators built before the test knew it.
func (c Context) Rand(stream uint64) Rand {
	if c.Seed == 0 {
		return NewRand(stream)
	}
	base := NewRand(c.Seed)
	mixed := NewRand(base.Uint64() ^ stream)
	return NewRand(mixed.Uint64())
}

// Scope returns the threads the generator may ever use: lo <= thread < hi.
// Outside any router that is NemesisThread and every client thread.
func (c Context) Scope() (lo, hi int) {
	if !c.scoped {
		return NemesisThread, c.Threads
	}
	return c.lo, c.hi
}

// restrict narrows c to the threads in [lo, hi) and its current scope.
// Free stays a subslice (capped, so that nobody can append into the
// caller's array): routers run on every ask, and must not allocate.
func (c Context) restrict(lo, hi int) Context {
	clo, chi := c.Scope()
	lo, hi = max(lo, clo), min(hi, chi)
	hi = max(hi, lo)
	i, _ := slices.BinarySearch(c.Free, lo)
	j, _ := slices.BinarySearch(c.Free, hi)
	c.Free = c.Free[i:j:j]
	c.scoped, c.lo, c.hi = true, lo, hi
	return c
}

// clients narrows c to its client threads.
func (c Context) clients() Context { return c.restrict(0, math.MaxInt) }

// EventKind says what happened to an operation.
type EventKind int8

// Event kinds. The zero value is neither, so that an event nobody filled in
// is caught.
const (
	// Invoked: the thread started the op.
	Invoked EventKind = iota + 1
	// Completed: the op finished, whatever its outcome.
	Completed
)

// String returns "invoke" or "complete".
func (k EventKind) String() string {
	switch k {
	case Invoked:
		return "invoke"
	case Completed:
		return "complete"
	}
	return fmt.Sprintf("EventKind(%d)", int8(k))
}

// Event tells a generator that an op was invoked or completed.
type Event struct {
	Thread int
	Kind   EventKind
	F      string
	// Value is the op's value: its argument when invoked, its result when
	// completed (Simulate, which runs nothing, repeats the argument).
	Value any
	// Time is when it happened, since the test started.
	Time time.Duration
	// OK, on a completion, says the op took effect; false when it failed
	// or its effect is unknown (a timeout), so that a generator can send
	// again what must happen (an undrain, a heal).
	OK bool
}

// String renders an event as "time thread kind f value", the nemesis
// thread as "nemesis", for logs and test expectations.
func (e Event) String() string {
	th := "nemesis"
	if e.Thread != NemesisThread {
		th = fmt.Sprintf("t%d", e.Thread)
	}
	return fmt.Sprintf("%v %s %s %s %v", e.Time, th, e.Kind, e.F, e.Value)
}

// Status is the outcome of asking a generator for an op.
type Status int8

// Statuses. The zero value is none of them, so that a generator that forgot
// to set it is caught by the interpreter instead of read as Ready.
const (
	// Ready: here is an op.
	Ready Status = iota + 1
	// Pending: nothing now; ask again when the context changes (an event)
	// or, if the returned op's Time is later than the context's, at that
	// time.
	Pending
	// Exhausted: never again.
	Exhausted
)

// String returns "ready", "pending" or "exhausted".
func (s Status) String() string {
	switch s {
	case Ready:
		return "ready"
	case Pending:
		return "pending"
	case Exhausted:
		return "exhausted"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// Generator is an immutable value: Next and Update return new generators
// and never change the receiver, so asking the same value twice with the
// same Context gives the same answer, and a test can be replayed from any
// generator value it kept.
type Generator interface {
	// Next returns an op for a thread in ctx.Free (st Ready), or nothing
	// yet (Pending, with op.Time the time to ask again if later than
	// ctx.Time), or nothing ever again (Exhausted). next replaces the
	// receiver whatever st is. See the package documentation for the
	// protocol.
	Next(ctx Context) (op Op, next Generator, st Status)
	// Update tells the generator that an op was invoked or completed.
	Update(ctx Context, ev Event) Generator
}

// assign places op on the first free thread that may take it: the nemesis
// thread for a nemesis op; the lowest free client thread otherwise, or the
// nemesis thread when the scope holds no client thread (inside Nemesis), so
// that a fault schedule may be written with F as well as NemesisOp. It
// refuses an op due at or after the context's horizon.
func assign(ctx Context, op Op) (Op, bool) {
	if len(ctx.Free) == 0 {
		return op, false
	}
	op.Time = max(op.Time, ctx.Time)
	if ctx.horizon != 0 && op.Time >= ctx.horizon {
		return op, false
	}
	nemFree := ctx.Free[0] == NemesisThread
	if op.Thread == NemesisThread {
		return op, nemFree
	}
	if !nemFree {
		op.Thread = ctx.Free[0]
		return op, true
	}
	if len(ctx.Free) > 1 {
		op.Thread = ctx.Free[1]
		return op, true
	}
	if lo, hi := ctx.Scope(); hi <= max(lo, 0) {
		op.Thread = NemesisThread
		return op, true
	}
	return op, false
}

// wakeAt returns the wake-up time a Pending answer carries, or 0 when only
// an event can change it (0 is never a wake-up time: it would have to be
// later than some now >= 0).
func wakeAt(op Op, now time.Duration) time.Duration {
	if op.Time > now {
		return op.Time
	}
	return 0
}

// earlier returns the earlier of two wake-up times, 0 meaning none.
func earlier(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// pending returns a Pending answer that wakes at w (0: on an event only).
func pending(w time.Duration, next Generator) (Op, Generator, Status) {
	return Op{Time: w}, next, Pending
}

// exhausted is every finished generator: it says Exhausted forever.
type exhausted struct{}

// spent is the one finished generator; combinators compare against it to
// skip children that are done.
var spent Generator = &exhausted{}

func (g *exhausted) Next(Context) (Op, Generator, Status) { return Op{}, g, Exhausted }

func (g *exhausted) Update(Context, Event) Generator { return g }
