package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/internal/testonly/timelinepage"
	"github.com/ipfence/ipfence/verify/history"
)

const evil = `</script><!--<script>throw 1</script>`

// small is a hand-made history with one of everything: three workers, of
// which p1 crashes (info) and goes on as p4; a failed write; a partition
// made and healed by the nemesis; a value holding "</script>"; and p2's
// read, which never completes.
func small() ([]history.Event, []Fault) {
	var b builder
	b.invoke(0, "write", int64(1), 0)
	b.invoke(1, "read", nil, 1)
	b.invoke(2, "write", int64(2), 1.5)
	b.done(0, history.OK, "write", int64(1), 2)
	b.done(1, history.OK, "read", int64(1), 3)
	b.invoke(history.Nemesis, "start-partition", "halves", 4)
	b.doneErr(2, history.Fail, "write", int64(2), "rejected", 4)
	b.done(history.Nemesis, history.Info, "start-partition", "[n1 n2] [n3]", 4.25)
	b.invoke(1, "cas", []history.Value{int64(1), int64(3)}, 5)
	b.invoke(0, "write", evil, 6)
	b.done(0, history.OK, "write", evil, 7)
	b.invoke(history.Nemesis, "stop-partition", nil, 8)
	b.done(history.Nemesis, history.Info, "stop-partition", "healed", 8.5)
	b.doneErr(1, history.Info, "cas", []history.Value{int64(1), int64(3)}, "timeout", 9)
	b.invoke(4, "read", nil, 10)
	b.done(4, history.OK, "read", int64(3), 11)
	b.invoke(2, "read", nil, 12)
	return b.events, []Fault{
		{Name: "partition halves", Start: 4 * time.Millisecond, End: 8 * time.Millisecond},
		{Name: "pause n1", Start: 9 * time.Millisecond},
	}
}

const dataOpen = `<script type="application/json" id="data">`

// timelinePage writes the page and decodes its JSON document the way a
// browser finds it: up to the first "</script" after its start.
func timelinePage(t *testing.T, title string, events []history.Event, faults []Fault) (string, decoded) {
	t.Helper()
	var buf bytes.Buffer
	if err := Timeline(&buf, title, events, faults); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	return page, decodePage(t, page)
}

// decoded is a page's JSON document with its ops decoded.
type decoded struct {
	timelineData
	timelinepage.Ops
}

