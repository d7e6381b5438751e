package gen

import (
	"testing"
	"time"
)

// testGenerator is a realistic test: a mix of three client ops, staggered
// to 20,000 ops/s, beside a nemesis cycle, all under a time limit.
func testGenerator(seed uint64) Generator {
	read, write := F("read", nil), F("write", 1)
	cas := Fn(seed, func(_ Context, r *Rand) Op { return F("cas", [2]int{r.IntN(5), r.IntN(5)}) })
	return TimeLimit(24*time.Hour, Any(
		Clients(Stagger(seed, 50*time.Microsecond, Mix(seed, Repeat(read), Repeat(write), cas))),
		Nemesis(Cycle(
			Sleep(5*time.Second), Once(NemesisOp("start", nil)),
			Sleep(5*time.Second), Once(NemesisOp("stop", nil)))),
	))
}

// BenchmarkNext measures the generator's share of each op: every Next and
// Update the protocol makes for it (a Ready ask, the asks that find nothing,
// the invoke and completion events), driven by the simulator with 10
// threads and 1ms latency. ns/op is per op handed out. The harness needs
// 20,000 ops/s end to end, so this must stay far below 50µs.
func BenchmarkNext(b *testing.B) {
	g := testGenerator(1)
	b.ReportAllocs()
	b.ResetTimer()
	invoked := 0
	count := func(ev Event) {
		if ev.Kind == Invoked {
			invoked++
		}
	}
	if err := simulate(g, 10, fixed(time.Millisecond), 24*time.Hour, b.N, count); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if invoked != b.N {
		b.Fatalf("%d ops invoked, want %d", invoked, b.N)
	}
}
