package gen

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// examples returns one generator of each kind, fresh.
func examples() map[string]Generator {
	a, b, n := F("a", 1), F("b", 2), NemesisOp("n", 3)
	return map[string]Generator{
		"Once":        Once(a),
		"Repeat":      Repeat(a),
		"RepeatN":     RepeatN(3, a),
		"Fn":          seeded["Fn"](1),
		"Sleep":       Seq(Sleep(5*ms), Once(a)),
		"Seq":         Seq(Once(a), Once(b), Repeat(n)),
		"Then":        Then(Once(n), Repeat(b)),
		"Phases":      Phases(RepeatN(2, a), Once(b)),
		"Synchronize": Synchronize(Repeat(a)),
		"Cycle":       Cycle(Once(a), Sleep(ms), Once(n)),
		"Mix":         seeded["Mix"](1),
		"Any":         Any(Clients(Repeat(a)), Nemesis(Repeat(n))),
		"FlipFlop":    FlipFlop(Repeat(a), Repeat(n)),
		"Stagger":     seeded["Stagger"](1),
		"Delay":       Delay(ms, Repeat(b)),
		"Limit":       Limit(4, Repeat(a)),
		"TimeLimit":   TimeLimit(20*ms, Repeat(a)),
		"EachThread":  EachThread(func(th int) Generator { return RepeatN(th+1, a) }),
		"Reserve":     Reserve([]Reserved{{1, Repeat(a)}}, Repeat(b)),
		"Clients":     Clients(Repeat(a)),
		"Nemesis":     Nemesis(Repeat(a)),
	}
}

func TestNextDoesNotChangeTheReceiver(t *testing.T) {
	ctx := Context{Time: ms, Threads: 2, Free: []int{NemesisThread, 0, 1}}
	for name, g := range examples() {
		op1, next, st1 := g.Next(ctx)
		op2, _, st2 := g.Next(ctx)
		if st1 != st2 || !reflect.DeepEqual(op1, op2) {
			t.Errorf("%s: Next twice gave %v %+v, then %v %+v", name, st1, op1, st2, op2)
		}
		// Driving the returned generator on must not reach back either.
		c := ctx
		for range 5 {
			op, n, st := next.Next(c)
			if st == Ready {
				c.Free = slices.DeleteFunc(slices.Clone(c.Free), func(th int) bool { return th == op.Thread })
				n = n.Update(c, Event{Thread: op.Thread, Kind: Invoked, F: op.F, Time: c.Time})
			}
			next = n
		}
		if op3, _, st3 := g.Next(ctx); st3 != st1 || !reflect.DeepEqual(op3, op1) {
			t.Errorf("%s: after driving its successor, Next gave %v %+v, want %v %+v", name, st3, op3, st1, op1)
		}
		// A whole run from the same value replays exactly.
		if a, b := Simulate(g, 2, fixed(ms), 30*ms), Simulate(g, 2, fixed(ms), 30*ms); len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("%s: two runs of one value differ, or are empty (%d events)", name, len(a))
		}
	}
}

func TestSleepClockIsInTheValue(t *testing.T) {
	g := Sleep(time.Second)
	op, started, st := g.Next(Context{Time: 0})
	if st != Pending || op.Time != time.Second {
		t.Fatalf("Sleep at 0: %v until %v, want pending until 1s", st, op.Time)
	}
	// The receiver has not started: asked later, it sleeps from then.
	if op, _, _ := g.Next(Context{Time: 500 * ms}); op.Time != 1500*ms {
		t.Errorf("unstarted Sleep asked at 500ms wakes at %v, want 1.5s", op.Time)
	}
	// The started one keeps its clock.
	if op, _, _ := started.Next(Context{Time: 500 * ms}); op.Time != time.Second {
		t.Errorf("started Sleep asked at 500ms wakes at %v, want 1s", op.Time)
	}
	if _, _, st := started.Next(Context{Time: time.Second}); st != Exhausted {
		t.Errorf("started Sleep at 1s: %v, want exhausted", st)
	}
}

// randomOp is a client or nemesis op, sometimes scheduled later.
func randomOp(r *Rand) Op {
	op := F(fmt.Sprint("f", r.IntN(3)), r.IntN(10))
	if r.IntN(4) == 0 {
		op.Thread = NemesisThread
	}
	if r.IntN(3) == 0 {
		op.Time = r.Duration(30 * ms)
	}
	return op
}

