package lincheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// checkText parses and checks an in-memory history against cas-register
// with initial value 0.
func checkText(t *testing.T, name, src string, format history.Format) *Report {
	t.Helper()
	h, err := history.Parse(name, []byte(src), format)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Lookup("cas-register")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), name, h, Options{Model: m, Initial: int64(0), HasInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const dataOpen = `<script type="application/json" id="data">`

// render writes r's page and decodes the JSON document embedded in it, read
// the way a browser would: up to the first "</script>" after its start.
func render(t *testing.T, r *Report) (string, pageData) {
	t.Helper()
	return renderWith(t, r, HTMLOptions{})
}

// renderWith is render with options.
func renderWith(t *testing.T, r *Report, o HTMLOptions) (string, pageData) {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteHTMLWith(&buf, o); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	i := strings.Index(page, dataOpen)
	if i < 0 {
		t.Fatalf("page has no %s element", dataOpen)
	}
	body := page[i+len(dataOpen):]
	j := strings.Index(body, "</script>")
	if j < 0 {
		t.Fatal("data element is never closed")
	}
	var d pageData
	dec := json.NewDecoder(strings.NewReader(body[:j]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("embedded JSON does not decode: %v", err)
	}
	return page, d
}

// opWant is what one bar should say.
type opWant struct {
	desc          string
	lane, row     int
	call, end     int
	n             int
	before, after string
	failed        bool
}

func checkOps(t *testing.T, got []pageOp, want []opWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d ops on the page, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Desc != w.desc || g.Lane != w.lane || g.Row != w.row || g.Call != w.call || g.End != w.end ||
			g.N != w.n || g.Before != w.before || g.After != w.after || g.Failed != w.failed {
			t.Errorf("op %d: got %q lane %d row %d [%d,%d] #%d %q→%q failed=%v\nwant %q lane %d row %d [%d,%d] #%d %q→%q failed=%v",
				i, g.Desc, g.Lane, g.Row, g.Call, g.End, g.N, g.Before, g.After, g.Failed,
				w.desc, w.lane, w.row, w.call, w.end, w.n, w.before, w.after, w.failed)
		}
	}
}

func laneNames(p pagePart) []string {
	var out []string
	for _, l := range p.Lanes {
		out = append(out, l.Process+"×"+strconv.Itoa(l.Rows))
	}
	return out
}

// Knossos's rethink-fail-minimal: the register is 0, then a read returns 3
// while a write of 4 is in flight.
const rethinkFailMinimal = `
{:type :invoke, :f :write, :value 0, :process 0}
{:type :ok, :f :write, :value 0, :process 0}
{:type :invoke, :f :read, :value nil, :process 1}
{:type :invoke, :f :write, :value 4, :process 2}
{:type :ok, :f :read, :value 3, :process 1}
{:type :ok, :f :write, :value 4, :process 2}
{:type :invoke, :f :read, :value nil, :process 3}
{:type :ok, :f :read, :value 4, :process 3}
`

func TestHTMLInvalid(t *testing.T) {
	r := checkText(t, "rethink-fail-minimal.edn", rethinkFailMinimal, history.EDN)
	_, d := render(t, r)
	if d.Valid != "false" || d.Verdict != "NOT linearizable" || d.Ops != 4 || d.Events != 8 || d.Omitted != 0 || d.Index != nil {
		t.Errorf("header: valid %q verdict %q ops %d events %d omitted %d index %v",
			d.Valid, d.Verdict, d.Ops, d.Events, d.Omitted, d.Index)
	}
	if f := d.Failure; f == nil || f.Process != "1" || f.Op != "read → 3" || f.Invoke != 2 || f.Complete != 4 || f.Reason != r.Failure.Reason {
		t.Errorf("failure = %+v", d.Failure)
	}
	if len(d.Parts) != 1 {
		t.Fatalf("%d partitions, want 1", len(d.Parts))
	}
	p := d.Parts[0]
	if got := strings.Join(laneNames(p), " "); got != "0×1 1×1 2×1 3×1" {
		t.Errorf("lanes = %s", got)
	}
	if p.Valid != "false" || p.Order != 2 || p.Final != "4" {
		t.Errorf("partition: valid %q order %d final %q, want false 2 4", p.Valid, p.Order, p.Final)
	}
	checkOps(t, p.Ops, []opWant{
		{desc: "write 0", lane: 0, call: 0, end: 1, n: 1, before: "0", after: "0"},
		{desc: "read → 3", lane: 1, call: 2, end: 4, failed: true},
		{desc: "write 4", lane: 2, call: 3, end: 5, n: 2, before: "0", after: "4"},
		{desc: "read → 4", lane: 3, call: 6, end: 7},
	})
}

// TestHTMLNames checks the names the page gives processes: the default
// "p" and the number, or the caller's, in the lanes and the header; and
// each op's value in JSON, the timeline's notation.
func TestHTMLNames(t *testing.T) {
	r := checkText(t, "rethink-fail-minimal.edn", rethinkFailMinimal, history.EDN)
	_, d := render(t, r)
	var names []string
	for _, l := range d.Parts[0].Lanes {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, "|"); got != "p0|p1|p2|p3" || d.Failure.Name != "p1" {
		t.Errorf("default names: lanes %s, failure %q", got, d.Failure.Name)
	}
	_, d = renderWith(t, r, HTMLOptions{Names: func(p history.Process) string {
		if p == 1 {
			return "client 1"
		}
		if p == 3 {
			return "provider"
		}
		return ""
	}})
	names = nil
	for _, l := range d.Parts[0].Lanes {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, "|"); got != "p0|client 1|p2|provider" || d.Failure.Name != "client 1" || d.Failure.Process != "1" {
		t.Errorf("given names: lanes %s, failure %q (process %q)", got, d.Failure.Name, d.Failure.Process)
	}
	var vals []string
	for _, o := range d.Parts[0].Ops {
		vals = append(vals, o.Value)
	}
	if got := strings.Join(vals, "|"); got != "0|→ 3|4|→ 4" {
		t.Errorf("values = %s", got)
	}
	// A list is JSON's [1,2], not EDN's [1 2].
	_, d = render(t, checkText(t, "cas-valid.edn", casValid, history.EDN))
	for _, o := range d.Parts[0].Ops {
		if o.F == "cas" && o.Value != "[1,2]" {
			t.Errorf("cas value = %q, want [1,2]", o.Value)
		}
	}
}

// A valid history with a concurrent read and cas, a failed write (left off
// the page), and a crashed write of 5 whose process goes on to read 5, so
// the write must be linearized and shares its lane with a later op.
const casValid = `
{:type :invoke, :f :write, :value 1, :process 0, :time 1000}
{:type :ok, :f :write, :value 1, :process 0, :time 2500}
{:type :invoke, :f :cas, :value [1 2], :process 1}
{:type :invoke, :f :read, :value nil, :process 2}
{:type :ok, :f :read, :value 1, :process 2}
{:type :ok, :f :cas, :value [1 2], :process 1}
{:type :invoke, :f :write, :value 9, :process 4}
{:type :fail, :f :write, :value 9, :process 4}
{:type :invoke, :f :read, :value nil, :process 0}
{:type :ok, :f :read, :value 2, :process 0}
{:type :invoke, :f :write, :value 5, :process 3}
{:type :info, :f :write, :value 5, :process 3, :error :timeout}
{:type :invoke, :f :read, :value nil, :process 3}
{:type :ok, :f :read, :value 5, :process 3}
`

func TestHTMLValid(t *testing.T) {
	r := checkText(t, "cas-valid.edn", casValid, history.EDN)
	_, d := render(t, r)
	if d.Valid != "true" || d.Verdict != "linearizable" || d.Failure != nil || d.Ops != 7 || d.Events != 14 || d.Omitted != 1 {
		t.Errorf("header: valid %q verdict %q failure %v ops %d events %d omitted %d",
			d.Valid, d.Verdict, d.Failure, d.Ops, d.Events, d.Omitted)
	}
	if len(d.Parts) != 1 {
		t.Fatalf("%d partitions, want 1", len(d.Parts))
	}
	p := d.Parts[0]
	if got := strings.Join(laneNames(p), " "); got != "0×1 1×1 2×1 3×2" {
		t.Errorf("lanes = %s", got)
	}
	if p.Valid != "true" || p.Order != 6 || p.Final != "5" {
		t.Errorf("partition: valid %q order %d final %q, want true 6 5", p.Valid, p.Order, p.Final)
	}
	checkOps(t, p.Ops, []opWant{
		{desc: "write 1", lane: 0, call: 0, end: 1, n: 1, before: "0", after: "1"},
		{desc: "cas 1 → 2", lane: 1, call: 2, end: 5, n: 3, before: "1", after: "2"},
		{desc: "read → 1", lane: 2, call: 3, end: 4, n: 2, before: "1", after: "1"},
		{desc: "read → 2", lane: 0, call: 8, end: 9, n: 4, before: "2", after: "2"},
		// Pending: drawn to the end of the history, in its own row.
		{desc: "write 5", lane: 3, row: 0, call: 10, end: 14, n: 5, before: "2", after: "5"},
		{desc: "read → 5", lane: 3, row: 1, call: 12, end: 13, n: 6, before: "5", after: "5"},
	})
	w := p.Ops[0]
	if w.T0 != 1000 || w.T1 != 2500 || w.Pending || w.Type != "ok" || w.Invoke != 0 || w.Done != 1 {
		t.Errorf("write 1: t0 %d t1 %d pending %v type %q invoke %d done %d", w.T0, w.T1, w.Pending, w.Type, w.Invoke, w.Done)
	}
	c := p.Ops[4]
	if !c.Pending || c.Type != "info" || c.Done != 11 || c.Err != `"timeout"` || c.T0 != 0 || c.T1 != 0 {
		t.Errorf("crashed write: pending %v type %q done %d err %q t0 %d t1 %d", c.Pending, c.Type, c.Done, c.Err, c.T0, c.T1)
	}
}

// A value holding "</script>" must stay inside the data element.
func TestHTMLScriptInValue(t *testing.T) {
	const evil = `</script><!--<script>alert(1)</script>`
	src := fmt.Sprintf(`{"index":10,"type":"invoke","process":0,"f":"write","value":%q}
{"index":11,"type":"ok","process":0,"f":"write","value":%q}
`, evil, evil)
	r := checkText(t, `a</script>.jsonl`, src, history.JSONL)
	page, d := render(t, r)
	// The page's own three script elements, and no more.
	if n := strings.Count(strings.ToLower(page), "</script"); n != 3 {
		t.Errorf("page has %d </script, want 3", n)
	}
	if strings.Contains(page, "<!--<script>") {
		t.Error("page holds the value's <!--<script> raw")
	}
	if len(d.Parts) != 1 || len(d.Parts[0].Ops) != 1 {
		t.Fatalf("parts = %+v", d.Parts)
	}
	op := d.Parts[0].Ops[0]
	if !strings.Contains(op.Desc, evil) || !strings.Contains(op.After, evil) || op.N != 1 {
		t.Errorf("op = %+v, want the value intact and linearized first", op)
	}
	if d.File != `a</script>.jsonl` || !strings.Contains(page, "<title>a&lt;/script&gt;.jsonl") {
		t.Errorf("file %q, or title not escaped", d.File)
	}
	if want := []int64{10, 11}; len(d.Index) != 2 || d.Index[0] != want[0] || d.Index[1] != want[1] || op.Invoke != 10 || op.Done != 11 {
		t.Errorf("index %v, op invoke %d done %d; want %v, 10, 11", d.Index, op.Invoke, op.Done, want)
	}
}

// A search stopped before it began marks nothing: no order, no failure.
func TestHTMLUnknown(t *testing.T) {
	h, err := history.Parse("stopped.edn", []byte(rethinkFailMinimal), history.EDN)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Lookup("cas-register")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Check(ctx, "stopped.edn", h, Options{Model: m, Initial: int64(0), HasInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	_, d := render(t, r)
	if d.Valid != "unknown" || d.Verdict != "unknown" || d.Reason != linear.ReasonTimeout || d.Failure != nil || len(d.Parts) != 1 {
		t.Fatalf("header: valid %q verdict %q reason %q failure %v, %d parts", d.Valid, d.Verdict, d.Reason, d.Failure, len(d.Parts))
	}
	p := d.Parts[0]
	if p.Valid != "unknown" || p.Reason != linear.ReasonTimeout || p.Order != 0 || p.Final != "" || len(p.Ops) != 4 {
		t.Errorf("partition: valid %q reason %q order %d final %q, %d ops", p.Valid, p.Reason, p.Order, p.Final, len(p.Ops))
	}
	for i, op := range p.Ops {
		if op.N != 0 || op.Failed || op.Before != "" {
			t.Errorf("op %d %q is marked: #%d failed=%v before %q", i, op.Desc, op.N, op.Failed, op.Before)
		}
	}
}

func TestHTMLNeedsHistory(t *testing.T) {
	err := (&Report{File: "x.edn"}).WriteHTML(io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no history") {
		t.Errorf("WriteHTML without a history: %v", err)
	}
}

var (
	bodyTag = regexp.MustCompile(`<body\b[^>]*>`)
	dataRe  = regexp.MustCompile(`\bdata-([a-z]+)="([^"]*)"`)
)

// browse loads the page at path in headless chromium and returns the data
// attributes the page's scripts set on <body>, such as drawn (how many bars
// were drawn) and errors.
func browse(t *testing.T, chromium, path string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a hang guard: a loaded machine took 147 s
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000",
		"--dump-dom", "file://"+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium on %s: %v\n%s", path, err, stderr.Bytes())
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

// drawn returns how many bars the page drew, failing when it did not finish.
func drawn(t *testing.T, attrs map[string]string) int {
	t.Helper()
	n, err := strconv.Atoi(attrs["drawn"])
	if err != nil {
		t.Fatalf("the page did not finish drawing: body data %v", attrs)
	}
	return n
}

// partOps counts the operations the page must draw.
func partOps(r *Report) int {
	n := 0
	for _, p := range r.parts {
		n += len(p.Ops)
	}
	return n
}

// writePage writes r's page into dir, with extra inserted before </body>,
// and returns its path.
func writePage(t *testing.T, dir string, r *Report, extra string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(buf.String(), "</body>", extra+"</body>", 1)
	path := filepath.Join(dir, "page.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// interact drives the page's controls the way a person would and records
// on <body> what the tooltip said: hover a linearized bar, leave it, zoom
// with the buttons and ctrl-wheel, fold and unfold a partition, focus a
// bar, press "show failing op", then Escape.
const interact = `<script>
(function () {
  var b = document.body, tip = document.getElementById("tip"), chart = document.getElementById("chart");
  function button(text) {
    return [].filter.call(document.querySelectorAll(".tools button"), function (x) { return x.textContent === text; })[0];
  }
  var bar = document.querySelector(".bar.lin");
  bar.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, clientX: 20, clientY: 20 }));
  b.dataset.hover = tip.textContent;
  bar.dispatchEvent(new MouseEvent("mouseout", { bubbles: true }));
  b.dataset.left = tip.style.display;
  button("+").click();
  button("\u2212").click();
  button("fit").click();
  chart.dispatchEvent(new WheelEvent("wheel", { deltaY: -100, ctrlKey: true, clientX: 300, clientY: 300, bubbles: true, cancelable: true }));
  var head = document.querySelector(".phead");
  head.click();
  b.dataset.folded = String(head.parentNode.classList.contains("shut"));
  head.click();
  bar.focus();
  button("show failing op").click();
  b.dataset.tip = tip.textContent;
  document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
  b.dataset.escaped = tip.style.display;
})();
</script>
`

func TestHTMLInBrowser(t *testing.T) {
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	corpus := testenv.Corpus(t)
	cas, err := model.Lookup("cas-register")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := model.Lookup("kv")
	if err != nil {
		t.Fatal(err)
	}
	casOpts := Options{Model: cas, Initial: int64(0), HasInitial: true}
	for _, c := range []struct {
		name  string
		load  func(t *testing.T) (*history.History, error)
		opt   Options
		valid linear.Verdict
		ops   int
		parts int
	}{
		{"cas-failure", func(*testing.T) (*history.History, error) {
			return history.ReadFile(filepath.Join(corpus, "knossos/cas-register/bad/cas-failure.edn"), history.EDN)
		}, casOpts, linear.False, 291, 1},
		{"memstress3-0", func(*testing.T) (*history.History, error) {
			return history.ReadFile(filepath.Join(corpus, "knossos/cas-register/good/memstress3-0.edn"), history.EDN)
		}, casOpts, linear.True, 317, 1},
		{"script-value", func(*testing.T) (*history.History, error) {
			return history.Parse("x.edn", []byte(`
{:type :invoke, :f :write, :value "</script><script>throw 1</script>", :process 0}
{:type :ok, :f :write, :value "</script><script>throw 1</script>", :process 0}`), history.EDN)
		}, casOpts, linear.True, 1, 1},
		{"synthetic-kv-10000", func(t *testing.T) (*history.History, error) {
			return history.Parse("synthetic.jsonl", syntheticKV(t, 10000, 8, 10), history.JSONL)
		}, Options{Model: kv}, linear.True, 10000, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, err := c.load(t)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Check(context.Background(), c.name, h, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if r.Valid != c.valid || r.Ops != c.ops || len(r.parts) != c.parts {
				t.Fatalf("valid %v, %d ops in %d partitions; want %v, %d in %d", r.Valid, r.Ops, len(r.parts), c.valid, c.ops, c.parts)
			}
			want := partOps(r)
			if n := drawn(t, browse(t, chromium, writePage(t, t.TempDir(), r, ""))); n != want || n == 0 {
				t.Errorf("drew %d ops, want %d", n, want)
			}
		})
	}
}

// TestHTMLInteraction drives the page of a failing history in chromium.
func TestHTMLInteraction(t *testing.T) {
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	r := checkText(t, "rethink-fail-minimal.edn", rethinkFailMinimal, history.EDN)
	got := browse(t, chromium, writePage(t, t.TempDir(), r, interact))
	if n := drawn(t, got); n != 4 {
		t.Errorf("drew %d ops, want 4", n)
	}
	want := map[string]string{
		// The first linearized bar is the write of 0, #1 of the prefix.
		// The lane's name, then the history's value in the timeline's
		// notation (JSON).
		"hover": "write 0p0 · f write · okvalue 0invoked at event 0, ok at event 1" +
			"#1 of 2 in the longest linearizable prefixstate 0 → 0",
		"left":   "none",
		"folded": "true",
		"tip": "read → 3p1 · f read · okvalue → 3invoked at event 2, ok at event 4" +
			"no linearization gets past this op: the longest linearizable prefix (2 ops) ends in state 4",
		"escaped": "none",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

// syntheticKV writes a linearizable kv history of n operations by procs
// concurrent clients over keys keys, as JSON Lines. Every operation takes
// effect when it completes, so the history is linearizable by construction;
// some puts fail (and do not take effect) and some crash (info: they take
// effect, and the client continues as a new process), as in Jepsen.
func syntheticKV(t testing.TB, n, procs, keys int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	type call struct {
		f, key, val string
		busy        bool
	}
	state := map[string]string{}
	calls := make([]call, procs)
	ids := make([]int, procs) // each client's current process number
	for i := range ids {
		ids[i] = i
	}
	var out bytes.Buffer
	pos := 0
	// Keys and values are plain ASCII, so %q writes them as JSON strings.
	emit := func(client int, typ string, f string, key string, val any) {
		v := "null"
		if s, ok := val.(string); ok {
			v = strconv.Quote(s)
		}
		fmt.Fprintf(&out, `{"index":%d,"type":%q,"process":%d,"f":%q,"value":[%q,%s],"time":%d}`+"\n",
			pos, typ, ids[client], f, key, v, int64(pos)*1500)
		pos++
	}
	issued, open := 0, 0
	for issued < n || open > 0 {
		c := rng.IntN(procs)
		cl := &calls[c]
		switch {
		case !cl.busy && issued < n:
			*cl = call{f: "get", key: "k" + strconv.Itoa(rng.IntN(keys)), busy: true}
			var val any
			if rng.IntN(2) == 0 {
				cl.f, cl.val = "put", "v"+strconv.Itoa(issued)
				val = cl.val
			}
			emit(c, "invoke", cl.f, cl.key, val)
			issued++
			open++
		case cl.busy:
			cl.busy = false
			open--
			switch {
			case cl.f == "get":
				emit(c, "ok", "get", cl.key, state[cl.key])
			case issued%97 == 0:
				emit(c, "fail", "put", cl.key, cl.val)
			case issued%401 == 0:
				state[cl.key] = cl.val
				emit(c, "info", "put", cl.key, cl.val)
				ids[c] += procs
			default:
				state[cl.key] = cl.val
				emit(c, "ok", "put", cl.key, cl.val)
			}
		}
	}
	return out.Bytes()
}

// The page shows states in JSON, as it shows operations: a set's state is
// JSON's ["a","b"], a register's unset value null, not the models' own
// text notation (#{"a" "b"}, nil) that the terminal uses.
func TestHTMLStatesInJSON(t *testing.T) {
	src := `{"type":"invoke","f":"add","value":"a","process":0}
{"type":"ok","f":"add","value":"a","process":0}
{"type":"invoke","f":"add","value":"b","process":1}
{"type":"ok","f":"add","value":"b","process":1}
{"type":"invoke","f":"read","value":null,"process":0}
{"type":"ok","f":"read","value":["a","b"],"process":0}
`
	h, err := history.Parse("set.jsonl", []byte(src), history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Lookup("set")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), "set.jsonl", h, Options{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	_, d := render(t, r)
	var states []string
	for _, o := range d.Parts[0].Ops {
		states = append(states, o.Before+" → "+o.After)
	}
	if got := strings.Join(states, " | "); got != `[] → ["a"] | ["a"] → ["a","b"] | ["a","b"] → ["a","b"]` || d.Parts[0].Final != `["a","b"]` {
		t.Errorf("set states on the page: %s; final %s", got, d.Parts[0].Final)
	}
	// A register read before any write: null, as the operations say it.
	reg, err := model.Lookup("register")
	if err != nil {
		t.Fatal(err)
	}
	h, err = history.Parse("reg.jsonl", []byte(`{"type":"invoke","f":"read","value":null,"process":0}
{"type":"ok","f":"read","value":null,"process":0}
`), history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	r, err = Check(context.Background(), "reg.jsonl", h, Options{Model: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, d := render(t, r); d.Parts[0].Final != "null" {
		t.Errorf("an unset register on the page: %q, want null", d.Parts[0].Final)
	}
}
