package linear

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tableSpec is a random specification: each operation is a partial function
// from states to states, given as a table (-1: impossible). Neutral
// operations map every state they accept to itself.
type tableSpec struct {
	init    State
	table   [][]int // op → state → next
	neutral []bool
}

func (s *tableSpec) Init() State { return s.init }

func (s *tableSpec) Step(st State, op int) (State, bool) {
	n := s.table[op][st]
	if n < 0 {
		return st, false
	}
	return State(n), true
}

func (s *tableSpec) Neutral(op int) bool { return s.neutral[op] }

// bruteForce decides linearizability by trying every order that real time
// allows, each pending operation either somewhere after its call or never.
func bruteForce(ops []Op, spec Spec) bool {
	n := len(ops)
	done := make([]bool, n)
	skipped := make([]bool, n)
	var try func(st State, left int) bool
	try = func(st State, left int) bool {
		if left == 0 {
			return true
		}
		for i := range n {
			if done[i] || skipped[i] {
				continue
			}
			// i may go next only if no unplaced op returned before i was
			// called.
			ok := true
			for j := range n {
				if j != i && !done[j] && !skipped[j] && !ops[j].Pending() && ops[j].Return < ops[i].Call {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			if next, possible := spec.Step(st, i); possible {
				done[i] = true
				if try(next, left-1) {
					return true
				}
				done[i] = false
			}
			if ops[i].Pending() {
				skipped[i] = true
				if try(st, left-1) {
					return true
				}
				skipped[i] = false
			}
		}
		return false
	}
	return try(spec.Init(), n)
}

// randomHistory makes n operations with random overlapping intervals; some
// are pending.
func randomHistory(r *rand.Rand, n int) []Op {
	type ev struct{ op, kind int }
	// Lay out events in an order where each call precedes its return.
	var open []int
	var events []ev
	started := 0
	for started < n || len(open) > 0 {
		if started < n && (len(open) == 0 || r.IntN(2) == 0) {
			events = append(events, ev{started, 0})
			open = append(open, started)
			started++
			continue
		}
		k := r.IntN(len(open))
		events = append(events, ev{open[k], 1})
		open = append(open[:k], open[k+1:]...)
	}
	ops := make([]Op, n)
	for pos, e := range events {
		if e.kind == 0 {
			ops[e.op].Call = pos
		} else {
			ops[e.op].Return = pos
		}
	}
	for i := range ops {
		ops[i].ID = i
		if r.IntN(5) == 0 {
			ops[i].Return = -1
		}
	}
	return ops
}

func randomSpec(r *rand.Rand, n, states int) *tableSpec {
	s := &tableSpec{init: State(r.IntN(states)), table: make([][]int, n), neutral: make([]bool, n)}
	for i := range n {
		s.table[i] = make([]int, states)
		s.neutral[i] = r.IntN(3) == 0
		for st := range states {
			switch {
			case r.IntN(3) == 0:
				s.table[i][st] = -1
			case s.neutral[i]:
				s.table[i][st] = st
			default:
				s.table[i][st] = r.IntN(states)
			}
		}
	}
	return s
}

// The search, with its reductions (eager neutral operations, dropped
// pending neutral ones, memoization), agrees with brute force.
func TestAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	counts := map[bool]int{}
	for round := range 4000 {
		n := 1 + r.IntN(7)
		ops := randomHistory(r, n)
		spec := randomSpec(r, n, 1+r.IntN(4))
		want := bruteForce(ops, spec)
		res, err := Check(context.Background(), []Partition{{Ops: ops, Spec: spec}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Valid == True
		if res.Valid == Unknown || got != want {
			t.Fatalf("round %d: checker says %v, brute force %v\nops %+v\nspec %+v", round, res.Valid, want, ops, spec)
		}
		counts[want]++
		p := res.Partitions[0]
		if want {
			// The linearization it returns really is one.
			if !isLinearization(ops, spec, p.Linearization) {
				t.Fatalf("round %d: %v is not a linearization of %+v", round, p.Linearization, ops)
			}
		} else if len(Replay(spec, p.Prefix)) != len(p.Prefix) {
			t.Fatalf("round %d: prefix %v does not replay", round, p.Prefix)
		}
	}
	if counts[true] < 500 || counts[false] < 500 {
		t.Fatalf("random histories are lopsided: %v", counts)
	}
}

// isLinearization checks an order: every completed op once, pending ops at
// most once, real time respected, every step possible.
func isLinearization(ops []Op, spec Spec, order []int) bool {
	seen := map[int]bool{}
	for k, i := range order {
		if seen[i] {
			return false
		}
		seen[i] = true
		for _, j := range order[k+1:] {
			if !ops[j].Pending() && ops[j].Return < ops[i].Call {
				return false
			}
		}
	}
	for i, o := range ops {
		if !o.Pending() && !seen[i] {
			return false
		}
	}
	return len(Replay(spec, order)) == len(order)
}

// register is a tiny register spec for hand-written cases: ops are "w3"
// (write 3) or "r3" (read 3).
type register []string

func (register) Init() State { return 0 }

func (r register) Step(s State, op int) (State, bool) {
	v, _ := strconv.Atoi(r[op][1:])
	if r[op][0] == 'w' {
		return State(v), true
	}
	return s, s == State(v)
}

func (r register) Neutral(op int) bool { return r[op][0] == 'r' }

func (register) DescribeState(s State) string { return strconv.FormatUint(s, 10) }

func (r register) DescribeOp(op int) string { return r[op] }

func TestFailureReport(t *testing.T) {
	// w1 completes; then r2 and w2 overlap; then r1 is invoked after both
	// complete: nothing lets r1 see 1 after w2 wrote 2.
	ops := []Op{{0, 1, 0}, {2, 4, 1}, {3, 5, 2}, {6, 7, 3}}
	spec := register{"w1", "r2", "w2", "r1"}
	res, err := Check(context.Background(), []Partition{{Label: "x", Ops: ops, Spec: spec}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Partitions[0]
	if res.Valid != False || p.Valid != False || p.Failed != 3 {
		t.Fatalf("got %v, failed op %d; want false, op 3", res.Valid, p.Failed)
	}
	if got := strings.Join(describe(spec, p.Prefix), " "); got != "w1 w2 r2" {
		t.Fatalf("prefix %q, want \"w1 w2 r2\"", got)
	}
	if res.FirstFailure() != 0 || p.Label != "x" || p.Ops != 4 {
		t.Fatalf("result %+v", res)
	}
}

func describe(spec Spec, order []int) []string {
	var out []string
	for _, s := range Replay(spec, order) {
		out = append(out, OpString(spec, s.Op))
	}
	return out
}

func TestPendingMayNeverHappen(t *testing.T) {
	// A write that crashed may never take effect: r0 after it is fine, and
	// so is r5 after it.
	for _, read := range []string{"r0", "r5"} {
		ops := []Op{{0, -1, 0}, {1, 2, 1}}
		res, _ := Check(context.Background(), []Partition{{Ops: ops, Spec: register{"w5", read}}}, Options{})
		if res.Valid != True {
			t.Errorf("crashed w5 then %s: %v", read, res.Valid)
		}
	}
	// But it cannot take effect before it was invoked.
	ops := []Op{{1, -1, 0}, {0, 2, 1}, {3, 4, 2}}
	res, _ := Check(context.Background(), []Partition{{Ops: ops, Spec: register{"w5", "r5", "r0"}}}, Options{})
	if res.Valid != False {
		t.Errorf("r5 then r0 around a crashed w5: %v, want false", res.Valid)
	}
}

// hardPartition cannot be refuted quickly: k concurrent writes of distinct
// values, then a read of a value nobody wrote. The search must visit every
// subset of writes with every last writer before giving up.
func hardPartition(k int) Partition {
	var ops []Op
	var spec register
	for i := range k {
		ops = append(ops, Op{Call: i, Return: k + i, ID: i})
		spec = append(spec, "w"+strconv.Itoa(i+1))
	}
	ops = append(ops, Op{Call: 2 * k, Return: 2*k + 1, ID: k})
	spec = append(spec, "r999")
	return Partition{Label: "hard", Ops: ops, Spec: spec}
}

// blockingSpec's Step never returns until released.
type blockingSpec struct{ release chan struct{} }

func (blockingSpec) Init() State { return 0 }
func (b blockingSpec) Step(s State, op int) (State, bool) {
	<-b.release
	return s, true
}

func TestDeadlineInterruptsASlowStep(t *testing.T) {
	spec := blockingSpec{release: make(chan struct{})}
	defer close(spec.release)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// Check must come back while the step is still blocked.
	res, err := Check(ctx, []Partition{{Ops: []Op{{0, 1, 0}}, Spec: spec}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != Unknown || res.Reason != ReasonTimeout || res.Partitions[0].Reason != ReasonTimeout {
		t.Fatalf("got %v (%q, %q), want unknown: timeout", res.Valid, res.Reason, res.Partitions[0].Reason)
	}
}

func TestTimeoutIsUnknown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := Check(ctx, []Partition{hardPartition(40)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != Unknown || res.Reason != ReasonTimeout {
		t.Fatalf("got %v (%s), want unknown: timeout", res.Valid, res.Reason)
	}
}

func TestMemoryBoundIsUnknown(t *testing.T) {
	res, err := Check(context.Background(), []Partition{hardPartition(40)}, Options{MaxMemory: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != Unknown || res.Reason != ReasonMemory || res.Partitions[0].Reason != ReasonMemory {
		t.Fatalf("got %v (%s), want unknown: memory bound", res.Valid, res.Reason)
	}
}

// A partition whose search explodes does not hide another that fails at
// once, even checked by one worker with the hard one first; and the first
// failure stops the rest.
func TestFailureStopsOtherPartitions(t *testing.T) {
	bad := Partition{Label: "bad", Ops: []Op{{0, 1, 0}}, Spec: register{"r7"}}
	for _, workers := range []int{1, 2} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		res, err := Check(ctx, []Partition{hardPartition(60), hardPartition(61), bad}, Options{Workers: workers})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid != False || res.Partitions[2].Valid != False {
			t.Fatalf("workers %d: got %v", workers, res.Valid)
		}
		for _, p := range res.Partitions[:2] {
			if p.Valid != Unknown || p.Reason != ReasonCancelled {
				t.Fatalf("workers %d: hard partition %+v", workers, p)
			}
		}
	}
}

func TestPartitionsCombine(t *testing.T) {
	good := Partition{Ops: []Op{{0, 1, 0}, {2, 3, 1}}, Spec: register{"w1", "r1"}}
	res, err := Check(context.Background(), []Partition{good, good, good}, Options{Workers: 2})
	if err != nil || res.Valid != True {
		t.Fatalf("three valid partitions: %v %v", res.Valid, err)
	}
	for _, p := range res.Partitions {
		if p.Valid != True || len(p.Linearization) != 2 {
			t.Fatalf("partition %+v", p)
		}
	}
	res, _ = Check(context.Background(), nil, Options{})
	if res.Valid != True {
		t.Fatalf("no partitions: %v", res.Valid)
	}
	// Many partitions through the goroutine path (more ops than are
	// checked inline), under the race detector in CI.
	var many []Partition
	for range 200 {
		many = append(many, Partition{Ops: []Op{{0, 1, 0}, {2, 3, 1}, {4, 5, 2}}, Spec: register{"w1", "r1", "w2"}})
	}
	many[150] = Partition{Ops: []Op{{0, 1, 0}, {2, 3, 1}}, Spec: register{"w1", "r2"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, _ = Check(ctx, many, Options{})
	if res.Valid != False || res.FirstFailure() != 150 {
		t.Fatalf("200 partitions with one bad: %v, first failure %d", res.Valid, res.FirstFailure())
	}
}

func TestInvalidInput(t *testing.T) {
	_, err := Check(context.Background(), []Partition{{Ops: []Op{{5, 5, 0}}, Spec: register{"r0"}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "return position 5 is not after call position 5") {
		t.Fatalf("got %v", err)
	}
	_, err = Check(context.Background(), []Partition{{Label: "k", Ops: []Op{{0, 1, 0}}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), `partition 0 ("k") has no spec`) {
		t.Fatalf("got %v", err)
	}
}

func TestVerdict(t *testing.T) {
	if Combine(True, Unknown, True) != Unknown || Combine(Unknown, False) != False || Combine() != True {
		t.Fatal("Combine: false beats unknown beats true")
	}
	for _, v := range []Verdict{True, False, Unknown} {
		b, _ := v.MarshalJSON()
		var back Verdict
		if err := back.UnmarshalJSON(b); err != nil || back != v {
			t.Fatalf("%v → %s → %v (%v)", v, b, back, err)
		}
	}
	if b, _ := Unknown.MarshalJSON(); string(b) != `"unknown"` {
		t.Fatalf("unknown marshals as %s", b)
	}
}

// lossyRegister is nondeterministic: a write may be lost.
type lossyRegister []string

func (lossyRegister) InitStates() []State { return []State{0} }

func (r lossyRegister) Steps(s State, op int, dst []State) []State {
	v, _ := strconv.Atoi(r[op][1:])
	if r[op][0] == 'w' {
		return append(dst, State(v), s)
	}
	if s == State(v) {
		return append(dst, s)
	}
	return dst
}

func TestDeterminize(t *testing.T) {
	// w1 then r0 is impossible for a register but fine when writes may be
	// lost; r2 never is.
	ops := []Op{{0, 1, 0}, {2, 3, 1}}
	for _, c := range []struct {
		read string
		want Verdict
	}{{"r0", True}, {"r1", True}, {"r2", False}} {
		spec := Determinize(lossyRegister{"w1", c.read})
		res, _ := Check(context.Background(), []Partition{{Ops: ops, Spec: spec}}, Options{})
		if res.Valid != c.want {
			t.Errorf("w1 then %s: %v, want %v", c.read, res.Valid, c.want)
		}
	}
	spec := Determinize(lossyRegister{"w1", "r1"})
	s1, _ := spec.Step(spec.Init(), 0)
	if got := StateString(spec, s1); got != "one of {state 0, state 1}" {
		t.Errorf("state after a lossy write: %q", got)
	}
}

// The search is safe to run in parallel on distinct partitions.
func TestConcurrentChecks(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 200 {
				ops := randomHistory(r, 6)
				spec := randomSpec(r, 6, 3)
				res, _ := Check(context.Background(), []Partition{{Ops: ops, Spec: spec}}, Options{})
				if (res.Valid == True) != bruteForce(ops, spec) {
					t.Error("disagrees with brute force")
				}
			}
		})
	}
	wg.Wait()
}

// productSpec is a random Keyed spec: each key has its own small random
// table spec, and the state is the tuple of the keys' states, in base
// `states` digits.
type productSpec struct {
	states int
	keys   []int        // op → key
	per    []*tableSpec // key → its spec, over all ops (only its own ops used)
	nkeys  int
}

func (p *productSpec) digit(s State, k int) int {
	for range k {
		s /= State(p.states)
	}
	return int(s % State(p.states))
}

func (p *productSpec) Init() State {
	var s State
	for k := p.nkeys - 1; k >= 0; k-- {
		s = s*State(p.states) + p.per[k].init
	}
	return s
}

func (p *productSpec) Step(s State, op int) (State, bool) {
	k := p.keys[op]
	d := p.digit(s, k)
	n := p.per[k].table[op][d]
	if n < 0 {
		return s, false
	}
	mult := State(1)
	for range k {
		mult *= State(p.states)
	}
	return s - State(d)*mult + State(n)*mult, true
}

func (p *productSpec) Neutral(op int) bool        { return p.per[p.keys[op]].neutral[op] }
func (p *productSpec) Key(op int) int             { return p.keys[op] }
func (p *productSpec) Part(s State, k int) uint64 { return uint64(p.digit(s, k)) }

// The search on a Keyed spec (partial-order reduction, nogoods,
// backjumping) agrees with brute force on the whole state.
func TestKeyedAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	counts := map[bool]int{}
	for round := range 4000 {
		n := 1 + r.IntN(8)
		ops := randomHistory(r, n)
		states := 1 + r.IntN(3)
		p := &productSpec{states: states, nkeys: 1 + r.IntN(3)}
		for range p.nkeys {
			p.per = append(p.per, randomSpec(r, n, states))
		}
		for range n {
			p.keys = append(p.keys, r.IntN(p.nkeys))
		}
		want := bruteForce(ops, p)
		res, err := Check(context.Background(), []Partition{{Ops: ops, Spec: p}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid == Unknown || (res.Valid == True) != want {
			t.Fatalf("round %d: checker says %v, brute force %v\nops %+v\nkeys %v", round, res.Valid, want, ops, p.keys)
		}
		if want && !isLinearization(ops, p, res.Partitions[0].Linearization) {
			t.Fatalf("round %d: %v is not a linearization", round, res.Partitions[0].Linearization)
		}
		counts[want]++
	}
	if counts[true] < 500 || counts[false] < 500 {
		t.Fatalf("lopsided: %v", counts)
	}
}
