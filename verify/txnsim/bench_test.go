package txnsim

import (
	"io"
	"runtime"
	"testing"
)

// BenchmarkGenerate streams the large run, a million si
// list-append transactions by 10 processes over 100 keys, to io.Discard.
// One benchmark op is the whole million; txn/s and the heap the run
// needed (HeapSys grows to the peak and seldom returns) are reported
// beside. The target is a few seconds and far under 1 GB.
func BenchmarkGenerate(b *testing.B) {
	c := Config{DB: "si", Workload: "list-append", Ops: 1_000_000, Concurrency: 10, Keys: 100, Seed: 1}
	b.ReportAllocs()
	for b.Loop() {
		n, err := Write(io.Discard, c)
		if err != nil {
			b.Fatal(err)
		}
		if n != 2*c.Ops {
			b.Fatalf("%d events, want %d", n, 2*c.Ops)
		}
	}
	b.ReportMetric(float64(c.Ops)*float64(b.N)/b.Elapsed().Seconds(), "txn/s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "MiB-heap")
}

// BenchmarkLevels is one level and workload per sub-benchmark, 100,000
// transactions each, to compare their costs.
func BenchmarkLevels(b *testing.B) {
	for _, db := range DBs {
		for _, wl := range Workloads {
			b.Run(db+"/"+wl, func(b *testing.B) {
				c := Config{DB: db, Workload: wl, Ops: 100_000, Keys: 100, Seed: 1}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Write(io.Discard, c); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
