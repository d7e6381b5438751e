package lincheck

import (
	"fmt"
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
	pageload.Bench(b, "linear.html", r.WriteHTML, func(l pageload.Load) error {
		if n, err := strconv.Atoi(l.Attrs["drawn"]); err != nil || n == 0 {
			return fmt.Errorf("the page drew %q bars, want some", l.Attrs["drawn"])
		}
		return nil
	})
}
