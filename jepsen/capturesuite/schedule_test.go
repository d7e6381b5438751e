package capturesuite

import (
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// The default schedule fits the fault kinds: over the main phase of 60 s
// runs on seeds 1 to 100, partitions are drawn about three times as often
// as wipes, corruptions and full disks, every kind is drawn, and each
// start of a kind is followed by its stop.
func TestScheduleMix(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	choices, kinds := faultChoices(nodes, nodes, Nemeses)
	if len(kinds) != len(Nemeses) || len(choices.Kinds) != 16 {
		t.Fatalf("kinds %v, weighted %v", kinds, choices.Kinds)
	}
	main := 60*time.Second - recovery(60*time.Second)
	count := map[string]int{}
	total := 0
	for seed := uint64(1); seed <= 100; seed++ {
		g := gen.TimeLimit(main, gen.Nemesis(nemesis.Schedule(seed+3, choices, faultQuiet, faultActive)))
		var open string
		for _, e := range gen.SimulateSeed(seed, g, 1, func(gen.Op) time.Duration { return 10 * time.Millisecond }, time.Hour) {
			if e.Kind != gen.Invoked {
				continue
			}
			if k, ok := strings.CutPrefix(e.F, "start-"); ok {
				if open != "" {
					t.Fatalf("seed %d: %s started while %s is active", seed, k, open)
				}
				open = k
				count[k]++
				total++
			} else if k, ok := strings.CutPrefix(e.F, "stop-"); ok && k == open {
				open = ""
			}
		}
	}
	t.Logf("%d faults in 100 runs: %v", total, count)
	for _, k := range Nemeses {
		if count[k] == 0 {
			t.Errorf("%s never drawn", k)
		}
	}
	for _, k := range []string{"wipe", "corrupt", "disk"} {
		if 2*count[k] >= count["partition"] {
			t.Errorf("%s drawn %d times, partitions %d: the disk faults must be rarer", k, count[k], count["partition"])
		}
	}
	if total < 100*6 {
		t.Errorf("%d faults in 100 runs of 50 s, fewer than 6 a run", total)
	}
}
