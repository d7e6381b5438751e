package capturesuite

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/linear"
)

// binaryStart is about when the test binary started, for the detection
// benchmark to tell whether -timeout leaves it the time it needs.
var binaryStart = time.Now()

// runOverhead is a generous allowance per capture run beyond its time
// limit (starting the processes, the final checks, stopping): measured
// 18 s per 60 s run and 21 s per 30 s run on a loaded 2-core machine.
const runOverhead = 40 * time.Second

// checkTimeout fails b at once, saying what to pass, when go test's
// -timeout (10 minutes by default) would end the binary before n runs of
// limit each are done: a panic at the timeout would lose every run made.
func checkTimeout(b *testing.B, n int, limit time.Duration) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout <= 0 {
		return
	}
	need := time.Duration(n) * (limit + runOverhead)
	if left := timeout - time.Since(binaryStart); left < need {
		b.Fatalf("%d runs of %v need up to %v, and -timeout %v leaves %v: pass -timeout 0 (or -timeout 90m for all 20 seeds at both limits)",
			n, limit, need.Round(time.Minute), timeout, left.Round(time.Second))
	}
}

// staleExecuted is the fence checker's count of stale actions executed
// in a run, or -1 when the run has no such figure.
func staleExecuted(r checker.Result) int {
	cs, _ := r.Fields["checkers"].(map[string]checker.Result)
	n, ok := cs["fence"].Fields["stale_actions_executed"].(int)
	if !ok {
		return -1
	}
	return n
}

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

// detectionProvider is the cloud the detection benchmark runs on: aws,
// or $IPFENCE_DETECTION_PROVIDER (one of Clouds).
func detectionProvider(b *testing.B) string {
	p := os.Getenv("IPFENCE_DETECTION_PROVIDER")
	if p != "" && !slices.Contains(Clouds, p) {
		b.Fatalf("IPFENCE_DETECTION_PROVIDER: %q is not one of %v", p, Clouds)
	}
	return p
}

// BenchmarkPlantedBugDetection runs the planted bug (the nodes' gate a
// no-op, --unsafe-disable-fence) on every seed, as the default 60 s run
// and as 30 s runs, one run at a time, and reports the fraction of runs
// that said INVALID (the target: 1 for 60 s, at least 0.95 for 30 s), and
// the fewest and most stale actions the fence checker counted in a caught
// run. A full measurement is 20 × 60 s + 20 × 30 s of real processes
// (about 40 minutes with the processes' start and the checks), more than
// go test's default 10-minute -timeout, so it runs only when asked and
// needs the timeout raised:
//
//	go test ./jepsen/capturesuite -run '^$' -bench PlantedBugDetection -benchtime 1x -timeout 90m
//
// It refuses at once, saying so, when -timeout is too short.
// IPFENCE_DETECTION_PROVIDER=azure or oci runs it on that cloud.
func BenchmarkPlantedBugDetection(b *testing.B) {
	if testing.Short() {
		b.Skip("runs the capture test many times")
	}
	bin := testenv.Binary(b)
	seeds := detectionSeeds(b)
	cloud := detectionProvider(b)
	for _, limit := range []time.Duration{60 * time.Second, 30 * time.Second} {
		b.Run(limit.String(), func(b *testing.B) {
			checkTimeout(b, b.N*len(seeds), limit)
			for range b.N {
				caught, fewest, most := 0, -1, -1
				var missed []string
				for _, seed := range seeds {
					out, err := Run(b.Context(), Options{Binary: bin, Nemesis: Nemeses, Seed: seed, Store: b.TempDir(),
						TimeLimit: limit, UnsafeDisableFence: true, Provider: cloud})
					switch {
					case err != nil && out == nil:
						b.Fatalf("seed %d: %v", seed, err)
					case out.Verdict == linear.False:
						caught++
						n := staleExecuted(out.Results)
						b.Logf("seed %d, %v: INVALID, %d stale actions executed", seed, limit, n)
						if fewest < 0 || n < fewest {
							fewest = n
						}
						most = max(most, n)
					default:
						missed = append(missed, fmt.Sprintf("seed %d: %v (%v)", seed, out.Verdict, err))
					}
				}
				if len(missed) > 0 {
					b.Logf("%v runs not caught: %s", limit, strings.Join(missed, "; "))
				}
				b.ReportMetric(float64(caught)/float64(len(seeds)), "detected/run")
				b.ReportMetric(float64(len(seeds)), "seeds")
				b.ReportMetric(float64(fewest), "min-stale")
				b.ReportMetric(float64(most), "max-stale")
			}
		})
	}
}
