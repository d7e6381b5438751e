package gen_test

import (
	"fmt"
	"time"

	"github.com/ipfence/ipfence/verify/gen"
)

// A test's schedule: writes then reads on two client threads, a partition
// that starts after 15ms and heals 20ms later, all cut at 50ms; then, once
// everything has completed, a final read.
func ExampleSimulate() {
	ms := time.Millisecond
	g := gen.Phases(
		gen.TimeLimit(50*ms, gen.Any(
			gen.Clients(gen.Delay(10*ms, gen.FlipFlop(
				gen.Repeat(gen.F("write", 1)),
				gen.Repeat(gen.F("read", nil))))),
			gen.Nemesis(gen.Seq(
				gen.Sleep(15*ms), gen.Once(gen.NemesisOp("partition", "halves")),
				gen.Sleep(20*ms), gen.Once(gen.NemesisOp("heal", nil)))),
		)),
		gen.Clients(gen.Once(gen.F("read", "final"))),
	)
	latency := func(op gen.Op) time.Duration { return 3 * ms }
	for _, ev := range gen.Simulate(g, 2, latency, time.Second) {
		if ev.Kind == gen.Invoked {
			fmt.Println(ev)
		}
	}
	// Output:
	// 0s t0 invoke write 1
	// 10ms t1 invoke read <nil>
	// 15ms nemesis invoke partition halves
	// 20ms t0 invoke write 1
	// 30ms t1 invoke read <nil>
	// 35ms nemesis invoke heal <nil>
	// 40ms t0 invoke write 1
	// 50ms t0 invoke read final
}
