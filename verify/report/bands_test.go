package report

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// The page tells its script above how many ops in view to draw bands,
// and still holds every op, which the bars need once zoomed in.
func TestTimelineDense(t *testing.T) {
	events, faults := synthetic(1, 20_000, 10)
	for _, c := range []struct {
		summarize, dense int
	}{{0, DefaultSummarize}, {5000, 5000}} {
		var buf bytes.Buffer
		if err := TimelineWith(&buf, events, TimelineOptions{Title: "dense", Faults: faults, Summarize: c.summarize}); err != nil {
			t.Fatal(err)
		}
		d := decodePage(t, buf.String())
		ops, nem, err := history.Pair(events)
		if err != nil {
			t.Fatal(err)
		}
		if d.Dense != c.dense || len(d.Lane) != len(ops)+nemesisOps(nem) || len(d.Out) != len(d.Lane) {
			t.Errorf("Summarize %d: dense %d with %d ops on the page; want %d with %d", c.summarize, d.Dense, len(d.Lane), c.dense, len(ops)+nemesisOps(nem))
		}
	}
}

// bandsProbe drives a page drawn as bands: hover over a band, click on
// it (zooming in eightfold, to single ops), fit, then drag over a
// twentieth of the run; it records the mode and counts after each step.
const bandsProbe = `<script>
(function () {
  var b = document.body, view = document.getElementById("view"), tip = document.getElementById("tip");
  var D = JSON.parse(document.getElementById("data").textContent);
  var steps = [];
  function state() { steps.push(b.dataset.mode + ":" + b.dataset.drawn + ":" + b.dataset.bands); }
  function mouse(type, t, row) {
    view.dispatchEvent(new MouseEvent(type, { bubbles: true, button: 0, clientX: timeline.x(t), clientY: timeline.y(row) }));
  }
  state();
  mouse("mousemove", D.end / 2, 1);
  b.dataset.bandtip = tip.textContent;
  mouse("mousedown", D.end / 2, 1);
  mouse("mouseup", D.end / 2, 1);
  mouse("click", D.end / 2, 1);
  b.dataset.pinned = tip.style.display;
  state();
  [].filter.call(document.querySelectorAll("button"), function (x) { return x.textContent === "fit"; })[0].click();
  state();
  mouse("mousedown", D.end * 0.30, 1);
  mouse("mousemove", D.end * 0.33, 1);
  mouse("mousemove", D.end * 0.35, 1);
  mouse("mouseup", D.end * 0.35, 1);
  state();
  b.dataset.steps = steps.join(" ");
})();
</script>
`

// TestTimelineBandsInBrowser loads a page with more ops than its
// threshold in chromium: it opens as bands, and a click or a drag on
// them zooms in to single ops.
func TestTimelineBandsInBrowser(t *testing.T) {
	events, faults := synthetic(1, 20_000, 10)
	var buf bytes.Buffer
	if err := TimelineWith(&buf, events, TimelineOptions{Title: "bands", Faults: faults, Summarize: 5000}); err != nil {
		t.Fatal(err)
	}
	path := writePage(t, t.TempDir(), strings.Replace(buf.String(), "</body>", bandsProbe+"</body>", 1))
	got, _ := browse(t, path, 90*time.Second)
	t.Logf("steps (mode:ops drawn:band columns): %s", got["steps"])
	checkSteps(t, got, 100, 5000)
	if !strings.Contains(got["bandtip"], " ok · ") || !strings.HasSuffix(got["bandtip"], "click to zoom in, drag to zoom to a range") {
		t.Errorf("band tooltip %q", got["bandtip"])
	}
	if got["zoomed"] != "2" || got["pinned"] == "block" {
		t.Errorf("zoomed %q times, tooltip %q after the zooming click; want 2 and not pinned", got["zoomed"], got["pinned"])
	}
}

