package lincheck

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

var okGet = regexp.MustCompile(`^(\{"index":\d+,"type":"ok","process":\d+,"f":"get","value":\["k\d+",)[^\]]*(\].*)$`)

// badKV is syntheticKV with the first successful get after the middle of
// the history changed to read a value no put wrote: the history is not
// linearizable, and that get is the operation no order gets past.
func badKV(t testing.TB, n, procs, keys int) *Report {
	t.Helper()
	src := syntheticKV(t, n, procs, keys)
	lines := strings.Split(string(src), "\n")
	for i := len(lines) / 2; i < len(lines); i++ {
		if okGet.MatchString(lines[i]) {
			lines[i] = okGet.ReplaceAllString(lines[i], `${1}"bogus"${2}`)
			break
		}
	}
	h, err := history.Parse("bad.jsonl", []byte(strings.Join(lines, "\n")), history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := model.Lookup("kv")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), "bad.jsonl", h, Options{Model: kv})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != linear.False || r.Failure == nil || r.Ops != n {
		t.Fatalf("valid %v with %d ops, failure %+v; want false with %d", r.Valid, r.Ops, r.Failure, n)
	}
	return r
}

// A history of more operations than the page draws is drawn as a window
// around the failing operation, with every partition in the summary.
func TestHTMLWindow(t *testing.T) {
	const n = 20_000
	r := badKV(t, n, 8, 10)
	// The models drop failed puts, which certainly did not take effect.
	total := partOps(r)
	if total < n*98/100 || total == n {
		t.Fatalf("%d ops in partitions, want about 1%% fewer than %d", total, n)
	}
	for _, c := range []struct {
		name  string
		limit int
		shown int
	}{
		{"default", 0, DefaultMaxOps},
		{"small", 300, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			page, d := renderWith(t, r, HTMLOptions{MaxOps: c.limit})
			w := d.Window
			if w == nil {
				t.Fatal("no window on a page of 20,000 ops")
			}
			if w.Shown != c.shown || w.Left != total-c.shown || w.Around != "the operation no linearization gets past" {
				t.Errorf("window %+v, want %d shown, %d left, around the failing op", *w, c.shown, total-c.shown)
			}
			drawn, failed := 0, 0
			for _, p := range d.Parts {
				drawn += len(p.Ops)
				for _, o := range p.Ops {
					if o.Call < w.From || o.Call >= w.To || o.End > w.To {
						t.Fatalf("op %+v outside the window [%d, %d)", o, w.From, w.To)
					}
					if o.Failed {
						failed++
						if o.Invoke != r.Failure.Op.InvokeIndex || o.Done != r.Failure.Op.Index || p.Label != r.Failure.Partition {
							t.Errorf("failed op on the page %+v in %q, want the report's %+v", o, p.Label, r.Failure.Op)
						}
					}
				}
			}
			if drawn != c.shown || failed != 1 {
				t.Errorf("page holds %d ops of which %d failed; want %d and 1", drawn, failed, c.shown)
			}
			ops, invalid := 0, 0
			for _, s := range d.Summary {
				ops += s.Ops
				if s.Valid == "false" {
					invalid++
					if s.Label != r.Failure.Partition || s.Shown == 0 {
						t.Errorf("invalid partition %+v, want %q, drawn", s, r.Failure.Partition)
					}
				}
			}
			if len(d.Summary) != 10 || ops != total || invalid != 1 {
				t.Errorf("summary of %d partitions, %d ops, %d invalid; want 10, %d, 1", len(d.Summary), ops, invalid, total)
			}
			if d.Ops != n || len(page) > 6<<20 {
				t.Errorf("page says %d ops in %d bytes", d.Ops, len(page))
			}
		})
	}
	// A negative limit draws them all; so does a limit above the count.
	for _, limit := range []int{-1, n} {
		if _, d := renderWith(t, r, HTMLOptions{MaxOps: limit}); d.Window != nil || d.Summary != nil || ops(d) != total {
			t.Errorf("MaxOps %d: window %+v, %d ops drawn; want every op", limit, d.Window, ops(d))
		}
	}
}

func ops(d pageData) int {
	n := 0
	for _, p := range d.Parts {
		n += len(p.Ops)
	}
	return n
}

// TestHTMLWindowInBrowser loads a windowed page in chromium: it draws
// the window, says so, and "show failing op" finds the failing op.
func TestHTMLWindowInBrowser(t *testing.T) {
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	r := badKV(t, 20_000, 8, 10)
	var buf bytes.Buffer
	if err := r.WriteHTMLWith(&buf, HTMLOptions{MaxOps: 2000}); err != nil {
		t.Fatal(err)
	}
	probe := `<script>
(function () {
  var b = document.body;
  b.dataset.note = document.querySelector(".window").textContent;
  b.dataset.rowsum = String(document.querySelectorAll("details.sum tr").length);
  [].filter.call(document.querySelectorAll(".tools button"), function (x) { return x.textContent === "show failing op"; })[0].click();
  b.dataset.tip = document.getElementById("tip").textContent;
})();
</script>
`
	dir := t.TempDir()
	path := dir + "/page.html"
	if err := os.WriteFile(path, []byte(strings.Replace(buf.String(), "</body>", probe+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := browse(t, chromium, path)
	if n := drawn(t, got); n != 2000 {
		t.Errorf("drew %d ops, want 2000", n)
	}
	left := strconv.Itoa(partOps(r) - 2000)
	if got["window"] != "2000" || got["left"] != left || got["rowsum"] != "11" {
		t.Errorf("window %q, left %q, summary rows %q; want 2000, %s, 11 (a head and 10 partitions)", got["window"], got["left"], got["rowsum"], left)
	}
	if want := "A window, not the whole history: this page draws 2000 ops of " + strconv.Itoa(partOps(r)); !strings.HasPrefix(got["note"], want) {
		t.Errorf("note %q, want it to start %q", got["note"], want)
	}
	if !strings.Contains(got["tip"], "no linearization gets past this op") || !strings.Contains(got["tip"], `"bogus"`) {
		t.Errorf("failing op's tooltip %q", got["tip"])
	}
}

// BenchmarkHTML1M writes the page of a failing history of a million
// operations over 1,000 keys: a window of DefaultMaxOps around the
// failure and a summary of 1,000 partitions. It reports the page's size;
// the check itself is done once before the timer starts. (Over 10 keys,
// partitions of 100,000 ops, the check ended unknown after minutes.)
func BenchmarkHTML1M(b *testing.B) {
	r := badKV(b, 1_000_000, 8, 1000)
	var buf bytes.Buffer
	b.ResetTimer()
	for b.Loop() {
		buf.Reset()
		if err := r.WriteHTML(&buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}
