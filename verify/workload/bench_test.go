package workload

import (
	"math/rand/v2"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// syntheticSetFull builds a set-full history of n operations from 10
// processes: adds of distinct integers, and every readEvery-th operation a
// read returning every element acknowledged before the read began. The
// reads share one backing list, so the history is small in memory while
// the checker still sees every read in full.
func syntheticSetFull(n, readEvery int) *history.History {
	const procs = 10
	rng := rand.New(rand.NewPCG(1, 2))
	type open struct {
		f    string
		val  int64
		seen int // acknowledged elements when the read began
	}
	var events []history.Event
	var acked []history.Value
	busy := map[int]open{}
	started, next := 0, int64(0)
	for started < n || len(busy) > 0 {
		p := rng.IntN(procs)
		o, ok := busy[p]
		switch {
		case !ok && started < n && started%readEvery == readEvery-1:
			busy[p] = open{f: "read", seen: len(acked)}
			events = append(events, history.Event{Process: history.Process(p), Type: history.Invoke, F: "read"})
			started++
		case !ok && started < n:
			busy[p] = open{f: "add", val: next}
			events = append(events, history.Event{Process: history.Process(p), Type: history.Invoke, F: "add", Value: next})
			next++
			started++
		case ok && o.f == "read":
			events = append(events, history.Event{Process: history.Process(p), Type: history.OK, F: "read", Value: acked[:o.seen:o.seen]})
			delete(busy, p)
		case ok:
			acked = append(acked, o.val)
			events = append(events, history.Event{Process: history.Process(p), Type: history.OK, F: "add", Value: o.val})
			delete(busy, p)
		}
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	return &history.History{Format: history.JSONL, Events: events}
}

// BenchmarkSetFull checks a 100k-operation set-full history with a read
// every 200 operations (500 reads of up to 99.5k elements, about 25M
// element visits); it reports operations and read elements per second.
func BenchmarkSetFull(b *testing.B) {
	h := syntheticSetFull(100_000, 200)
	visits := 0
	for _, e := range h.Events {
		if e.F == "read" && e.Type == history.OK {
			visits += len(e.Value.([]history.Value))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := Check(SetFull, h, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Valid != linear.True || r.Ops != 100_000 {
			b.Fatalf("%s", r.Summary())
		}
	}
	b.ReportMetric(float64(100_000*b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(visits*b.N)/b.Elapsed().Seconds(), "elements/s")
}

// The synthetic history is what the benchmark says it is, and valid.
func TestSyntheticSetFull(t *testing.T) {
	h := syntheticSetFull(2_000, 20)
	r, err := Check(SetFull, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantVerdict(t, r, linear.True)
	if r.Ops != 2_000 || r.Fields["read_count"] != 100 || r.Fields["attempt_count"] != 1_900 {
		t.Fatalf("%d ops, fields %v", r.Ops, r.Fields["read_count"])
	}
}