// decodePage decodes a page's JSON document the way a browser finds it,
// and its ops.
func decodePage(t *testing.T, page string) decoded {
	t.Helper()
	i := strings.Index(page, dataOpen)
	if i < 0 {
		t.Fatalf("page has no %s element", dataOpen)
	}
	body := page[i+len(dataOpen):]
	j := strings.Index(strings.ToLower(body), "</script")
	if j < 0 {
		t.Fatal("data element is never closed")
	}
	var d timelineData
	dec := json.NewDecoder(strings.NewReader(body[:j]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("embedded JSON does not decode: %v", err)
	}
	ops, err := timelinepage.Decode(d.Ops, d.N)
	if err != nil {
		t.Fatal(err)
	}
	if d.Vals, err = timelinepage.DecodeVals(d.ValT, d.ValN); err != nil {
		t.Fatal(err)
	}
	return decoded{d, ops}
}

// row is one op of the page, decoded.
type row struct {
	lane       string
	start, dur int64 // µs
	out        string
	f, v, err  string
}

func rows(d decoded) []row {
	var out []row
	for i := range d.Lane {
		r := row{d.Lanes[d.Lane[i]], d.Start[i], d.Dur[i], outcomeNames[d.Out[i]-'0'], d.Fs[d.F[i]], d.Vals[d.Val[i]], ""}
		if e, ok := d.Err[i]; ok {
			r.err = d.Vals[e]
		}
		out = append(out, r)
	}
	return out
}

func TestTimelineData(t *testing.T) {
	events, faults := small()
	page, d := timelinePage(t, `run </script> 1`, events, faults)
	if d.Title != `run </script> 1` || !strings.Contains(page, "<title>run &lt;/script&gt; 1 — ipfence timeline</title>") {
		t.Errorf("title %q, or the <title> element is not escaped", d.Title)
	}
	if d.End != 12000 {
		t.Errorf("end = %d µs, want 12000 (the last event)", d.End)
	}
	if got, want := strings.Join(d.Lanes, " "), "nemesis p0 p1 p4 p2"; got != want {
		t.Errorf("lanes = %s, want %s", got, want)
	}
	if !slices.Equal(d.Group, []int{-1, 0, 1, 1, 2}) {
		t.Errorf("groups = %v, want [-1 0 1 1 2]: p4 continues p1's worker", d.Group)
	}
	want := []row{
		{"p0", 0, 2000, "ok", "write", "1", ""},
		{"p1", 1000, 2000, "ok", "read", "→ 1", ""},
		{"p2", 1500, 2500, "fail", "write", "2", `"rejected"`},
		{"nemesis", 4000, 250, "nemesis", "start-partition", `"halves" → "[n1 n2] [n3]"`, ""},
		{"p1", 5000, 4000, "info", "cas", "[1,3]", `"timeout"`},
		{"p0", 6000, 1000, "ok", "write", strconv.Quote(evil), ""},
		{"nemesis", 8000, 500, "nemesis", "stop-partition", `null → "healed"`, ""},
		{"p4", 10000, 1000, "ok", "read", "→ 3", ""},
		{"p2", 12000, -1, "pending", "read", "null", ""},
	}
	got := rows(d)
	if len(got) != len(want) {
		t.Fatalf("%d ops on the page, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("op %d = %+v\nwant     %+v", i, got[i], want[i])
		}
	}
	wantFaults := []pageFault{{"partition halves", 4000, 8000, false}, {"pause n1", 9000, 12000, true}}
	if !slices.Equal(d.Faults, wantFaults) {
		t.Errorf("faults = %+v, want %+v", d.Faults, wantFaults)
	}
	// The page's own three script elements, and no more: the value's
	// "</script>" and "<!--" stay inside the JSON.
	if n := strings.Count(strings.ToLower(page), "</script"); n != 3 {
		t.Errorf("page has %d </script, want 3", n)
	}
	if strings.Contains(page, "<!--") {
		t.Error("page holds the value's <!-- raw")
	}
}

func TestTimelineEmpty(t *testing.T) {
	nem := []history.Event{
		{Process: history.Nemesis, Type: history.Invoke, F: "kill", Time: ms(1)},
		{Process: history.Nemesis, Type: history.Invoke, F: "pause", Time: ms(1.5)}, // never ends
		{Process: history.Nemesis, Type: history.Info, F: "kill", Time: ms(2)},
		{Process: history.Nemesis, Type: history.Info, F: "restart", Time: ms(3)}, // no invoke: an instant
	}
	for _, c := range []struct {
		name   string
		events []history.Event
		faults []Fault
		lanes  string
		ops    int
		end    int64
	}{
		{"nothing", nil, nil, "", 0, 0},
		{"faults only", nil, []Fault{{Name: "f", Start: time.Second}}, "", 0, 1e6},
		{"nemesis only", nem, nil, "nemesis nemesis 2", 3, 3000},
		{"one pending op", []history.Event{{Process: 3, Type: history.Invoke, F: "read"}}, nil, "p3", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, d := timelinePage(t, c.name, c.events, c.faults)
			if got := strings.Join(d.Lanes, " "); got != c.lanes || len(d.Lane) != c.ops || len(d.Out) != c.ops || d.End != c.end {
				t.Errorf("lanes %q, %d ops, end %d; want %q, %d, %d", got, len(d.Lane), d.End, c.lanes, c.ops, c.end)
			}
		})
	}
}

