package linear

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Verdict is a checker's answer: true, false or unknown.
type Verdict int8

// Verdicts. Unknown is the zero value so that a result nobody filled in
// never reads as valid.
const (
	Unknown Verdict = iota
	True
	False
)

// String returns "true", "false" or "unknown".
func (v Verdict) String() string {
	switch v {
	case True:
		return "true"
	case False:
		return "false"
	}
	return "unknown"
}

// MarshalJSON writes true, false or "unknown".
func (v Verdict) MarshalJSON() ([]byte, error) {
	switch v {
	case True:
		return []byte("true"), nil
	case False:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON reads true, false or "unknown".
func (v *Verdict) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = True
	case "false":
		*v = False
	case `"unknown"`:
		*v = Unknown
	default:
		return fmt.Errorf("verdict must be true, false or \"unknown\", not %s", b)
	}
	return nil
}

// Combine folds verdicts: false beats unknown beats true.
func Combine(vs ...Verdict) Verdict {
	out := True
	for _, v := range vs {
		switch {
		case v == False:
			return False
		case v == Unknown:
			out = Unknown
		}
	}
	return out
}

// Options bound a check.
type Options struct {
	// MaxMemory bounds the bytes the searches may hold for visited
	// configurations, summed over partitions; 0 means DefaultMaxMemory.
	MaxMemory int64
	// Workers is how many partitions are searched at once; 0 means
	// GOMAXPROCS.
	Workers int
}

// DefaultMaxMemory is the memory bound when Options gives none.
const DefaultMaxMemory = 4 << 30

// Why an answer is unknown.
const (
	ReasonTimeout   = "timeout"
	ReasonMemory    = "memory bound"
	ReasonCancelled = "not checked: another partition failed first"
)

// PartitionResult is the answer for one partition.
type PartitionResult struct {
	Label string
	Valid Verdict
	// Reason says why Valid is Unknown.
	Reason string
	// Ops is the number of operations in the partition.
	Ops int
	// Visited is the number of configurations the search visited.
	Visited int
	// Linearization is a complete linearization when Valid is True, in
	// partition operation indices; pending operations that never took effect
	// are absent.
	Linearization []int
	// When Valid is False: Failed is the operation no linearization gets past
	// (the one whose completion comes latest among the points where the
	// search was stopped), and Prefix the longest linearizable prefix that
	// reached it. Failed is -1 otherwise.
	Failed int
	Prefix []int
}

// Result is the answer for a whole history.
type Result struct {
	Valid Verdict
	// Reason says why Valid is Unknown.
	Reason     string
	Partitions []PartitionResult
}

// FirstFailure returns the index of the first partition whose verdict is
// False, or -1.
func (r *Result) FirstFailure() int {
	for i, p := range r.Partitions {
		if p.Valid == False {
			return i
		}
	}
	return -1
}

// validate checks that every operation completes after it starts.
func validate(parts []Partition) error {
	for pi, p := range parts {
		if p.Spec == nil {
			return fmt.Errorf("partition %d (%q) has no spec", pi, p.Label)
		}
		for i, o := range p.Ops {
			if o.Call < 0 || (o.Return >= 0 && o.Return <= o.Call) {
				return fmt.Errorf("partition %d (%q) operation %d: return position %d is not after call position %d", pi, p.Label, i, o.Return, o.Call)
			}
		}
	}
	return nil
}

// Check decides whether every partition is linearizable. It returns when the
// answer is known or ctx is done, whichever is first: a model step that never
// returns cannot hold it past its deadline (the search goroutine then stops
// at its next step). The first partition found not linearizable stops the
// others.
//
// Partitions are searched in turns of a bounded number of steps, round robin,
// so that one partition whose search explodes cannot hide another that fails
// at once: the verdict false arrives as soon as any partition is refuted.
func Check(ctx context.Context, parts []Partition, opt Options) (Result, error) {
	if err := validate(parts); err != nil {
		return Result{}, err
	}
	res := Result{Partitions: make([]PartitionResult, len(parts))}
	for i, p := range parts {
		res.Partitions[i] = PartitionResult{Label: p.Label, Ops: len(p.Ops), Failed: -1, Reason: ReasonCancelled}
	}
	if len(parts) == 0 {
		res.Valid = True
		return res, nil
	}
	limit := opt.MaxMemory
	if limit == 0 {
		limit = DefaultMaxMemory
	}
	sch := &scheduler{parts: parts, budget: &budget{limit: limit}}
	// Largest first, so that a long partition does not start last.
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(parts[b].Ops), len(parts[a].Ops)) })
	for _, i := range order {
		sch.queue = append(sch.queue, &task{i: i})
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(parts))

	if ctx.Done() == nil {
		// Nothing can interrupt the search, so this goroutine takes turns
		// itself. Helpers start only once the check has run long enough to
		// pay for waking them: most histories are done before that.
		var wg sync.WaitGroup
		start := time.Now()
		sch.afterTurn = func() {
			if workers > 1 && time.Since(start) > helpAfter {
				sch.afterTurn = nil
				for range workers - 1 {
					wg.Go(sch.work)
				}
			}
		}
		sch.work()
		wg.Wait()
		res.Partitions = sch.collect(res.Partitions)
		return finish(ctx, res, sch.budget), nil
	}

	if ctx.Err() != nil {
		// Done before the search began: nothing is searched and the
		// answer is unknown, as a Go function handed a done context does
		// no work — not whichever of a small search and the cancellation
		// won the race (the verdict of a pre-cancelled check of 4 ops
		// came out either way, 7 runs in 300 under -race).
		sch.stop.Store(true)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(sch.work)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		sch.stop.Store(true)
	}
	res.Partitions = sch.collect(res.Partitions)
	res = finish(ctx, res, sch.budget)
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, nil
}

