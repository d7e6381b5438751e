package lincheck

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/regsim"
)

// checkRegisterBytes reads and checks a simulated register history from
// its JSON Lines bytes, as `ipfence-verify check` does: from a file, an
// event at a time, decoded in parallel, holding the operations only.
func checkRegisterBytes(b *testing.B, data []byte) *Report {
	m, err := model.Lookup("independent-cas-register")
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "sim.jsonl")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	d := history.NewDecoder(context.Background(), "sim.jsonl", f, history.JSONL, history.Limits{})
	defer d.Close()
	d.Parallel()
	r, err := CheckDecoder(context.Background(), "sim.jsonl", d, Options{Model: m})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func simulate(b *testing.B, c regsim.Config) []byte {
	var buf bytes.Buffer
	if _, err := regsim.Write(&buf, c); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkCheckRegisters checks linearizable histories of compare-and-set
// registers over 1,000 keys (issue 20, item 5: 10M operations partitioned
// by key; IPFENCE_BENCH_10M=1 adds 10M, which needs about 20 GB), from
// the bytes to the verdict.
func BenchmarkCheckRegisters(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if os.Getenv("IPFENCE_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		b.Run(opsName(n), func(b *testing.B) {
			data := simulate(b, regsim.Config{Ops: n, Keys: 1000, Seed: 1})
			var r *Report
			var peak uint64
			b.ResetTimer()
			for b.Loop() {
				peak = max(peak, peakHeap(func() { r = checkRegisterBytes(b, data) }))
			}
			if r.Valid != linear.True || r.Ops != n {
				b.Fatalf("%v with %d ops; want linearizable, %d", r.Valid, r.Ops, n)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		})
	}
}

// BenchmarkCheckCAS100k checks one register of 100,000 operations at
// concurrency 10 with crashed (info) operations (issue 20, item 5): a
// linearizable history, and one with stale reads, whose answer may be
// unknown under the default memory bound.
func BenchmarkCheckCAS100k(b *testing.B) {
	for _, c := range []struct {
		name   string
		cfg    regsim.Config
		accept []linear.Verdict
	}{
		{"info-1pct", regsim.Config{Ops: 100_000, Keys: 1, InfoRate: 0.01, Seed: 1}, []linear.Verdict{linear.True}},
		{"info-5pct", regsim.Config{Ops: 100_000, Keys: 1, InfoRate: 0.05, Seed: 2}, []linear.Verdict{linear.True}},
		{"stale", regsim.Config{Ops: 100_000, Keys: 1, InfoRate: 0.01, StaleRate: 0.001, Seed: 3}, []linear.Verdict{linear.False, linear.Unknown}},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := simulate(b, c.cfg)
			var r *Report
			b.ResetTimer()
			for b.Loop() {
				r = checkRegisterBytes(b, data)
			}
			ok := false
			for _, v := range c.accept {
				ok = ok || r.Valid == v
			}
			if !ok {
				b.Fatalf("%v: %s", r.Valid, r.Summary())
			}
			b.ReportMetric(float64(r.Configs), "configs")
			b.Logf("%s: %v %s", c.name, r.Valid, r.Reason)
		})
	}
}

func opsName(n int) string {
	switch {
	case n >= 1_000_000:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000:
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}