// randomGen composes generators at random, depth levels deep.
func randomGen(r *Rand, depth int) Generator {
	if depth <= 0 || r.IntN(4) == 0 {
		switch r.IntN(6) {
		case 0:
			return Once(randomOp(r))
		case 1:
			return Repeat(randomOp(r))
		case 2:
			return RepeatN(r.IntN(4), randomOp(r))
		case 3:
			nem := r.IntN(3) == 0
			return Fn(r.Uint64(), func(_ Context, r *Rand) Op {
				if nem {
					return NemesisOp("fn", r.IntN(5))
				}
				return F("fn", r.IntN(5))
			})
		case 4:
			return Sleep(r.Duration(40 * ms))
		default:
			return Limit(r.IntN(6), Repeat(randomOp(r)))
		}
	}
	some := func() []Generator {
		gs := make([]Generator, 1+r.IntN(3))
		for i := range gs {
			gs[i] = randomGen(r, depth-1)
		}
		return gs
	}
	switch r.IntN(16) {
	case 0:
		return Seq(some()...)
	case 1:
		return Phases(some()...)
	case 2:
		return Synchronize(randomGen(r, depth-1))
	case 3:
		return Cycle(some()...)
	case 4:
		return Mix(r.Uint64(), some()...)
	case 5:
		return Any(some()...)
	case 6:
		return FlipFlop(randomGen(r, depth-1), randomGen(r, depth-1))
	case 7:
		return Stagger(r.Uint64(), r.Duration(20*ms), randomGen(r, depth-1))
	case 8:
		return Delay(r.Duration(20*ms), randomGen(r, depth-1))
	case 9:
		return Limit(r.IntN(20), randomGen(r, depth-1))
	case 10:
		return TimeLimit(r.Duration(300*ms), randomGen(r, depth-1))
	case 11:
		seed := r.Uint64()
		return EachThread(func(th int) Generator {
			rr := NewRand(seed + uint64(th))
			return randomGen(&rr, depth-1)
		})
	case 12:
		groups := make([]Reserved, r.IntN(3))
		for i := range groups {
			groups[i] = Reserved{r.IntN(3), randomGen(r, depth-1)}
		}
		var rest Generator
		if r.IntN(2) == 0 {
			rest = randomGen(r, depth-1)
		}
		return Reserve(groups, rest)
	case 13:
		return Clients(randomGen(r, depth-1))
	case 14:
		return Nemesis(randomGen(r, depth-1))
	default:
		return Then(randomGen(r, depth-1), randomGen(r, depth-1))
	}
}

// latencyOf gives ops different, deterministic latencies.
func latencyOf(op Op) time.Duration {
	return time.Duration(1+len(op.F)+int(fmt.Sprint(op.Value)[0]%7)) * ms
}

func TestRandomCompositions(t *testing.T) {
	r := NewRand(20240601)
	ran := 0
	for trial := range 3000 {
		seed := r.Uint64()
		gr := NewRand(seed)
		g := randomGen(&gr, 4)
		threads := r.IntN(5)
		var evs []Event
		err := simulate(g, threads, latencyOf, time.Second, -1, func(e Event) { evs = append(evs, e) })
		if err != nil {
			t.Fatalf("trial %d (seed %d, %d threads): %v", trial, seed, threads, err)
		}
		// Each thread alternates invoke, complete, invoke...; time never
		// goes back; ops stay in range.
		busy := map[int]bool{}
		var last time.Duration
		for _, e := range evs {
			if e.Time < last {
				t.Fatalf("trial %d: time went back: %v", trial, e)
			}
			last = e.Time
			if e.Thread < NemesisThread || e.Thread >= threads {
				t.Fatalf("trial %d: no thread %d", trial, e.Thread)
			}
			if busy[e.Thread] != (e.Kind == Completed) {
				t.Fatalf("trial %d: %v out of turn", trial, e)
			}
			busy[e.Thread] = e.Kind == Invoked
		}
		// A value replays.
		if again := Simulate(g, threads, latencyOf, time.Second); !slices.Equal(evs, again) {
			t.Fatalf("trial %d: a second run differs", trial)
		}
		if len(evs) > 0 {
			ran++
		}
	}
	// The check means little if the compositions do nothing.
	if ran < 1500 {
		t.Errorf("only %d of 3000 compositions ran an op", ran)
	}
}

// greedy breaks the protocol: it hands every op to thread 0.
type greedy struct{}

func (g greedy) Next(ctx Context) (Op, Generator, Status) {
	return Op{Thread: 0, F: "x", Time: ctx.Time}, g, Ready
}

func (g greedy) Update(Context, Event) Generator { return g }

func TestSimulateRejectsBrokenGenerators(t *testing.T) {
	err := simulate(greedy{}, 2, fixed(ms), time.Second, -1, func(Event) {})
	if err == nil || !strings.Contains(err.Error(), "thread 0, which is not free") {
		t.Errorf("greedy generator: %v", err)
	}
	err = simulate(Once(F("a", nil)), 1, fixed(0), time.Second, -1, func(Event) {})
	if err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("zero latency: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Simulate did not panic on a broken generator")
		}
	}()
	Simulate(greedy{}, 2, fixed(ms), time.Second)
}
