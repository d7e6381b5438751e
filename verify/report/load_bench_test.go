package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/pageload"
)

// BenchmarkTimeline1MLoad writes the timeline of a million operations and
// loads it in headless chromium: it reports the ms from navigation start
// to the end of the first draw (load-ms, the target is under 3,000) and
// the page's size (page-bytes, under 50 MB). Each iteration is one load.
// With IPFENCE_REPORT_OUT set, the page stays in its 1m directory.
//
//	go test ./verify/report -run '^$' -bench Timeline1MLoad -benchtime 3x
func BenchmarkTimeline1MLoad(b *testing.B) {
	events, faults := synthetic(1, 1_000_000, 10)
	pageload.Bench(b, "timeline.html", func(w io.Writer) error { return Timeline(w, "bench", events, faults) }, func(l pageload.Load) error {
		if l.Attrs["mode"] != "bands" {
			return fmt.Errorf("the page opened as %q, want bands", l.Attrs["mode"])
		}
		return nil
	})
}

// TestLoadPages loads each page named in IPFENCE_LOAD_PAGES (paths
// separated by commas) three times, in turn, and logs its load times: a
// side-by-side of two versions of a page on the same machine.
//
//	IPFENCE_LOAD_PAGES=old.html,new.html go test ./verify/report -run LoadPages -v
func TestLoadPages(t *testing.T) {
	list := os.Getenv("IPFENCE_LOAD_PAGES")
	if list == "" {
		t.Skip("set IPFENCE_LOAD_PAGES to the pages to time")
	}
	paths := strings.Split(list, ",")
	for round := 1; round <= 3; round++ {
		for _, p := range paths {
			l := pageload.Measure(t, p)
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d %s: %.0f ms to first draw (document read by %s ms), chromium ran %v, %.1f MB",
				round, p, l.Ms, l.Attrs["responsems"], l.Wall.Round(1e6), float64(st.Size())/1e6)
		}
	}
}