func TestTimelineBadInput(t *testing.T) {
	var buf bytes.Buffer
	err := Timeline(&buf, "x", []history.Event{{Process: 0, Type: history.OK, F: "read"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no open invoke") {
		t.Errorf("completion without invoke: %v", err)
	}
	err = Timeline(&buf, "x", nil, []Fault{{Name: "backwards", Start: 2 * time.Second, End: time.Second}})
	if err == nil || !strings.Contains(err.Error(), `fault "backwards"`) {
		t.Errorf("fault ending before it starts: %v", err)
	}
}

func TestWorkers(t *testing.T) {
	var b builder
	for p := range 3 {
		b.invoke(history.Process(p), "read", nil, 0)
	}
	b.done(1, history.Info, "read", nil, 1)
	b.invoke(4, "read", nil, 2) // 1 + 3 workers
	b.done(0, history.Info, "read", nil, 3)
	b.done(2, history.Info, "read", nil, 3)
	// Two workers crashed: 5 = 2 + 3 joins 2's, although 0's crashed first.
	b.invoke(5, "read", nil, 4)
	b.invoke(3, "read", nil, 4)
	b.done(4, history.Info, "read", nil, 5)
	b.invoke(7, "read", nil, 6)
	// A process that invokes again after its info keeps its worker.
	b.done(7, history.Info, "read", nil, 7)
	b.invoke(7, "write", nil, 8)
	// No worker is free: a new one.
	b.invoke(9, "read", nil, 9)
	got := fmt.Sprint(workers(b.events))
	if want := "[[0 3] [1 4 7] [2 5] [9]]"; got != want {
		t.Errorf("workers = %s, want %s", got, want)
	}
}

var (
	bodyTag = regexp.MustCompile(`<body\b[^>]*>`)
	dataRe  = regexp.MustCompile(`\bdata-([a-z]+)="([^"]*)"`)
)

// browse loads the page at path in headless chromium, within limit, and
// returns the data attributes the page's scripts set on <body> (drawn,
// errors, and whatever an injected script recorded), and how long
// chromium ran.
func browse(t *testing.T, path string, limit time.Duration, extra ...string) (map[string]string, time.Duration) {
	t.Helper()
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=10000", "--window-size=1400,900",
	}, extra...)
	args = append(args, "--dump-dom", "file://"+path)
	cmd := exec.CommandContext(ctx, chromium, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	began := time.Now()
	out, err := cmd.Output()
	took := time.Since(began)
	if err != nil {
		t.Fatalf("chromium on %s after %v: %v\n%s", path, took, err, stderr.Bytes())
	}
	body := bodyTag.Find(out)
	if body == nil {
		t.Fatalf("chromium's DOM of %s has no <body>:\n%.2000s", path, out)
	}
	attrs := map[string]string{}
	for _, m := range dataRe.FindAllSubmatch(body, -1) {
		attrs[string(m[1])] = html.UnescapeString(string(m[2]))
	}
	if attrs["errors"] != "" {
		t.Errorf("script errors in %s: %s", path, attrs["errors"])
	}
	return attrs, took
}

// writeTimeline writes the page into dir, with extra inserted before
// </body>, and returns its path and size.
func writeTimeline(t *testing.T, dir string, events []history.Event, faults []Fault, extra string) (string, int) {
	t.Helper()
	var buf bytes.Buffer
	if err := Timeline(&buf, "test", events, faults); err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(buf.String(), "</body>", extra+"</body>", 1)
	return writePage(t, dir, page), len(page)
}

// writePage writes page as dir/timeline.html and returns its path.
func writePage(t *testing.T, dir, page string) string {
	t.Helper()
	path := filepath.Join(dir, "timeline.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// interact drives the small page the way a person would and records on
// <body> what it saw: hover over p1's read, leave, click p2's pending read,
// press Escape, zoom with the buttons and ctrl + wheel, and hover over the
// partition's name in the fault strip.
const interact = `<script>
(function () {
  var b = document.body, tip = document.getElementById("tip"), view = document.getElementById("view");
  var D = JSON.parse(document.getElementById("data").textContent), O = timeline.ops;
  function find(lane, f) {
    for (var i = 0; i < O.l.length; i++) if (D.lanes[O.l[i]] === lane && D.fs[O.f[i]] === f) return i;
  }
  function at(type, i, opts) {
    var r = timeline.box(i), o = { bubbles: true, clientX: r.x + Math.min(r.w / 2, 20), clientY: r.y + r.h / 2 };
    for (var k in opts) o[k] = opts[k];
    view.dispatchEvent(new (type === "wheel" ? WheelEvent : MouseEvent)(type, o));
  }
  function button(group, text) {
    var spans = document.querySelectorAll(".tools > span");
    for (var s = 0; s < spans.length; s++) {
      if (spans[s].firstChild && spans[s].firstChild.textContent === group) {
        return [].filter.call(spans[s].querySelectorAll("button"), function (x) { return x.textContent === text; })[0];
      }
    }
  }
  var read = find("p1", "read"), pend = find("p2", "read");
  at("mousemove", read);
  b.dataset.hover = tip.textContent;
  view.dispatchEvent(new MouseEvent("mouseleave"));
  b.dataset.left = tip.style.display;
  at("click", pend);
  b.dataset.pin = tip.textContent;
  document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
  b.dataset.escaped = tip.style.display;
  var w0 = view.scrollWidth;
  button("time ", "+").click();
  var w1 = view.scrollWidth;
  at("wheel", read, { deltaY: -300, ctrlKey: true, cancelable: true });
  var w2 = view.scrollWidth;
  button("time ", "fit").click();
  b.dataset.zoom = [w1 > w0 * 1.9, w2 > w1, view.scrollWidth === w0].join(" ");
  var x = (timeline.x(4000) + timeline.x(8000)) / 2, top = view.getBoundingClientRect().top;
  view.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: x, clientY: top + 24 + 8 }));
  b.dataset.fault = tip.textContent;
  var rows = [b.dataset.rows];
  [].filter.call(document.querySelectorAll("button"), function (x) { return x.textContent === "a row per worker"; })[0].click();
  rows.push(b.dataset.rows, b.dataset.drawn);
  [].filter.call(document.querySelectorAll("button"), function (x) { return x.textContent === "a lane per process"; })[0].click();
  rows.push(b.dataset.rows, b.dataset.drawn);
  b.dataset.layouts = rows.join(" ");
})();
</script>
`

func TestTimelineInBrowser(t *testing.T) {
	events, faults := small()
	path, _ := writeTimeline(t, t.TempDir(), events, faults, interact)
	got, _ := browse(t, path, 60*time.Second)
	want := map[string]string{
		"drawn": "9",
		"hover": "process p1 · readokvalue → 1invoked at 0.001000 s, ok at 0.003000 s after 2.00 ms",
		"left":  "none",
		"pin": "process p2 · readpendingvalue nullinvoked at 0.012000 s, never completed: drawn to the end" +
			"during pause n1",
		"escaped": "none",
		"zoom":    "true true true",
		"fault":   "partition halvesfrom 0.004 s to 0.008 s (4.00 ms)",
		// A lane per process (nemesis, p0, p1, p4, p2), then a row per
		// worker (p4 joins p1), then back; every op drawn each time.
		"layouts": "5 4 9 5 9",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

// TestTimelineLarge loads a page of 100,000 operations in chromium: it
// must draw every one without a script error within a minute on a small
// machine.
func TestTimelineLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("chromium on 100,000 operations takes seconds")
	}
	const n = 100_000
	events, faults := synthetic(1, n, 10)
	dir := t.TempDir()
	if out := os.Getenv("IPFENCE_REPORT_OUT"); out != "" {
		dir = filepath.Join(out, "100k")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path, size := writeTimeline(t, dir, events, faults, "")
	got, took := browse(t, path, 60*time.Second)
	t.Logf("%d ops (%d events): page %.2f MB, chromium %v", n, len(events), float64(size)/1e6, took.Round(time.Millisecond))
	ops, nem, err := history.Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != n {
		t.Fatalf("synthetic history has %d ops, want %d", len(ops), n)
	}
	if want := strconv.Itoa(n + nemesisOps(nem)); got["drawn"] != want {
		t.Errorf("drawn = %q, want %s", got["drawn"], want)
	}
	// So many crashes that a lane per process would not fit: a row per
	// worker, and one for the nemesis.
	if got["rows"] != "11" {
		t.Errorf("rows = %q, want 11", got["rows"])
	}
}

// nemesisOps counts the nemesis's operations: its invokes.
func nemesisOps(nem []history.Event) int {
	n := 0
	for _, e := range nem {
		if e.Type == history.Invoke {
			n++
		}
	}
	return n
}

// The page's texts go as shapes and numbers and come back as they were,
// whatever digits they hold; texts of one shape share it.
func TestEncodeVals(t *testing.T) {
	vals := []string{
		"", "0", "17", "→ 17", "[17,18]", "[0,449580]", "→ 0", "null", "timeout",
		"007", "1.05", "-3", "x9", "9x", "999999999999999", "1000000000000000",
		"18446744073709551616", "a1b22c333", "p1 → 2 · ñ 3", "1 2", "[5,6]", "42",
	}
	shapes, nums := encodeVals(vals)
	got, err := timelinepage.DecodeVals(shapes, nums)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, vals) {
		t.Errorf("decoded %q\nwant    %q", got, vals)
	}
	var flat []string
	for _, s := range shapes {
		flat = append(flat, strings.Join(s, "#"))
	}
	// The numbers: at most 15 digits, no leading zero.
	want := []string{"", "#", "→ #", "[#,#]", "null", "timeout", "007", "#.05", "-#", "x#", "#x",
		"1000000000000000", "18446744073709551616", "a#b#c#", "p# → # · ñ #", "# #"}
	if !slices.Equal(flat, want) {
		t.Errorf("shapes %q\nwant   %q", flat, want)
	}
}
