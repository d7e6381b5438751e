package lincheck

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/pageload"
)

// BenchmarkHTML1MLoad writes the page of BenchmarkHTML1M (a failing
// history of a million operations) and loads it in headless chromium: it
// reports the ms from navigation start to the end of the first draw
// (load-ms, the target is under 3,000) and the page's size. Each
// iteration is one load. With IPFENCE_REPORT_OUT set, the page stays in
// its 1m directory.
//
//	go test ./verify/lincheck -run '^$' -bench HTML1MLoad -benchtime 3x
func BenchmarkHTML1MLoad(b *testing.B) {
	r := badKV(b, 1_000_000, 8, 1000)
	dir := b.TempDir()
	if out := os.Getenv("IPFENCE_REPORT_OUT"); out != "" {
		dir = filepath.Join(out, "1m")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "linear.html")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var ms float64
	b.ResetTimer()
	for b.Loop() {
		l := pageload.Measure(b, path)
		if n, err := strconv.Atoi(l.Attrs["drawn"]); err != nil || n == 0 {
			b.Fatalf("the page drew %q bars, want some", l.Attrs["drawn"])
		}
		ms += l.Ms
	}
	b.ReportMetric(ms/float64(b.N), "load-ms")
	b.ReportMetric(float64(st.Size()), "page-bytes")
}