// BenchmarkTimeline1M writes the timeline of a million operations and
// reports the page's size: it must stay under 50 MB.
func BenchmarkTimeline1M(b *testing.B) {
	events, faults := synthetic(1, 1_000_000, 10)
	var n countWriter
	b.ResetTimer()
	for b.Loop() {
		n = 0
		if err := Timeline(&n, "bench", events, faults); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "page-bytes")
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

// TestTimeline200kInBrowser loads a page of 200,000 operations with the
// default threshold in chromium: it opens as bands, and a click on them
// (an eightfold zoom) reaches single ops, as does a drag over a
// twentieth of the run; the ops the bars and tooltips need come from the
// page's compact encoding.
func TestTimeline200kInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("chromium on 200,000 operations takes seconds")
	}
	events, faults := synthetic(2, 200_000, 10)
	var buf bytes.Buffer
	if err := Timeline(&buf, "200k", events, faults); err != nil {
		t.Fatal(err)
	}
	path := writePage(t, t.TempDir(), strings.Replace(buf.String(), "</body>", decodeProbe+bandsProbe+opProbe+"</body>", 1))
	got, _ := browse(t, path, 120*time.Second)
	t.Logf("page %.1f MB; steps (mode:ops drawn:band columns): %s", float64(buf.Len())/1e6, got["steps"])
	checkSteps(t, got, 1000, DefaultSummarize)
	// The script decodes the ops as timelinepage does (checked against
	// the history by TestTimelineData): every field of the first 5,000.
	d := decodePage(t, buf.String())
	var want []string
	for i := range 5000 {
		stop := d.Start[i] + d.Dur[i]
		if d.Dur[i] < 0 {
			stop = d.End // never completed: drawn to the end
		}
		want = append(want, fmt.Sprintf("%d,%d,%d,%d,%d,%d", d.Lane[i], d.F[i], d.Val[i], d.Out[i]-'0', d.Start[i], stop))
	}
	if got := strings.Split(got["decoded"], " "); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Errorf("op %d in the page's script: lane,f,value,outcome,start,stop %s; want %s", i, got[i], want[i])
				break
			}
		}
		if len(got) != len(want) {
			t.Errorf("the script decoded %d of the first ops, want %d", len(got), len(want))
		}
	}
	// The tooltip of an op in view after the drag tells its value and
	// times, as decoded from the page.
	if !regexp.MustCompile(`^process p\d+ · (read|write|cas)(ok|fail|info)value .+invoked at \d+\.\d{6} s`).MatchString(got["optip"]) {
		t.Errorf("tooltip of an op after zooming in: %q", got["optip"])
	}
}

// decodeProbe records the first 5,000 ops as the page's script decoded
// them: lane, f, value, outcome, start and stop.
const decodeProbe = `<script>
(function () {
  var O = timeline.ops, out = [];
  for (var i = 0; i < 5000; i++) out.push([O.l[i], O.f[i], O.v[i], O.o[i], O.start[i], O.stop[i]].join(","));
  document.body.dataset.decoded = out.join(" ");
})();
</script>
`

// opProbe, after bandsProbe, hovers over the middle of an ok op of a
// client row that is in view and records its tooltip.
const opProbe = `<script>
(function () {
  var O = timeline.ops, view = document.getElementById("view"), v = view.getBoundingClientRect();
  for (var i = 0; i < O.l.length; i++) {
    if (O.o[i] !== 0) continue;
    var r = timeline.box(i);
    if (r.x < v.left + 100 || r.x + r.w > v.right - 20 || r.y < v.top + 40 || r.y + r.h > v.bottom - 20) continue;
    view.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r.x + r.w / 2, clientY: r.y + r.h / 2 }));
    document.body.dataset.optip = document.getElementById("tip").textContent;
    break;
  }
})();
</script>
`

// checkSteps checks the bands probe's four steps (mode:ops drawn:band
// columns): bands of at least minCols columns and no ops, then zoomed in
// to 1 to maxOps ops and no bands, twice.
func checkSteps(t *testing.T, got map[string]string, minCols, maxOps int) {
	t.Helper()
	steps := strings.Fields(got["steps"])
	if len(steps) != 4 {
		t.Fatalf("steps %q, want 4 (data %v)", got["steps"], got)
	}
	for k, wantMode := range []string{"bands", "ops", "bands", "ops"} {
		f := strings.Split(steps[k], ":")
		drawn, _ := strconv.Atoi(f[1])
		cols, _ := strconv.Atoi(f[2])
		switch {
		case f[0] != wantMode:
			t.Errorf("step %d: mode %s, want %s (steps %s)", k, f[0], wantMode, got["steps"])
		case wantMode == "bands" && (drawn != 0 || cols < minCols):
			t.Errorf("step %d: bands drew %d ops and %d columns; want none and at least %d", k, drawn, cols, minCols)
		case wantMode == "ops" && (drawn == 0 || drawn > maxOps || cols != 0):
			t.Errorf("step %d: zoomed in, drew %d ops and %d band columns; want 1 to %d and none", k, drawn, cols, maxOps)
		}
	}
}
