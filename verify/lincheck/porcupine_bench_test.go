package lincheck

import (
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ipfence/ipfence/verify/linear"
)

// The benchmarks below check the same histories with ipfence and with
// Porcupine v1.3.1 in one process and report the ratio of their times
// (ipfence / Porcupine; below 1 means ipfence is faster). Run them with
//
//	go test ./verify/lincheck -run '^$' -bench VersusPorcupine -benchtime 20x
//
// Per history, ipfence and then Porcupine run at least b.N times and at
// least 50ms each; the figures are mean times per check.

// versus times both checkers over the datasets for b.N rounds and returns
// the per-dataset totals.
func versus(b *testing.B, sets []dataset) (mine, theirs []time.Duration) {
	mine = make([]time.Duration, len(sets))
	theirs = make([]time.Duration, len(sets))
	for i := range sets {
		// Both must agree with the expected verdict, or the timing means
		// nothing.
		if got := sets[i].ipfence(b); got != sets[i].want {
			b.Fatalf("%s: ipfence says %v, want %v", sets[i].name, got, sets[i].want)
		}
		if got := sets[i].porcupine(); got != sets[i].want {
			b.Fatalf("%s: porcupine says %v, want %v", sets[i].name, got, sets[i].want)
		}
	}
	// Each checker runs on one history before the other takes its turn, so
	// that each pays for its own garbage only; a history is checked at
	// least b.N times and for at least minPerHistory, so that the
	// small ones are timed over many runs. Times are per check.
	b.ResetTimer()
	for i := range sets {
		mine[i] = timePerRun(b.N, func() { sets[i].ipfence(b) })
		theirs[i] = timePerRun(b.N, func() { sets[i].porcupine() })
	}
	return mine, theirs
}

// minPerHistory is how long each checker runs on each history at least.
const minPerHistory = 50 * time.Millisecond

// timePerRun runs f at least n times and for at least minPerHistory, and
// returns the mean time per run.
func timePerRun(n int, f func()) time.Duration {
	start := time.Now()
	runs := 0
	for runs < n || time.Since(start) < minPerHistory {
		f()
		runs++
	}
	return time.Since(start) / time.Duration(runs)
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// report adds the totals, their ratio, and the worst single-history ratio.
func report(b *testing.B, sets []dataset, mine, theirs []time.Duration) {
	n := 1.0
	tm, tt := sum(mine), sum(theirs)
	b.ReportMetric(float64(tm.Nanoseconds())/n, "ipfence-ns/pass")
	b.ReportMetric(float64(tt.Nanoseconds())/n, "porcupine-ns/pass")
	b.ReportMetric(float64(tm)/float64(tt), "ratio")
	worst, at := 0.0, ""
	for i := range sets {
		if r := float64(mine[i]) / float64(theirs[i]); r > worst {
			worst, at = r, sets[i].name
		}
	}
	b.ReportMetric(worst, "worst-ratio")
	b.Logf("total: ipfence %v, porcupine %v per pass over all (ratio %.3f); worst single history %s at %.3f",
		time.Duration(float64(tm)/n), time.Duration(float64(tt)/n), float64(tm)/float64(tt), at, worst)
	if testing.Verbose() {
		idx := make([]int, len(sets))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, c int) bool { return theirs[idx[a]] > theirs[idx[c]] })
		for _, i := range idx[:min(10, len(idx))] {
			b.Logf("  %-28s ipfence %10v porcupine %10v ratio %.3f", sets[i].name,
				time.Duration(float64(mine[i])/n), time.Duration(float64(theirs[i])/n), float64(mine[i])/float64(theirs[i]))
		}
	}
}

