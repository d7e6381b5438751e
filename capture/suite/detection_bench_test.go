package suite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testenv"
	"github.com/ipfence/ipfence/verify/linear"
)

// detectionSeeds are the seeds the detection benchmark runs: 1 to 20, or
// $IPFENCE_DETECTION_SEEDS ("3-7" or "1,4,9") to measure a few at a time
// on a busy machine.
func detectionSeeds(b *testing.B) []uint64 {
	spec := os.Getenv("IPFENCE_DETECTION_SEEDS")
	if spec == "" {
		spec = "1-20"
	}
	var out []uint64
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.ParseUint(strings.TrimSpace(hi), 10, 64)
		}
		if err1 != nil || err2 != nil || z < a {
			b.Fatalf("IPFENCE_DETECTION_SEEDS: %q is not a seed or a range such as 3-7", part)
		}
		for s := a; s <= z; s++ {
			out = append(out, s)
		}
	}
	return out
}

// BenchmarkPlantedBugDetection runs the planted bug (the nodes' gate a
// no-op, --unsafe-disable-fence) on every seed, as the default 60 s run
// and as 30 s runs, one run at a time, and reports the fraction of runs
// that said INVALID (the target: 1 for 60 s, at least 0.95 for 30 s). A
// full measurement is 20 × 60 s + 20 × 30 s of real processes, so it runs
// only when asked: go test -run '^$' -bench PlantedBugDetection
// ./capture/suite.
func BenchmarkPlantedBugDetection(b *testing.B) {
	if testing.Short() {
		b.Skip("runs the capture test many times")
	}
	bin := testenv.Binary(b)
	seeds := detectionSeeds(b)
	for _, limit := range []time.Duration{60 * time.Second, 30 * time.Second} {
		b.Run(limit.String(), func(b *testing.B) {
			for range b.N {
				caught := 0
				var missed []string
				for _, seed := range seeds {
					out, err := Run(b.Context(), Options{Binary: bin, Nemesis: Nemeses, Seed: seed, Store: b.TempDir(),
						TimeLimit: limit, UnsafeDisableFence: true})
					switch {
					case err != nil && out == nil:
						b.Fatalf("seed %d: %v", seed, err)
					case out.Verdict == linear.False:
						caught++
					default:
						missed = append(missed, fmt.Sprintf("seed %d: %v (%v)", seed, out.Verdict, err))
					}
				}
				if len(missed) > 0 {
					b.Logf("%v runs not caught: %s", limit, strings.Join(missed, "; "))
				}
				b.ReportMetric(float64(caught)/float64(len(seeds)), "detected/run")
				b.ReportMetric(float64(len(seeds)), "seeds")
			}
		})
	}
}
