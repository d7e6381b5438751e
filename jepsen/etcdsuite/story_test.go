package etcdsuite

import (
	"bytes"
	"context"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
)

// cycleHistory is a list-append history with a write-read cycle (G1c):
// client 0's transaction appends 1 to x and reads y = [1]; client 1's
// appends 1 to y and reads x = [1]: each saw the other's write, so
// neither came first. Client 0 then goes on and fails a transaction,
// client 1 times out on one and goes on as p3 (concurrency 2), during a
// partition of n1.
func cycleHistory() []history.Event {
	ms := 1e6
	v := func(mops ...[]history.Value) []history.Value {
		out := make([]history.Value, len(mops))
		for i, m := range mops {
			out[i] = m
		}
		return out
	}
	r := func(k string, val history.Value) []history.Value { return []history.Value{"r", k, val} }
	a := func(k string, n int64) []history.Value { return []history.Value{"append", k, n} }
	events := []history.Event{
		{Process: history.Nemesis, Type: history.Invoke, F: "start-partition", Value: "n1", Time: int64(50 * ms)},
		{Process: history.Nemesis, Type: history.Info, F: "start-partition", Value: "isolated n1", Time: int64(51 * ms)},
		{Process: 0, Type: history.Invoke, F: "txn", Value: v(a("x", 1), r("y", nil)), Time: int64(100 * ms)},
		{Process: 1, Type: history.Invoke, F: "txn", Value: v(a("y", 1), r("x", nil)), Time: int64(110 * ms)},
		{Process: 0, Type: history.OK, F: "txn", Value: v(a("x", 1), r("y", []history.Value{int64(1)})), Time: int64(200 * ms)},
		{Process: 1, Type: history.OK, F: "txn", Value: v(a("y", 1), r("x", []history.Value{int64(1)})), Time: int64(210 * ms)},
		{Process: 0, Type: history.Invoke, F: "txn", Value: v(a("x", 2)), Time: int64(300 * ms)},
		{Process: 0, Type: history.Fail, F: "txn", Value: v(a("x", 2)), Error: "conflict", Time: int64(310 * ms)},
		{Process: 1, Type: history.Invoke, F: "txn", Value: v(a("y", 2)), Time: int64(400 * ms)},
		{Process: 1, Type: history.Info, F: "txn", Value: v(a("y", 2)), Error: "timeout", Time: int64(900 * ms)},
		{Process: 3, Type: history.Invoke, F: "txn", Value: v(r("x", nil)), Time: int64(1000 * ms)},
		{Process: 3, Type: history.OK, F: "txn", Value: v(r("x", []history.Value{int64(1)})), Time: int64(1100 * ms)},
		{Process: history.Nemesis, Type: history.Invoke, F: "stop-partition", Time: int64(1200 * ms)},
		{Process: history.Nemesis, Type: history.Info, F: "stop-partition", Time: int64(1201 * ms)},
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	return events
}

// storyRun checks cycleHistory as the etcd test's list-append run does,
// inside withStory, writing its pages into a temporary folder.
func storyRun(t *testing.T) (*checker.Run, checker.Result) {
	t.Helper()
	dir := t.TempDir()
	r, err := checker.NewRun("etcd", cycleHistory(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := withStory(2, checker.Compose(map[string]checker.Checker{
		"transactional": explained(checker.Transactional(checker.TransactionalOptions{
			Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "strict-serializable"},
		})),
		"stats": checker.Stats(),
		"perf":  checker.Perf(),
	})).Check(t.Context(), r)
	if res.Valid != linear.False {
		t.Fatalf("verdict %v, want false: %+v", res.Valid, res.Checkers["transactional"].Fields)
	}
	return r, res
}

func TestStory(t *testing.T) {
	r, res := storyRun(t)
	o := story(r, res)
	if o.Verdict != "invalid" || o.Names(3) != "client 1 (p3)" || o.Names(history.Nemesis) != "nemesis" {
		t.Errorf("verdict %q, names %q %q", o.Verdict, o.Names(3), o.Names(history.Nemesis))
	}
	var names []string
	for _, c := range o.Checkers {
		names = append(names, c.Name+" "+c.Verdict)
	}
	if got := strings.Join(names, "|"); got != "transactional false|stats true|perf true|outcomes 1 failed, 1 indeterminate|nemesis 1 faults" {
		t.Errorf("header = %s", got)
	}
	tx := o.Checkers[0]
	if len(tx.Findings) == 0 || !tx.Findings[0].Timed || tx.Findings[0].At != 100*time.Millisecond || tx.Findings[0].End != 210*time.Millisecond ||
		!strings.HasPrefix(tx.Findings[0].Text, "G1c: ") {
		t.Errorf("transactional findings = %+v", tx.Findings)
	}
	// The two transactions of the cycle are marked, at their invokes.
	if len(o.Marks) != 2 || o.Marks[2] != "in G1c #1" || o.Marks[3] != "in G1c #1" {
		t.Errorf("marks = %v", o.Marks)
	}
	out := o.Checkers[3].Findings
	if len(out) != 2 || out[0].Text != `indeterminate txn of client 1 at 0.400s: "timeout"` || out[1].Text != `failed txn of client 0 at 0.300s: "conflict"` ||
		out[0].At != 400*time.Millisecond || out[0].End != 900*time.Millisecond {
		t.Errorf("outcomes = %+v", out)
	}
	nem := o.Checkers[4].Findings
	if len(nem) != 1 || !nem[0].Timed || nem[0].At != 50*time.Millisecond || nem[0].End != 1201*time.Millisecond ||
		!strings.HasPrefix(nem[0].Text, "partition") {
		t.Errorf("nemesis = %+v", nem)
	}
}

var (
	bodyTag = regexp.MustCompile(`<body\b[^>]*>`)
	dataRe  = regexp.MustCompile(`\bdata-([a-z]+)="([^"]*)"`)
)

// browse loads the page at path in headless chromium, with script
// inserted before </body>, and returns the data attributes the page's
// scripts set on <body>. A script error, caught by the page's onerror
// (data-errors) or logged by chromium as "Uncaught", fails the test.
func browse(t *testing.T, path, script string) map[string]string {
	t.Helper()
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page = bytes.Replace(page, []byte("</body>"), []byte(script+"</body>"), 1)
	probe := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(probe, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--window-size=1400,900",
		"--dump-dom", "file://"+probe)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium on %s: %v\n%s", path, err, stderr.Bytes())
	}
	if bytes.Contains(stderr.Bytes(), []byte("Uncaught")) || bytes.Contains(out, []byte("Uncaught")) {
		t.Errorf("chromium on %s logged an uncaught error:\n%s", path, stderr.Bytes())
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
	return attrs
}

// readStory records the header's verdict and checker lines, the findings
// that are links, the moment the first one focused on (data-focus, set by
// the page), the lanes, and the tooltip of a marked transaction.
const readStory = `<script>
(function () {
  var b = document.body, tip = document.getElementById("tip"), view = document.getElementById("view");
  b.dataset.head = document.querySelector(".verdict").textContent + "|" +
    [].map.call(document.querySelectorAll(".ck"), function (x) { return x.textContent; }).join("|");
  var go = document.querySelectorAll(".finds li.go");
  b.dataset.links = String(go.length) + "/" + document.querySelectorAll(".finds li").length;
  go[0].click();
  b.dataset.first = go[0].textContent;
  document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
  var D = JSON.parse(document.getElementById("data").textContent), marked = -1;
  for (var k in D.mk) { marked = +k; break; }
  b.dataset.lanes = D.lanes.join("|");
  var r = timeline.box(marked);
  view.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r.x + Math.min(r.w / 2, 20), clientY: r.y + r.h / 2 }));
  b.dataset.marked = tip.textContent;
})();
</script>
`

// TestStoryInBrowser loads the story timeline of the cycle in chromium: the
// verdict and the anomaly head the page, the anomaly's link focuses on the
// cycle's transactions, which are marked, and the lanes carry names.
func TestStoryInBrowser(t *testing.T) {
	r, _ := storyRun(t)
	got := browse(t, filepath.Join(r.Dir, "timeline.html"), readStory)
	for k, w := range map[string]string{
		"head":   "INVALID|transactional false|stats true · 3 ok, 1 failed, 1 indeterminate|perf true|outcomes 1 failed, 1 indeterminate · failed ops",
		"links":  "4/4",
		"first":  "transactionalG1c: ",
		"focus":  "100000",
		"lanes":  "nemesis|client 0|client 1|client 1 (p3)",
		"marked": "client 0 · txn",
	} {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s = %q, want it to begin %q", k, got[k], w)
		}
	}
	if !strings.Contains(got["marked"], "marked: in G1c #1") {
		t.Errorf("marked transaction's tooltip = %q", got["marked"])
	}
}
