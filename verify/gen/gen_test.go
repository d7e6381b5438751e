package gen

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// fixed is a latency function: every op takes d.
func fixed(d time.Duration) func(Op) time.Duration {
	return func(Op) time.Duration { return d }
}

// byF is a latency function: ops named f take d, others 10ms.
func byF(f string, d time.Duration) func(Op) time.Duration {
	return func(op Op) time.Duration {
		if op.F == f {
			return d
		}
		return 10 * ms
	}
}

// expect compares events with their String forms, one by one.
func expect(t *testing.T, got []Event, want ...string) {
	t.Helper()
	g := make([]string, len(got))
	for i, e := range got {
		g[i] = e.String()
	}
	if !slices.Equal(g, want) {
		t.Errorf("events:\n\t%s\nwant:\n\t%s", strings.Join(g, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// invokes returns the invoke events of ops named f.
func invokes(evs []Event, f string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == Invoked && (f == "" || e.F == f) {
			out = append(out, e)
		}
	}
	return out
}

func TestOnce(t *testing.T) {
	expect(t, Simulate(Once(F("read", 1)), 2, fixed(10*ms), time.Second),
		"0s t0 invoke read 1",
		"10ms t0 complete read 1")
	expect(t, Simulate(Once(NemesisOp("kill", "n1")), 2, fixed(10*ms), time.Second),
		"0s nemesis invoke kill n1",
		"10ms nemesis complete kill n1")
	// Time is the earliest time to run; the op's own thread field is ignored
	// for client ops.
	expect(t, Simulate(Once(Op{Thread: 1, F: "w", Value: 2, Time: 5 * ms}), 2, fixed(10*ms), time.Second),
		"5ms t0 invoke w 2",
		"15ms t0 complete w 2")
	// A nemesis op has no thread inside Clients: nothing happens, and the
	// simulation ends instead of waiting forever.
	expect(t, Simulate(Clients(Once(NemesisOp("kill", nil))), 2, fixed(10*ms), time.Second))
}

func TestRepeat(t *testing.T) {
	expect(t, Simulate(Repeat(F("read", nil)), 2, fixed(10*ms), 25*ms),
		"0s t0 invoke read <nil>",
		"0s t1 invoke read <nil>",
		"10ms t0 complete read <nil>",
		"10ms t1 complete read <nil>",
		"10ms t0 invoke read <nil>",
		"10ms t1 invoke read <nil>",
		"20ms t0 complete read <nil>",
		"20ms t1 complete read <nil>",
		"20ms t0 invoke read <nil>",
		"20ms t1 invoke read <nil>")
	expect(t, Simulate(RepeatN(3, F("read", nil)), 2, fixed(10*ms), time.Second),
		"0s t0 invoke read <nil>",
		"0s t1 invoke read <nil>",
		"10ms t0 complete read <nil>",
		"10ms t1 complete read <nil>",
		"10ms t0 invoke read <nil>",
		"20ms t0 complete read <nil>")
}

func TestFn(t *testing.T) {
	g := Fn(7, func(ctx Context, r *Rand) Op {
		return F("w", fmt.Sprint(ctx.Time, "/", r.IntN(100)))
	})
	r := NewRand(7)
	a, b, c := r.IntN(100), r.IntN(100), r.IntN(100)
	expect(t, Simulate(g, 1, fixed(ms), 2*ms),
		fmt.Sprintf("0s t0 invoke w 0s/%d", a),
		fmt.Sprintf("1ms t0 complete w 0s/%d", a),
		fmt.Sprintf("1ms t0 invoke w 1ms/%d", b),
		fmt.Sprintf("2ms t0 complete w 1ms/%d", b),
		fmt.Sprintf("2ms t0 invoke w 2ms/%d", c))
	if a == b && b == c {
		t.Fatalf("seed 7 draws %d three times; pick a seed that shows the draws", a)
	}
}

func TestSeqDoesNotWaitForCompletion(t *testing.T) {
	expect(t, Simulate(Seq(Once(F("a", nil)), Once(F("b", nil))), 2, fixed(10*ms), time.Second),
		"0s t0 invoke a <nil>",
		"0s t1 invoke b <nil>",
		"10ms t0 complete a <nil>",
		"10ms t1 complete b <nil>")
	expect(t, Simulate(Then(RepeatN(2, F("a", nil)), Once(F("b", nil))), 1, fixed(10*ms), time.Second),
		"0s t0 invoke a <nil>",
		"10ms t0 complete a <nil>",
		"10ms t0 invoke a <nil>",
		"20ms t0 complete a <nil>",
		"20ms t0 invoke b <nil>",
		"30ms t0 complete b <nil>")
	if evs := Simulate(Seq(), 1, fixed(ms), time.Second); len(evs) != 0 {
		t.Errorf("empty Seq: %v", evs)
	}
}

func TestSeqKeepsTimeOrder(t *testing.T) {
	// b must not run before a, scheduled for 5ms, though a thread is free
	// at 0.
	expect(t, Simulate(Seq(Once(Op{F: "a", Time: 5 * ms}), Once(F("b", nil))), 2, fixed(10*ms), time.Second),
		"5ms t0 invoke a <nil>",
		"5ms t1 invoke b <nil>",
		"15ms t0 complete a <nil>",
		"15ms t1 complete b <nil>")
}

func TestPhasesWaitsForCompletion(t *testing.T) {
	lat := byF("slow", 100*ms)
	first := Seq(Once(F("slow", nil)), Once(F("fast", nil)))
	expect(t, Simulate(Phases(first, Once(F("x", nil))), 2, lat, time.Second),
		"0s t0 invoke slow <nil>",
		"0s t1 invoke fast <nil>",
		"10ms t1 complete fast <nil>",
		"100ms t0 complete slow <nil>",
		"100ms t0 invoke x <nil>",
		"110ms t0 complete x <nil>")
	// Seq, by contrast, starts x on the first free thread.
	x := invokes(Simulate(Seq(first, Once(F("x", nil))), 2, lat, time.Second), "x")
	if len(x) != 1 || x[0].Time != 10*ms {
		t.Errorf("Seq: x invoked %v, want once at 10ms", x)
	}
}

func TestPhasesWaitsForItsOwnOpsOnly(t *testing.T) {
	// The nemesis op beside the phases takes a second; phase b waits for a
	// (10ms), not for it.
	g := Any(
		Nemesis(Once(NemesisOp("pause", nil))),
		Clients(Phases(Once(F("a", nil)), Once(F("b", nil)))),
	)
	b := invokes(Simulate(g, 2, byF("pause", time.Second), 10*time.Second), "b")
	if len(b) != 1 || b[0].Time != 10*ms {
		t.Errorf("b invoked %v, want once at 10ms", b)
	}
}

func TestSynchronize(t *testing.T) {
	expect(t, Simulate(Seq(Once(F("slow", nil)), Synchronize(Once(F("b", nil)))), 2, byF("slow", 100*ms), time.Second),
		"0s t0 invoke slow <nil>",
		"100ms t0 complete slow <nil>",
		"100ms t0 invoke b <nil>",
		"110ms t0 complete b <nil>")
	// Inside Clients, every thread means every client thread: the nemesis's
	// one-second op is not waited for.
	g := Any(
		Nemesis(Once(NemesisOp("pause", nil))),
		Clients(Seq(Once(F("a", nil)), Synchronize(Once(F("b", nil))))),
	)
	b := invokes(Simulate(g, 2, byF("pause", time.Second), 10*time.Second), "b")
	if len(b) != 1 || b[0].Time != 10*ms {
		t.Errorf("b invoked %v, want once at 10ms", b)
	}
	// At the top level it is every thread, the nemesis too.
	g = Any(Once(NemesisOp("pause", nil)), Seq(Once(F("a", nil)), Synchronize(Once(F("b", nil)))))
	b = invokes(Simulate(g, 2, byF("pause", time.Second), 10*time.Second), "b")
	if len(b) != 1 || b[0].Time != time.Second {
		t.Errorf("b invoked %v, want once at 1s", b)
	}
}

func TestMix(t *testing.T) {
	g := Mix(1, Repeat(F("a", nil)), Repeat(F("b", nil)), Repeat(F("c", nil)))
	var fs []string
	for _, e := range invokes(Simulate(g, 1, fixed(ms), 19*ms), "") {
		fs = append(fs, e.F)
	}
	// The sequence for seed 1 is part of the contract: a --seed replays.
	if got, want := strings.Join(fs, ""), "bccbbccbacbbbbbabccc"; got != want {
		t.Errorf("Mix(1) chose %s, want %s", got, want)
	}
	// Exhausted generators drop out; Mix ends when all have.
	evs := Simulate(Mix(2, Once(F("a", nil)), RepeatN(2, F("b", nil))), 1, fixed(ms), time.Second)
	var n = map[string]int{}
	for _, e := range invokes(evs, "") {
		n[e.F]++
	}
	if n["a"] != 1 || n["b"] != 2 || len(evs) != 6 {
		t.Errorf("Mix of Once(a) and RepeatN(2, b): %v", evs)
	}
}

func TestMixHoldsItsChoice(t *testing.T) {
	// When the chosen generator cannot run, Mix waits for it instead of
	// taking another, so timing cannot bias the choice: here the nemesis
	// ops wait for the nemesis thread, though client threads are free, and
	// the order stays seed 1's ("bccbbc...", c the nemesis op).
	g := Mix(1, Repeat(F("a", nil)), Repeat(F("b", nil)), Repeat(NemesisOp("c", nil)))
	var fs []string
	for _, e := range invokes(Simulate(g, 3, byF("c", 5*ms), 11*ms), "") {
		fs = append(fs, fmt.Sprint(e.Time, e.F))
	}
	want := "0sb 0sc 5msc 5msb 5msb 10msc"
	if got := strings.Join(fs, " "); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestStagger(t *testing.T) {
	evs := Simulate(Stagger(1, 10*ms, Repeat(F("r", nil))), 2, fixed(ms), 50*ms)
	expect(t, evs,
		"0s t0 invoke r <nil>",
		"1ms t0 complete r <nil>",
		"11.331231ms t1 invoke r <nil>",
		"12.331231ms t1 complete r <nil>",
		"26.246866ms t0 invoke r <nil>",
		"27.246866ms t0 complete r <nil>",
		"45.666921ms t1 invoke r <nil>",
		"46.666921ms t1 complete r <nil>")
	// The gaps are the draws of seed 1, scaled to [0, 20ms).
	r := NewRand(1)
	inv := invokes(evs, "r")
	for i := 1; i < len(inv); i++ {
		if gap, want := inv[i].Time-inv[i-1].Time, r.Duration(20*ms); gap != want {
			t.Errorf("gap %d is %v, want %v", i, gap, want)
		}
	}
}

func TestDelay(t *testing.T) {
	// Ops are handed out as soon as a thread is free, for their time: the
	// 10ms op goes to t1 at 0, while t0 is busy.
	expect(t, Simulate(Delay(10*ms, Repeat(F("r", nil))), 3, fixed(ms), 35*ms),
		"0s t0 invoke r <nil>",
		"1ms t0 complete r <nil>",
		"10ms t1 invoke r <nil>",
		"11ms t1 complete r <nil>",
		"20ms t2 invoke r <nil>",
		"21ms t2 complete r <nil>",
		"30ms t0 invoke r <nil>",
		"31ms t0 complete r <nil>")
}

func TestSleep(t *testing.T) {
	expect(t, Simulate(Seq(Once(F("a", nil)), Sleep(time.Second), Once(F("b", nil))), 1, fixed(10*ms), time.Minute),
		"0s t0 invoke a <nil>",
		"10ms t0 complete a <nil>",
		"1s t0 invoke b <nil>",
		"1.01s t0 complete b <nil>")
	// Sleep starts when a is handed out, not when it completes: a 2s op
	// does not push b back.
	b := invokes(Simulate(Seq(Once(F("a", nil)), Sleep(time.Second), Once(F("b", nil))), 2, byF("a", 2*time.Second), time.Minute), "b")
	if len(b) != 1 || b[0].Time != time.Second {
		t.Errorf("b invoked %v, want once at 1s", b)
	}
	if evs := Simulate(Sleep(time.Second), 1, fixed(ms), time.Minute); len(evs) != 0 {
		t.Errorf("Sleep alone: %v", evs)
	}
	// Seq raises Sleep's start to a's scheduled time.
	b = invokes(Simulate(Seq(Once(Op{F: "a", Time: 5 * ms}), Sleep(time.Second), Once(F("b", nil))), 2, fixed(ms), time.Minute), "b")
	if len(b) != 1 || b[0].Time != time.Second+5*ms {
		t.Errorf("b invoked %v, want once at 1.005s", b)
	}
}

func TestLimit(t *testing.T) {
	expect(t, Simulate(Limit(2, Repeat(F("r", nil))), 3, fixed(ms), time.Second),
		"0s t0 invoke r <nil>",
		"0s t1 invoke r <nil>",
		"1ms t0 complete r <nil>",
		"1ms t1 complete r <nil>")
	if evs := Simulate(Limit(0, Repeat(F("r", nil))), 3, fixed(ms), time.Second); len(evs) != 0 {
		t.Errorf("Limit 0: %v", evs)
	}
}

func TestTimeLimit(t *testing.T) {
	expect(t, Simulate(TimeLimit(25*ms, Delay(10*ms, Repeat(F("r", nil)))), 1, fixed(ms), time.Second),
		"0s t0 invoke r <nil>",
		"1ms t0 complete r <nil>",
		"10ms t0 invoke r <nil>",
		"11ms t0 complete r <nil>",
		"20ms t0 invoke r <nil>",
		"21ms t0 complete r <nil>")
	// The clock starts when TimeLimit is first asked.
	var times []time.Duration
	for _, e := range invokes(Simulate(Seq(Sleep(time.Second), TimeLimit(25*ms, Delay(10*ms, Repeat(F("r", nil))))), 1, fixed(ms), time.Minute), "r") {
		times = append(times, e.Time)
	}
	if want := []time.Duration{time.Second, time.Second + 10*ms, time.Second + 20*ms}; !slices.Equal(times, want) {
		t.Errorf("invoked at %v, want %v", times, want)
	}
	// An op scheduled past the limit is not handed out, but an earlier one
	// that comes later still is.
	g := TimeLimit(100*ms, Any(Once(Op{F: "late", Time: 150 * ms}), Seq(Sleep(50*ms), Once(F("b", nil)))))
	expect(t, Simulate(g, 1, fixed(ms), time.Second),
		"50ms t0 invoke b <nil>",
		"51ms t0 complete b <nil>")
}

func TestEachThread(t *testing.T) {
	g := EachThread(func(th int) Generator {
		return Seq(Once(F("a", th)), Sleep(time.Duration(th+1)*100*ms), Once(F("b", th)))
	})
	expect(t, Simulate(g, 2, fixed(10*ms), time.Second),
		"0s t0 invoke a 0",
		"0s t1 invoke a 1",
		"10ms t0 complete a 0",
		"10ms t1 complete a 1",
		"100ms t0 invoke b 0",
		"110ms t0 complete b 0",
		"200ms t1 invoke b 1",
		"210ms t1 complete b 1")
	// Beside a nemesis, the nemesis gets no copy.
	if evs := Simulate(EachThread(func(int) Generator { return Once(F("a", nil)) }), 0, fixed(ms), time.Second); len(evs) != 0 {
		t.Errorf("no client threads: %v", evs)
	}
}

func TestReserve(t *testing.T) {
	g := Reserve([]Reserved{{1, Repeat(F("w", nil))}, {2, Repeat(F("r", nil))}}, Repeat(F("x", nil)))
	expect(t, Simulate(g, 4, fixed(10*ms), 5*ms),
		"0s t0 invoke w <nil>",
		"0s t1 invoke r <nil>",
		"0s t2 invoke r <nil>",
		"0s t3 invoke x <nil>")
	// Too few threads: the last group and rest get none.
	expect(t, Simulate(g, 2, fixed(10*ms), 5*ms),
		"0s t0 invoke w <nil>",
		"0s t1 invoke r <nil>")
	// It ends when every group with threads has; the threadless one (r)
	// does not hold it up, so what follows runs.
	g = Reserve([]Reserved{{2, Once(F("w", nil))}, {1, Repeat(F("r", nil))}}, nil)
	expect(t, Simulate(Seq(g, Once(F("after", nil))), 2, fixed(10*ms), time.Minute),
		"0s t0 invoke w <nil>",
		"0s t1 invoke after <nil>",
		"10ms t0 complete w <nil>",
		"10ms t1 complete after <nil>")
}

func TestCycle(t *testing.T) {
	var fs []string
	for _, e := range invokes(Simulate(Cycle(RepeatN(2, F("a", nil)), Once(F("b", nil))), 1, fixed(ms), 10*ms), "") {
		fs = append(fs, e.F)
	}
	// Each pass restarts the original RepeatN.
	if got, want := strings.Join(fs, ""), "aabaabaabaa"; got != want {
		t.Errorf("Cycle ran %s, want %s", got, want)
	}
	// A pass that hands out nothing ends the cycle.
	if evs := Simulate(Cycle(Limit(0, Repeat(F("a", nil))), Sleep(0)), 1, fixed(ms), time.Second); len(evs) != 0 {
		t.Errorf("empty cycle: %v", evs)
	}
}

func TestFlipFlop(t *testing.T) {
	var fs []string
	for _, e := range invokes(Simulate(FlipFlop(Repeat(F("a", nil)), Repeat(F("b", nil))), 2, fixed(ms), 2*ms), "") {
		fs = append(fs, e.F)
	}
	if got, want := strings.Join(fs, ""), "ababab"; got != want {
		t.Errorf("FlipFlop ran %s, want %s", got, want)
	}
	// It ends when the one whose turn it is is exhausted.
	expect(t, Simulate(FlipFlop(Once(F("a", nil)), Repeat(F("b", nil))), 1, fixed(ms), time.Second),
		"0s t0 invoke a <nil>",
		"1ms t0 complete a <nil>",
		"1ms t0 invoke b <nil>",
		"2ms t0 complete b <nil>")
}

func TestClientsAndNemesis(t *testing.T) {
	// F inside Nemesis goes to the nemesis thread.
	g := Any(Clients(Repeat(F("c", nil))), Nemesis(Repeat(F("n", nil))))
	expect(t, Simulate(g, 2, fixed(10*ms), 5*ms),
		"0s t0 invoke c <nil>",
		"0s t1 invoke c <nil>",
		"0s nemesis invoke n <nil>")
	// A nemesis inside Clients has no thread.
	if evs := Simulate(Clients(Nemesis(Once(F("n", nil)))), 2, fixed(ms), time.Second); len(evs) != 0 {
		t.Errorf("Nemesis in Clients: %v", evs)
	}
}

// echo hands out ops whose value is the number of events it has heard, to
// test which events routers pass on.
type echo struct{ heard int }

func (e *echo) Next(ctx Context) (Op, Generator, Status) {
	op, ok := assign(ctx, F("echo", e.heard))
	if !ok {
		return pending(0, e)
	}
	return op, e, Ready
}

func (e *echo) Update(_ Context, _ Event) Generator { return &echo{heard: e.heard + 1} }

func TestRoutersFilterEvents(t *testing.T) {
	// An echo hears its own threads' invokes and completions only: 2 events
	// per op, whatever the nemesis beside it and the other threads do.
	values := func(g Generator, threads int) string {
		var got []string
		for _, e := range invokes(Simulate(g, threads, fixed(10*ms), 25*ms), "echo") {
			got = append(got, fmt.Sprint(e.Thread, ":", e.Value))
		}
		return strings.Join(got, " ")
	}
	nemesis := Nemesis(Repeat(F("n", nil)))
	if got, want := values(Any(nemesis, Clients(&echo{})), 1), "0:0 0:2 0:4"; got != want {
		t.Errorf("Clients: echo values %s, want %s", got, want)
	}
	if got, want := values(Any(Clients(Repeat(F("c", nil))), Nemesis(&echo{})), 2), "-1:0 -1:2 -1:4"; got != want {
		t.Errorf("Nemesis: echo values %s, want %s", got, want)
	}
	each := EachThread(func(int) Generator { return &echo{} })
	if got, want := values(Any(nemesis, each), 2), "0:0 1:0 0:2 1:2 0:4 1:4"; got != want {
		t.Errorf("EachThread: echo values %s, want %s", got, want)
	}
	res := Reserve([]Reserved{{1, &echo{}}}, Repeat(F("c", nil)))
	if got, want := values(Any(nemesis, res), 2), "0:0 0:2 0:4"; got != want {
		t.Errorf("Reserve: echo values %s, want %s", got, want)
	}
}

func TestAnySoonest(t *testing.T) {
	// b is due first, so it takes the only thread; a waits for it.
	g := Any(Once(Op{F: "a", Time: 5 * ms}), Once(Op{F: "b", Time: 2 * ms}))
	expect(t, Simulate(g, 1, fixed(ms), time.Second),
		"2ms t0 invoke b <nil>",
		"3ms t0 complete b <nil>",
		"5ms t0 invoke a <nil>",
		"6ms t0 complete a <nil>")
}

func TestNemesisScheduleBesideClients(t *testing.T) {
	const s = time.Second
	g := TimeLimit(10*s, Any(
		Clients(Stagger(3, s, Repeat(F("read", nil)))),
		Nemesis(Cycle(
			Once(NemesisOp("start", nil)), Sleep(2*s),
			Once(NemesisOp("stop", nil)), Sleep(3*s))),
	))
	evs := Simulate(g, 2, fixed(100*ms), time.Minute)
	var nem []string
	for _, e := range evs {
		if e.Thread == NemesisThread {
			nem = append(nem, e.String())
		}
	}
	// The schedule is start-to-start: 100ms ops do not shift it. The start
	// due at 10s is past the limit.
	want := []string{
		"0s nemesis invoke start <nil>",
		"100ms nemesis complete start <nil>",
		"2s nemesis invoke stop <nil>",
		"2.1s nemesis complete stop <nil>",
		"5s nemesis invoke start <nil>",
		"5.1s nemesis complete start <nil>",
		"7s nemesis invoke stop <nil>",
		"7.1s nemesis complete stop <nil>",
	}
	if !slices.Equal(nem, want) {
		t.Errorf("nemesis events:\n\t%s\nwant:\n\t%s", strings.Join(nem, "\n\t"), strings.Join(want, "\n\t"))
	}
	reads := invokes(evs, "read")
	if len(reads) != 11 {
		t.Errorf("%d reads, want 11 (seed 3)", len(reads))
	}
	for i, e := range reads {
		if e.Time >= 10*s {
			t.Errorf("read invoked at %v, after the limit", e.Time)
		}
		if i > 0 && e.Time-reads[i-1].Time >= 2*s {
			t.Errorf("reads %v apart, more than 2·dt", e.Time-reads[i-1].Time)
		}
	}
	if last := evs[len(evs)-1]; last.Time != 9611405695*time.Nanosecond {
		t.Errorf("last event %v, want the last read's completion at 9.611405695s", last)
	}
}