func BenchmarkVersusPorcupine(b *testing.B) {
	groups := []struct {
		name string
		load func(testing.TB) []dataset
	}{
		{"etcd", etcdDatasets},
		{"kv", kvDatasets},
		{"knossos-cas-register", knossosDatasets},
	}
	for _, g := range groups {
		sets := g.load(b)
		b.Run(g.name, func(b *testing.B) {
			mine, theirs := versus(b, sets)
			report(b, sets, mine, theirs)
		})
	}
	// Peak heap of one pass over the Knossos files by each checker.
	sets := knossosDatasets(b)
	b.Run("knossos-cas-register-peak-heap", func(b *testing.B) {
		var mine, theirs uint64
		for b.Loop() {
			mine = max(mine, peakHeap(func() {
				for i := range sets {
					sets[i].ipfence(b)
				}
			}))
			theirs = max(theirs, peakHeap(func() {
				for i := range sets {
					sets[i].porcupine()
				}
			}))
		}
		b.ReportMetric(float64(mine)/(1<<20), "ipfence-peak-MiB")
		b.ReportMetric(float64(theirs)/(1<<20), "porcupine-peak-MiB")
	})
}

// BenchmarkCheck times ipfence alone on each corpus, for benchstat
// comparisons between versions.
func BenchmarkCheck(b *testing.B) {
	for _, g := range []struct {
		name string
		load func(testing.TB) []dataset
	}{{"etcd", etcdDatasets}, {"kv", kvDatasets}, {"knossos-cas-register", knossosDatasets}} {
		sets := g.load(b)
		b.Run(g.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range sets {
					sets[i].ipfence(b)
				}
			}
		})
	}
}

// peakHeap runs f and returns the largest live heap seen while it ran,
// above the heap before it, sampled every 200µs.
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	close(done)
	<-stopped
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// BenchmarkStretchKV checks Porcupine's 50-client kv histories without
// partitioning: one state for the whole map. ipfence's kv model then tells
// the search which key each operation touches (linear.Keyed) and the search
// reduces by independence; Porcupine, given the same whole-map model, has
// no such help. Porcupine's side takes minutes and several GB, so it runs
// only with IPFENCE_STRETCH_PORCUPINE=1:
//
//	IPFENCE_STRETCH_PORCUPINE=1 go test ./verify/lincheck -run '^$' -bench StretchKV -benchtime 1x -timeout 30m
func BenchmarkStretchKV(b *testing.B) {
	var sets []dataset
	for _, d := range kvDatasets(b) {
		if strings.HasPrefix(d.name, "c50") {
			d.sem.Unpartitioned = true
			d.pModel.Partition = nil
			d.pModel.Init = func() any { return map[string]string{} }
			d.pModel.Step = wholeKVStep
			d.pModel.Equal = func(x, y any) bool { return maps.Equal(x.(map[string]string), y.(map[string]string)) }
			sets = append(sets, d)
		}
	}
	for i := range sets {
		d := &sets[i]
		b.Run("ipfence/"+d.name, func(b *testing.B) {
			var verdict linear.Verdict
			var peak uint64
			start := time.Now()
			for b.Loop() {
				peak = max(peak, peakHeap(func() { verdict = d.ipfence(b) }))
			}
			if verdict != d.want {
				b.Fatalf("%s: %v, want %v", d.name, verdict, d.want)
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/check")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.Logf("%s unpartitioned: %v in %v, peak heap %d MiB", d.name, verdict, time.Since(start)/time.Duration(b.N), peak>>20)
		})
	}
	for i := range sets {
		d := &sets[i]
		b.Run("porcupine/"+d.name, func(b *testing.B) {
			if os.Getenv("IPFENCE_STRETCH_PORCUPINE") != "1" {
				b.Skip("set IPFENCE_STRETCH_PORCUPINE=1 to run Porcupine for 120 s on this history")
			}
			var res porcupine.CheckResult
			var peak uint64
			start := time.Now()
			for b.Loop() {
				peak = max(peak, peakHeap(func() {
					res, _ = porcupine.CheckOperationsVerbose(d.pModel, d.pOps, 120*time.Second)
				}))
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/check")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.Logf("%s unpartitioned: porcupine %v in %v, peak heap %d MiB", d.name, res, time.Since(start)/time.Duration(b.N), peak>>20)
		})
	}
}

// wholeKVStep is Porcupine's step over the whole map, copying on write.
func wholeKVStep(state, input, output any) (bool, any) {
	st := state.(map[string]string)
	in := input.(kvIn)
	switch in.op {
	case 0:
		return output.(string) == st[in.key], st
	}
	next := maps.Clone(st)
	if in.op == 1 {
		next[in.key] = in.value
	} else {
		next[in.key] = st[in.key] + in.value
	}
	return true, next
}
