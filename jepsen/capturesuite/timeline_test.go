package capturesuite

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/capturesuite/ownermodel"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// plantedRecord is a record like the planted bug's: 10.0.1.10 moves to n2
// at epoch 4, then n2's stale unassign at epoch 3 takes it off, and nobody
// holds it until n1 takes it at epoch 5.
func plantedRecord() []mutationRecord {
	const s = int64(time.Second)
	return []mutationRecord{
		{Mono: 100*s - s/2, Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10", Epoch: 1},
		{Mono: 102 * s, Call: "assign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 4, From: "eni-n1"},
		{Mono: 103 * s, Call: "ensure-forwarding-enabled", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 4, Enabled: true},
		{Mono: 104 * s, Call: "unassign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 3},
		{Mono: 106 * s, Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10", Epoch: 5},
	}
}

func TestProviderLanes(t *testing.T) {
	start := int64(100 * time.Second)
	lanes, gaps := providerLanes(plantedRecord(), start, int64(8*time.Second))
	if len(lanes) != 2 || lanes[0].Name != "provider" || lanes[1].Name != "holder 10.0.1.10" {
		t.Fatalf("lanes = %+v", lanes)
	}
	var got []string
	for _, e := range lanes[0].Events {
		got = append(got, fmt.Sprintf("%v %s %v", e.At, e.Text, e.Bad))
	}
	want := "0s assign 10.0.1.10 eni-n1 e1 false|2s assign 10.0.1.10 eni-n2 e4 false|3s forward on 10.0.1.10 eni-n2 e4 false|" +
		"4s STALE unassign 10.0.1.10 epoch 3 after 4 true|6s assign 10.0.1.10 eni-n1 e5 false"
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("provider lane = %s\nwant %s", g, want)
	}
	if d := lanes[0].Events[0].Detail; !strings.Contains(d, "0.500s before the test started") {
		t.Errorf("first mutation's detail = %q", d)
	}
	got = nil
	for _, e := range lanes[1].Events {
		got = append(got, fmt.Sprintf("%v-%v %s %v", e.At, e.End, e.Text, e.Bad))
	}
	if g, w := strings.Join(got, "|"), "0s-2s eni-n1 false|2s-4s eni-n2 false|4s-6s no holder true|6s-8s eni-n1 false"; g != w {
		t.Errorf("holder lane = %s\nwant %s", g, w)
	}
	if len(gaps) != 1 || gaps[0].holders != 0 || gaps[0].start != int64(4*time.Second) || gaps[0].end != int64(6*time.Second) {
		t.Errorf("gaps = %+v", gaps)
	}
	f := staleFindings(plantedRecord(), start)
	if len(f) != 1 || f[0].Text != "mutation 3 at 4.000s: unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 3, after epoch 4" || f[0].At != 4*time.Second {
		t.Errorf("stale findings = %+v", f)
	}
	// Its link pins its own mark in the provider lane, whatever else
	// starts in the same microsecond.
	if f[0].Pin != lanes[0].Events[3].Text {
		t.Errorf("stale finding pins %q, its lane event is %q", f[0].Pin, lanes[0].Events[3].Text)
	}
}

func TestReadMarks(t *testing.T) {
	read := func(p history.Process, at, end int64, holder history.Value) []history.Event {
		return []history.Event{
			{Process: p, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: at},
			{Process: p, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": holder}, Time: end},
		}
	}
	var events []history.Event
	events = append(events, read(0, 1e9, 1.1e9, "eni-n1")...)
	events = append(events, read(1, 5e9, 5.1e9, nil)...)
	events = append(events, read(2, 7e9, 7.1e9, "eni-n2")...)
	r, err := checker.NewRun("t", events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dual := []gap{{address: "10.0.1.10", holders: 2, nics: []string{"eni-n1", "eni-n2"}, start: 7.05e9, end: 8e9}}
	got := readMarks(r, dual)
	if len(got) != 2 || got[2] != "found no holder for 10.0.1.10" || got[4] != "ran while 10.0.1.10 was on eni-n1 and eni-n2" {
		t.Errorf("marks = %v", got)
	}
}

func TestProcessName(t *testing.T) {
	for p, want := range map[history.Process]string{history.Nemesis: "nemesis", mutationProcess: "provider", 3: "client 3", 9: "client 3 (p9)"} {
		if got := processName(p, 6); got != want {
			t.Errorf("processName(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestStory(t *testing.T) {
	start := int64(100 * time.Second)
	col := &collected{mutations: plantedRecord()}
	events := []history.Event{
		{Process: 0, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: 4.5e9},
		{Process: 0, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": nil}, Time: 4.6e9},
	}
	r, err := checker.NewRun("capture", events, "", start)
	if err != nil {
		t.Fatal(err)
	}
	res := checker.Result{Valid: linear.False, Fields: map[string]any{"checkers": map[string]checker.Result{
		"stats": {Valid: linear.True},
		"convergence": {Valid: linear.False, Fields: map[string]any{"heal_s": 6.5,
			"desired": map[string]string{"10.0.1.10": "n1", "10.0.1.11": "n2"}, "actual": map[string]string{"10.0.1.10": "n1"}}},
		"fence": {Valid: linear.False, Fields: map[string]any{"stale_actions_executed": 1}},
		"availability": {Valid: linear.False, Fields: map[string]any{"no_holder_ms": 2000.0, "outside_faults_ms": 2000.0, "periods": []outage{
			{Address: "10.0.1.10", Start: 4e9, End: 6e9, Outside: 2 * time.Second},
		}}},
	}}}
	o := story(col, 6, r, res)
	if o.Verdict != "invalid" || o.Names(history.Nemesis) != "nemesis" || o.Names(7) != "client 1 (p7)" {
		t.Errorf("verdict %q, names %q %q", o.Verdict, o.Names(history.Nemesis), o.Names(7))
	}
	var got []string
	for _, c := range o.Checkers {
		got = append(got, fmt.Sprintf("%s %s %q %d", c.Name, c.Verdict, c.Summary, len(c.Findings)))
	}
	want := `fence false "1 stale actions executed" 1|availability false "no holder 2000 ms, 2000 ms outside faults" 1|` +
		`convergence false "" 1|stats true "" 0`
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("checkers = %s\nwant %s", g, want)
	}
	if f := o.Checkers[1].Findings[0]; !f.Timed || f.At != 4*time.Second || f.End != 6*time.Second || !strings.HasPrefix(f.Text, "10.0.1.10 had no holder from 4.000s to 6.000s") {
		t.Errorf("availability finding = %+v", f)
	}
	if f := o.Checkers[2].Findings[0]; !f.Timed || f.At != 6500*time.Millisecond || f.End != 6*time.Second+500*time.Millisecond ||
		f.Text != "10.0.1.11 did not settle after the heal at 6.500s: the nodes want it on n2, the provider shows it on no NIC" {
		t.Errorf("convergence finding = %+v", f)
	}
	if len(o.Marks) != 1 || o.Marks[0] != "found no holder for 10.0.1.10" {
		t.Errorf("marks = %v", o.Marks)
	}
	if len(o.Lanes) != 2 || len(o.Lanes[0].Events) != 5 {
		t.Errorf("lanes = %+v", o.Lanes)
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
	if script != "" {
		page = bytes.Replace(page, []byte("</body>"), []byte(script+"</body>"), 1)
	}
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

// readLinear records what linear.html shows: the lanes' labels, the
// header's text, and the tooltip of the failing op once "show failing op"
// pinned it.
const readLinear = `<script>
(function () {
  var b = document.body;
  b.dataset.lanes = [].map.call(document.querySelectorAll(".names div"), function (x) { return x.textContent; }).join("|");
  b.dataset.head = document.getElementById("head").textContent;
  [].forEach.call(document.querySelectorAll(".tools button"), function (x) { if (x.textContent === "show failing op") x.click(); });
  b.dataset.tip = document.getElementById("tip").textContent;
  b.dataset.shown = document.getElementById("head").textContent + " " + document.getElementById("chart").textContent +
    " " + document.getElementById("tip").textContent;
})();
</script>
`

// readStory records what a story timeline's header shows and where its
// findings lead: the verdict, each checker's line, the number of findings
// that are links, the moment the first link focused on (data-focus, set by
// the page) with the tooltip it pinned, and the lanes' labels.
const readStory = `<script>
(function () {
  var b = document.body, tip = document.getElementById("tip");
  b.dataset.head = document.querySelector(".verdict").textContent + "|" +
    [].map.call(document.querySelectorAll(".ck"), function (x) { return x.textContent; }).join("|");
  var go = document.querySelectorAll(".finds li.go");
  b.dataset.links = String(go.length) + "/" + document.querySelectorAll(".finds li").length;
  b.dataset.texts = [].map.call(go, function (x) { return x.textContent; }).join("|");
  if (go.length) { go[0].click(); b.dataset.pinned = tip.textContent; }
  var D = JSON.parse(document.getElementById("data").textContent);
  b.dataset.lanes = D.lanes.join("|");
})();
</script>
`

// TestLinearPageNamesProcesses runs the capture test's linearizability
// checker inside its timeline story on the planted record (the stale
// unassign no order gets past) with a client that crashed and went on as
// p9, and loads linear.html and timeline.html in chromium: the provider's
// pseudo-process and the clients appear by name, the number 1099511627776
// nowhere a person sees, values in the timeline's JSON.
func TestLinearPageNamesProcesses(t *testing.T) {
	start := int64(100 * time.Second)
	col := &collected{mutations: plantedRecord()}
	read := func(p history.Process, at, end int64, holder history.Value) []history.Event {
		return []history.Event{
			{Process: p, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: at},
			{Process: p, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": holder}, Time: end},
		}
	}
	var events []history.Event
	events = append(events, read(3, 2.5e9, 2.6e9, "eni-n2")...)
	events = append(events, read(9, 4.5e9, 4.6e9, nil)...)
	for i := range events {
		events[i].Index = int64(i)
	}
	dir := t.TempDir()
	r, err := checker.NewRun("capture", events, dir, start)
	if err != nil {
		t.Fatal(err)
	}
	var m model.Model = ownermodel.Model{}
	res := withTimeline(col, 6, checker.Compose(map[string]checker.Checker{
		"linear": checker.Linearizable(checker.LinearOptions{Model: m, History: ownerHistory(col)}),
	})).Check(t.Context(), r)
	lin := res.Checkers["linear"]
	if res.Valid != linear.False || lin.Fields["page"] != "linear.html" {
		t.Fatalf("verdict %v, linear fields %v", res.Valid, lin.Fields)
	}
	got := browse(t, filepath.Join(dir, "linear.html"), readLinear)
	if !strings.Contains(got["lanes"], "client 3") || !strings.Contains(got["lanes"], "client 3 (p9)") || !strings.Contains(got["lanes"], "provider") {
		t.Errorf("linear.html's lanes = %q, want client 3, client 3 (p9) and provider", got["lanes"])
	}
	if strings.Contains(got["shown"], "1099511627776") {
		t.Errorf("linear.html shows the pseudo-process number: %q", got["shown"])
	}
	if !strings.Contains(got["head"], "provider: unassign from \"eni-n2\" at epoch 3") {
		t.Errorf("linear.html's header = %q, want the provider's stale unassign", got["head"])
	}
	if want := `value {"address":"10.0.1.10","epoch":3,"nic":"eni-n2"}`; !strings.Contains(got["tip"], "provider · f unassign") || !strings.Contains(got["tip"], want) {
		t.Errorf("failing op's tooltip = %q, want the provider's unassign with %s", got["tip"], want)
	}

	st := browse(t, filepath.Join(dir, "timeline.html"), readStory)
	if !strings.HasPrefix(st["head"], "INVALID|linear false") {
		t.Errorf("timeline header = %q", st["head"])
	}
	if !strings.Contains(st["lanes"], "client 3 (p9)") || strings.Contains(st["lanes"], "1099511627776") {
		t.Errorf("timeline lanes = %q", st["lanes"])
	}
	// The linear finding is placed at the stale unassign, 4 s in; the
	// outage it caused follows.
	want := "linearaddress 10.0.1.10: no order of the operations gets past unassign from \"eni-n2\" at epoch 3 (state: held by \"eni-n2\" at epoch 4), at 4.000s|" +
		"no holder10.0.1.10 no holder from 4.000s to 6.000s (2s)"
	if st["links"] != "2/2" || st["texts"] != want {
		t.Errorf("links %q: %q\nwant %s", st["links"], st["texts"], want)
	}
	if st["focus"] != "4000000" || !strings.Contains(st["pinned"], "provider · STALE unassign 10.0.1.10 epoch 3 after 4") {
		t.Errorf("focus %q, pinned %q", st["focus"], st["pinned"])
	}
}