// quantum is how many steps a partition's search takes in one turn.
const quantum = 1 << 15

// task is a partition's search between turns.
type task struct {
	i int
	s *search
}

// scheduler hands out turns to the partitions' searches.
type scheduler struct {
	parts  []Partition
	budget *budget
	stop   atomic.Bool

	mu      sync.Mutex
	queue   []*task
	results []indexed
	// afterTurn, when set, is called by the caller's own work loop after
	// each turn (only that goroutine reads or clears it).
	afterTurn func()
}

type indexed struct {
	i int
	r PartitionResult
}

// work takes turns until no partition is left or the check is stopped.
func (sc *scheduler) work() {
	hook := sc.afterTurn
	for !sc.stop.Load() {
		if hook != nil {
			hook()
			hook = sc.afterTurn
		}
		sc.mu.Lock()
		if len(sc.queue) == 0 {
			sc.mu.Unlock()
			return
		}
		t := sc.queue[0]
		sc.queue = sc.queue[1:]
		sc.mu.Unlock()

		if t.s == nil {
			t.s = newSearch(&sc.parts[t.i], sc.budget, &sc.stop)
		}
		out := t.s.run(quantum)
		sc.mu.Lock()
		if out == paused {
			sc.queue = append(sc.queue, t)
		} else {
			sc.results = append(sc.results, indexed{t.i, t.s.result(out)})
			t.s.seen.free()
			if out == refuted {
				sc.stop.Store(true)
			}
		}
		sc.mu.Unlock()
	}
}

// collect copies the finished partitions' results into rs. It may run while
// workers stopped by a deadline are still finishing their turns; what they
// finish after this is not reported.
func (sc *scheduler) collect(rs []PartitionResult) []PartitionResult {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, d := range sc.results {
		rs[d.i] = d.r
	}
	return rs
}

// helpAfter is how long a check that nothing can cancel runs in the
// caller's goroutine alone before helpers join it.
const helpAfter = 2 * time.Millisecond

// finish combines the partitions' verdicts and says why any is unknown.
func finish(ctx context.Context, res Result, b *budget) Result {
	verdicts := make([]Verdict, len(res.Partitions))
	for i, p := range res.Partitions {
		verdicts[i] = p.Valid
	}
	res.Valid = Combine(verdicts...)
	for i := range res.Partitions {
		p := &res.Partitions[i]
		if p.Valid != Unknown || p.Reason == ReasonMemory {
			continue
		}
		switch {
		case ctx.Err() != nil:
			p.Reason = ReasonTimeout
		case res.Valid == False:
			p.Reason = ReasonCancelled
		case b.over.Load():
			p.Reason = ReasonMemory
		}
	}
	if res.Valid == Unknown {
		for _, p := range res.Partitions {
			if p.Valid == Unknown {
				res.Reason = p.Reason
				break
			}
		}
	}
	return res
}

// result turns a final outcome into the partition's result.
func (s *search) result(out outcome) PartitionResult {
	r := PartitionResult{Label: s.label, Ops: s.ops, Failed: -1, Visited: s.seen.n}
	switch out {
	case found:
		r.Valid = True
		r.Linearization = s.linearization()
	case refuted:
		r.Valid = False
		if s.failed >= 0 {
			r.Failed = int(s.orig[s.failed])
		}
		r.Prefix = s.prefix()
	case stopped:
		// Check says why: the deadline, or another partition's failure.
	case tooBig:
		r.Reason = ReasonMemory
	}
	return r
}
