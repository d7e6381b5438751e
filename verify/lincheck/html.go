package lincheck

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"slices"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// The page is a fixed HTML shell around one JSON document (pageData) that a
// script draws. The Go side only gathers what the script needs as plain
// strings and numbers: every model-specific rendering (operations, states)
// is done here with linear.OpString and pageState, so the script knows
// nothing of models.
//
// Escaping: the shell is constant text, and the only data written into it
// are the title, escaped with html.EscapeString, and the JSON document,
// which goes into a <script type="application/json"> element. Inside a
// script element the HTML tokenizer looks for "</script" (and "<!--"); both
// need a '<', and encoding/json writes '<', '>' and '&' inside strings as
// \u003c, \u003e and \u0026, so no value can end the element early. The
// script puts every string on the page with textContent, never innerHTML.
// html/template would add nothing here: it would have to be told to trust
// the JSON anyway, since it JavaScript-escapes anything placed in a script.

// pageData is the JSON document the page's script draws.
type pageData struct {
	File    string `json:"file"`
	Model   string `json:"model"`
	Verdict string `json:"verdict"` // linearizable, NOT linearizable, unknown
	Valid   string `json:"valid"`   // true, false, unknown: the CSS class
	Reason  string `json:"reason,omitempty"`
	Ops     int    `json:"ops"`
	Check   string `json:"check"` // check time, rounded for people
	// Events is the number of events; the x axis runs from 0 to Events, and
	// a pending operation ends there.
	Events int `json:"events"`
	// Index holds each event's Index when some event's Index is not its
	// position, so that the axis and the tooltips can show the numbers the
	// history file uses; nil when they are the same.
	Index []int64 `json:"index,omitempty"`
	// Omitted counts client operations in no partition: those the model
	// dropped because they failed, and so certainly did not take effect.
	Omitted int         `json:"omitted"`
	Failure *pageFail   `json:"failure,omitempty"`
	Parts   []pagePart  `json:"parts"`
	Legend  []pageLabel `json:"legend"`
	// Window is set when the history has more operations than the page
	// draws: Parts then hold only the operations invoked in the window,
	// Index covers only its events, and Summary lists every partition.
	Window  *pageWindow  `json:"window,omitempty"`
	Summary []pageSumRow `json:"summary,omitempty"`
}

// pageWindow is the stretch of a large history that the page draws.
type pageWindow struct {
	// From and To are the event positions the axis spans: the first
	// drawn operation's invoke and the last one's completion (or its
	// invoke, when it ends beyond every other).
	From int `json:"from"`
	To   int `json:"to"`
	// Shown counts the operations drawn and Left those of the
	// partitions left out (Omitted counts those in none); Around says
	// what the window is centred on.
	Shown  int    `json:"shown"`
	Left   int    `json:"left"`
	Around string `json:"around"`
}

// pageSumRow is one partition in the summary of a windowed page.
type pageSumRow struct {
	Label string `json:"label"`
	Valid string `json:"valid"`
	Ops   int    `json:"ops"`
	Shown int    `json:"shown"`
}

// pageLabel is one entry of the legend: a CSS class and what it means.
type pageLabel struct {
	Class string `json:"class"`
	Text  string `json:"text"`
}

// pageFail is the header's account of an invalid verdict.
type pageFail struct {
	Partition string `json:"partition,omitempty"`
	Process   string `json:"process"`
	// Name is what the page calls the process (see HTMLOptions).
	Name     string `json:"name"`
	Op       string `json:"op"`
	Invoke   int64  `json:"invoke"`
	Complete int64  `json:"complete"` // -1 when it never completed
	Reason   string `json:"reason"`
}

// pagePart is one partition: its lanes and its operations.
type pagePart struct {
	Label  string `json:"label"`
	Valid  string `json:"valid"`
	Reason string `json:"reason,omitempty"`
	// Lanes are the processes with an operation in the partition, in
	// process order; Rows is how many rows each needs (more than one only
	// when a process's pending operation overlaps its later ones).
	Lanes []pageLane `json:"lanes"`
	Ops   []pageOp   `json:"ops"`
	// Order is the length of the linearization (valid) or of the longest
	// linearizable prefix (invalid); Final the state after it.
	Order int    `json:"order"`
	Final string `json:"final,omitempty"`
}

// pageLane is one process's lane.
type pageLane struct {
	Process string `json:"process"`
	// Name is what the page calls the process (see HTMLOptions).
	Name string `json:"name"`
	Rows int    `json:"rows"`
}

// pageOp is one bar. Its keys are short because a page of 100,000
// operations holds 100,000 of them.
type pageOp struct {
	Lane int `json:"l"`
	Row  int `json:"r"`
	// Call and End are the bar's extent in event positions; End is the
	// completion's position, or Events for a pending operation.
	Call    int    `json:"c"`
	End     int    `json:"e"`
	Pending bool   `json:"p,omitempty"`
	F       string `json:"f"`
	Desc    string `json:"d"`            // the model's rendering, such as "read → 3"
	Type    string `json:"t"`            // completion type: ok, fail, info
	Value   string `json:"v,omitempty"`  // the history's value in JSON, as the timeline shows it
	Invoke  int64  `json:"i"`            // invoke event's Index
	Done    int64  `json:"j"`            // completion event's Index; -1 when none
	T0      int64  `json:"t0,omitempty"` // invoke time, ns; 0 when unknown
	T1      int64  `json:"t1,omitempty"` // completion time, ns
	Err     string `json:"err,omitempty"`
	// N is the operation's position in the partition's order, from 1; 0
	// when it is not in the order. Before and After are the states around
	// it, when the replay reached it.
	N      int    `json:"n,omitempty"`
	Before string `json:"b,omitempty"`
	After  string `json:"a,omitempty"`
	// Failed marks the operation no linearization gets past.
	Failed bool `json:"x,omitempty"`
}

// HTMLOptions tell the page what the history cannot: what its processes
// are called.
type HTMLOptions struct {
	// Names names a process in the lanes, the tooltips and the header;
	// nil, or "" for a process, keeps the default: "nemesis", and "p"
	// followed by the number.
	Names func(history.Process) string
	// MaxOps bounds the operations the page draws: a history with more
	// is drawn as a window of MaxOps operations in invoke order, centred
	// on the operation no linearization gets past (or at the start when
	// there is none), with a table of every partition. 0 means
	// DefaultMaxOps; a negative value draws every operation.
	MaxOps int
}

// DefaultMaxOps is the default HTMLOptions.MaxOps: a browser lays out
// a page of 10,000 bars in well under a second, and a page of a million
// not at all.
const DefaultMaxOps = 10_000

// window chooses the operations a page of r draws: nil when it draws them
// all, else a set of (partition, partition-local index) and the window.
func (r *Report) window(o HTMLOptions) (map[[2]int]bool, *pageWindow) {
	limit := o.MaxOps
	if limit == 0 {
		limit = DefaultMaxOps
	}
	total := 0
	for _, p := range r.parts {
		total += len(p.Ops)
	}
	if limit < 0 || total <= limit {
		return nil, nil
	}
	type ref struct{ part, i, call int }
	all := make([]ref, 0, total)
	for p, part := range r.parts {
		for i, op := range part.Ops {
			all = append(all, ref{p, i, r.ops[op.ID].Call})
		}
	}
	slices.SortFunc(all, func(a, b ref) int {
		return cmp.Or(cmp.Compare(a.call, b.call), cmp.Compare(a.part, b.part), cmp.Compare(a.i, b.i))
	})
	centre, around := 0, "the start of the history"
	if p := r.result.FirstFailure(); p >= 0 && p < len(r.parts) {
		i, what := 0, "the first operation of the partition that failed"
		if f := r.result.Partitions[p].Failed; f >= 0 {
			i, what = f, "the operation no linearization gets past"
		}
		centre = slices.IndexFunc(all, func(x ref) bool { return x.part == p && x.i == i })
		around = what
	}
	lo := max(min(centre-limit/2, total-limit), 0)
	keep := make(map[[2]int]bool, limit)
	w := &pageWindow{From: all[lo].call, Shown: limit, Left: total - limit, Around: around}
	for _, x := range all[lo : lo+limit] {
		keep[[2]int{x.part, x.i}] = true
		o := &r.ops[r.parts[x.part].Ops[x.i].ID]
		w.To = max(w.To, o.Call+1)
		if o.Return >= 0 && !o.Pending() {
			w.To = max(w.To, o.Return+1)
		}
	}
	w.To = min(w.To, len(r.history.Events))
	return keep, w
}

// name is process p's name on the page.
func (o HTMLOptions) name(p history.Process) string {
	if o.Names != nil {
		if s := o.Names(p); s != "" {
			return s
		}
	}
	if p == history.Nemesis {
		return "nemesis"
	}
	return "p" + p.String()
}

// showJSON renders a value in JSON, the notation of the history file and
// of the timeline page, so that what one page shows can be found on the
// other and in history.jsonl. A value JSON cannot hold falls back to
// Go's formatting.
func showJSON(v history.Value) string {
	b, err := history.AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// StateValuer is a model that can give a state as a value (every built-in
// model can): the page then shows states in JSON, as it shows operations,
// rather than in the model's own notation. ok is false for a state the
// model would rather describe itself.
type StateValuer interface {
	StateValue(linear.State) (v history.Value, ok bool)
}

// pageState is a state as the page shows it: in JSON when the model gives
// it as a value, else in the model's words.
func pageState(spec any, st linear.State) string {
	if sv, ok := spec.(StateValuer); ok {
		if v, ok := sv.StateValue(st); ok {
			return showJSON(v)
		}
	}
	return linear.StateString(spec, st)
}

// opValue is an operation's value as the timeline shows it: the invoke's
// value, and what an ok completion returned when that says more.
func opValue(o *history.Op) string {
	a := showJSON(o.Input)
	if o.Type != history.OK || o.Return < 0 || o.Output == nil {
		return a
	}
	b := showJSON(o.Output)
	switch {
	case a == b:
		return a
	case o.Input == nil:
		return "→ " + b
	}
	return a + " → " + b
}

// page gathers what the page shows.
func (r *Report) page(o HTMLOptions) (*pageData, error) {
	if r.history == nil {
		return nil, errors.New("the report holds no history to draw (it was not made by Check)")
	}
	events := r.history.Events
	d := &pageData{
		File: r.File, Model: r.Model, Verdict: verdictWord(r.Valid), Valid: r.Valid.String(),
		Reason: r.Reason, Ops: r.Ops, Events: len(events),
		Check: time.Duration(r.CheckNS).Round(time.Microsecond).String(),
		Legend: []pageLabel{
			{"lin", "linearized (number: position in the order)"},
			{"bad", "no linearization gets past this operation"},
			{"", "not in the order"},
			{"pend", "pending: outcome unknown, may take effect up to the end"},
		},
	}
	keep, win := r.window(o)
	from, to := 0, len(events)
	if win != nil {
		d.Window = win
		from, to = win.From, win.To
	}
	for pos, e := range events {
		if e.Index != int64(pos) {
			d.Index = make([]int64, 0, to-from)
			for _, e := range events[from:to] {
				d.Index = append(d.Index, e.Index)
			}
			break
		}
	}
	if f := r.Failure; f != nil {
		d.Failure = &pageFail{
			Partition: f.Partition, Process: f.Op.Process.String(), Name: o.name(f.Op.Process), Op: f.Op.Op,
			Invoke: f.Op.InvokeIndex, Complete: f.Op.Index, Reason: f.Reason,
		}
	}
	// Operations in no partition are left off the page, not greyed: the
	// models drop only failed operations, which certainly did not take
	// effect, and with no partition to own them there is no lane of a
	// partition to draw them in. The header counts them instead.
	used := make([]bool, len(r.ops))
	for p := range r.parts {
		for _, o := range r.parts[p].Ops {
			used[o.ID] = true
		}
		if win == nil {
			d.Parts = append(d.Parts, r.part(p, o, nil, len(events)))
			continue
		}
		part := r.part(p, o, func(i int) bool { return keep[[2]int{p, i}] }, win.To)
		row := pageSumRow{Label: r.parts[p].Label, Valid: part.Valid, Ops: len(r.parts[p].Ops), Shown: len(part.Ops)}
		d.Summary = append(d.Summary, row)
		if len(part.Ops) > 0 {
			d.Parts = append(d.Parts, part)
		}
	}
	for _, u := range used {
		if !u {
			d.Omitted++
		}
	}
	return d, nil
}

// part describes partition p. Operations keep the partition's order, so
// that a partition-local index i is also the index into Ops. When keep is
// not nil, only the operations it keeps are described, in the same order,
// and bars run at most to the event position to.
func (r *Report) part(p int, opt HTMLOptions, keep func(int) bool, to int) pagePart {
	part := &r.parts[p]
	events := r.history.Events
	out := pagePart{Label: part.Label, Valid: linear.Unknown.String()}
	// order is the linearization of a valid partition or the longest
	// linearizable prefix of an invalid one; an unknown one has neither.
	var order []int
	ordered, failed := false, -1
	if p < len(r.result.Partitions) {
		pr := &r.result.Partitions[p]
		out.Valid, out.Reason = pr.Valid.String(), pr.Reason
		switch pr.Valid {
		case linear.True:
			order, ordered = pr.Linearization, true
		case linear.False:
			order, failed, ordered = pr.Prefix, pr.Failed, true
		}
	}

	// at maps a partition-local index to its place in out.Ops, -1 when
	// it is left out.
	at := make([]int, len(part.Ops))
	n := 0
	for i := range at {
		at[i] = -1
		if keep == nil || keep(i) {
			at[i] = n
			n++
		}
	}
	lane := map[history.Process]int{}
	var procs []history.Process
	for i, o := range part.Ops {
		if at[i] < 0 {
			continue
		}
		pr := r.ops[o.ID].Process
		if _, ok := lane[pr]; !ok {
			lane[pr] = 0
			procs = append(procs, pr)
		}
	}
	slices.Sort(procs)
	for i, pr := range procs {
		lane[pr] = i
	}
	// rowEnds[l] holds, for each row of lane l, where its last bar ends.
	rowEnds := make([][]int, len(procs))

	out.Ops = make([]pageOp, n)
	for i, lo := range part.Ops {
		if at[i] < 0 {
			continue
		}
		o := &r.ops[lo.ID]
		op := pageOp{
			Lane: lane[o.Process], Call: o.Call, End: o.Return, Pending: o.Pending(),
			F: o.F, Desc: linear.OpString(part.Spec, i), Type: o.Type.String(),
			Invoke: o.Index, Done: -1, T0: events[o.Call].Time, Value: opValue(o),
		}
		if o.Return >= 0 {
			op.Done = events[o.Return].Index
			op.T1 = events[o.Return].Time
		}
		if op.Pending {
			// It may take effect at any point after its invoke, so the bar
			// runs to the end even when an info completion was recorded.
			op.End = len(events)
		}
		op.End = min(op.End, to)
		if o.Error != nil {
			op.Err = showJSON(o.Error)
		}
		op.Failed = i == failed
		out.Ops[at[i]] = op
	}

	// Rows are assigned in invoke order, first fit: a process's operations
	// follow one another, so one row suffices unless a pending operation
	// (which runs to the end) is followed by more from the same process.
	byCall := make([]int, len(out.Ops))
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortFunc(byCall, func(a, b int) int { return cmp.Compare(out.Ops[a].Call, out.Ops[b].Call) })
	for _, i := range byCall {
		op := &out.Ops[i]
		ends := rowEnds[op.Lane]
		row := slices.IndexFunc(ends, func(end int) bool { return end < op.Call })
		if row < 0 {
			row = len(ends)
			ends = append(ends, 0)
		}
		ends[row] = op.End
		rowEnds[op.Lane] = ends
		op.Row = row
	}
	for l, pr := range procs {
		out.Lanes = append(out.Lanes, pageLane{Process: pr.String(), Name: opt.name(pr), Rows: len(rowEnds[l])})
	}

	for k, i := range order {
		if at[i] >= 0 {
			out.Ops[at[i]].N = k + 1
		}
	}
	out.Order = len(order)
	state := part.Spec.Init()
	for _, s := range linear.Replay(part.Spec, order) {
		if j := at[s.Op]; j >= 0 {
			out.Ops[j].Before = pageState(part.Spec, s.Before)
			out.Ops[j].After = pageState(part.Spec, s.After)
		}
		state = s.After
	}
	if ordered {
		out.Final = pageState(part.Spec, state)
	}
	return out
}

// WriteHTML writes a self-contained page of the history and its
// linearization: a lane per process and a bar per operation, with the
// linearization (or, when there is none, the longest linearizable prefix
// and the operation it cannot get past) marked on the bars. It is
// WriteHTMLWith with the default names.
func (r *Report) WriteHTML(w io.Writer) error {
	return r.WriteHTMLWith(w, HTMLOptions{})
}

// WriteHTMLWith writes the page of WriteHTML with what o tells.
func (r *Report) WriteHTMLWith(w io.Writer, o HTMLOptions) error {
	d, err := r.page(o)
	if err != nil {
		return fmt.Errorf("html page of %s: %w", r.File, err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("html page of %s: %w", r.File, err)
	}
	for _, b := range [][]byte{
		[]byte(pageHead), []byte(html.EscapeString(r.File)), []byte(pageStyle),
		data, []byte(pageTail),
	} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("html page of %s: %w", r.File, err)
		}
	}
	return nil
}

const pageHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>`

const pageStyle = ` — ipfence linearizability</title>
<style>
:root { --row: 17px; --label: 76px; font: 13px/1.35 system-ui, sans-serif; color: #1d232b; }
body { margin: 0; display: flex; flex-direction: column; height: 100vh; }
header { padding: 8px 14px 6px; border-bottom: 1px solid #cfd6df; background: #f7f9fb; }
h1 { font-size: 15px; margin: 0 0 4px; word-break: break-all; }
.facts span { margin-right: 14px; }
.verdict { font-weight: 600; padding: 1px 6px; border-radius: 3px; }
.verdict.true { background: #d6f0d8; color: #1b5e20; }
.verdict.false { background: #fbd5d3; color: #9b1c1c; }
.verdict.unknown { background: #fdeec8; color: #7a4d00; }
.fail { margin: 5px 0 2px; padding: 4px 8px; border-left: 4px solid #d93025; background: #fff1f0; }
.tools { margin-top: 5px; display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; }
.tools button { font: inherit; padding: 0 8px; }
.key { display: inline-flex; align-items: center; gap: 4px; }
.key i { display: inline-block; width: 22px; height: 11px; }
#chart { flex: 1; overflow: auto; position: relative; }
.axis { position: sticky; top: 0; z-index: 4; height: 20px; background: #fff; border-bottom: 1px solid #cfd6df; }
.axis .corner { position: sticky; left: 0; width: var(--label); height: 20px; background: #fff; z-index: 1; color: #5b6675; padding-left: 6px; box-sizing: border-box; line-height: 20px; }
.tick { position: absolute; top: 0; height: 20px; border-left: 1px solid #b7c0cc; padding-left: 3px; color: #5b6675; font-size: 11px; line-height: 20px; white-space: nowrap; }
.part { position: relative; margin-bottom: 6px; content-visibility: auto; }
.phead { position: sticky; left: 0; width: max-content; max-width: 95vw; padding: 5px 8px 3px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer; user-select: none; }
.phead::before { content: "▾"; display: inline-block; width: 14px; color: #5b6675; }
.shut .phead::before { content: "▸"; }
.shut .pbody { display: none; }
.phead strong { margin-right: 8px; }
.phead .verdict { font-size: 11px; padding: 0 5px; }
.phead small { color: #4a5563; margin-left: 8px; }
.pbody { position: relative; }
.names { position: sticky; left: 0; z-index: 2; width: var(--label); background: #f7f9fb; border-right: 1px solid #cfd6df; }
.names div { position: absolute; left: 0; right: 0; padding: 1px 0 0 6px; color: #4a5563; font-size: 11px; line-height: var(--row); white-space: nowrap; overflow: hidden; }
.track { position: absolute; top: 0; left: var(--label); }
.stripe { position: absolute; left: 0; right: 0; background: #f3f5f8; }
.bar { position: absolute; height: calc(var(--row) - 3px); box-sizing: border-box; border: 1px solid #8994a3; background: #e4e8ee; border-radius: 3px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; font-size: 11px; line-height: calc(var(--row) - 5px); padding: 0 2px; cursor: pointer; }
.bar.lin { background: #bfe5c2; border-color: #3d8b40; }
.bar.bad { background: #e53935; border-color: #8e0000; color: #fff; font-weight: 600; }
.bar.pend { border-style: dashed; background-image: linear-gradient(to right, rgba(255,255,255,0) 0, rgba(255,255,255,.75) 100%); opacity: .8; }
.bar.sel, .bar:focus { outline: 2px solid #1a56db; outline-offset: 1px; z-index: 1; }
.bar.narrow { padding: 0; text-overflow: clip; text-align: center; }
.bar.narrow span { display: none; }
.bar.narrow b { margin: 0; padding: 0 1px; }
.bar b { font-size: 9px; color: #1b5e20; background: #fff; border-radius: 6px; padding: 0 3px; margin-right: 3px; }
.bar.bad b { color: #8e0000; }
.key .lin { background: #bfe5c2; border: 1px solid #3d8b40; }
.key .bad { background: #e53935; border: 1px solid #8e0000; }
.key .plain { background: #e4e8ee; border: 1px solid #8994a3; }
.key .pend { background: linear-gradient(to right, #e4e8ee, #fff); border: 1px dashed #8994a3; }
.window { margin: 5px 0 2px; padding: 4px 8px; border-left: 4px solid #b7791f; background: #fff8e6; }
details.sum { margin: 3px 0; max-height: 25vh; overflow: auto; }
details.sum table { border-collapse: collapse; font-size: 12px; }
details.sum th, details.sum td { padding: 1px 10px 1px 0; text-align: left; }
#tip { position: fixed; z-index: 10; display: none; max-width: 420px; padding: 6px 9px; background: #1d232b; color: #f2f4f7; border-radius: 4px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,.3); pointer-events: none; }
#tip div + div { margin-top: 2px; }
#tip .h { font-weight: 600; font-size: 13px; }
#tip .s { color: #a6e3a9; }
#tip .x { color: #ffaaa5; }
</style>
</head>
<body>
<header id="head"></header>
<div id="chart"></div>
<div id="tip" role="tooltip"></div>
<script>
// Installed apart from the drawing script so that even a syntax error
// there is recorded; tests read data-errors from the DOM.
window.onerror = function (msg, src, line, col) {
  var b = document.body, prev = b.dataset.errors;
  b.dataset.errors = (prev ? prev + "\n" : "") + msg + " (" + line + ":" + col + ")";
};
</script>
<script type="application/json" id="data">`

const pageTail = `</script>
<script>
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var ROW = 17, LABEL = 76, MINPX = 22, MAXPX = 240, NARROW = 44;
  var chart = document.getElementById("chart");
  var tip = document.getElementById("tip");
  var bars = [];     // {el, op, part, sec}
  var sections = []; // {el, track}
  var axis, scale = 1, pinned = null, bad = null;
  // The axis spans the window's events, or all of them.
  var FROM = D.window ? D.window.from : 0, SPAN = Math.max((D.window ? D.window.to : D.events) - FROM, 1);

  function add(parent, tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function eventName(pos) { return D.index ? D.index[pos - FROM] : pos; }
  function ns(t) {
    if (t >= 1e9) return (t / 1e9).toFixed(3) + " s";
    if (t >= 1e6) return (t / 1e6).toFixed(3) + " ms";
    if (t >= 1e3) return (t / 1e3).toFixed(1) + " µs";
    return t + " ns";
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many || one + "s"); }

  function header() {
    var h = document.getElementById("head");
    add(h, "h1", null, D.file);
    var f = add(h, "div", "facts");
    add(f, "span", "verdict " + D.valid, D.verdict + (D.reason ? ": " + D.reason : ""));
    add(f, "span", null, "model " + D.model);
    add(f, "span", null, plural(D.ops, "op"));
    add(f, "span", null, plural(D.parts.length, "partition"));
    add(f, "span", null, "checked in " + D.check);
    if (D.omitted) add(f, "span", null, D.omitted + " failed ops not drawn (they certainly did not take effect)");
    if (D.window) windowNote(h);
    if (D.failure) {
      var x = D.failure;
      add(h, "div", "fail", (x.partition ? x.partition + ": " : "") + x.name + ": " + x.op +
        " (invoked at event " + x.invoke + ", " + (x.complete < 0 ? "never completed" : "completed at event " + x.complete) +
        "): " + x.reason);
    }
    var t = add(h, "div", "tools");
    var z = add(t, "span");
    add(z, "span", null, "zoom ");
    add(z, "button", null, "−").addEventListener("click", function () { zoom(scale / 2); });
    add(z, "button", null, "+").addEventListener("click", function () { zoom(scale * 2); });
    add(z, "button", null, "fit").addEventListener("click", function () { zoom(fit()); });
    add(t, "span", null, "(ctrl + wheel also zooms; click an op to pin its details)");
    if (D.failure) add(t, "button", null, "show failing op").addEventListener("click", showFailure);
    D.legend.forEach(function (l) {
      var k = add(t, "span", "key");
      add(k, "i", l.class || "plain");
      add(k, "span", null, l.text);
    });
  }

  // windowNote says plainly that the page draws a window of the history,
  // and lists every partition with its verdict and how much of it is drawn.
  function windowNote(h) {
    var w = D.window, n = add(h, "div", "window");
    add(n, "strong", null, "A window, not the whole history: ");
    add(n, "span", null, "this page draws " + plural(w.shown, "op") + " of " + (w.shown + w.left) + ", those invoked around " + w.around +
      " (events " + eventName(w.from) + " to " + eventName(w.to - 1) + "); " + plural(w.left, "op is", "ops are") + " left out.");
    var det = add(h, "details", "sum");
    add(det, "summary", null, "every partition (" + D.summary.length + ")");
    var tb = add(add(det, "table"), "tbody"), hr = add(tb, "tr");
    ["partition", "ops", "verdict", "drawn"].forEach(function (c) { add(hr, "th", null, c); });
    D.summary.forEach(function (p) {
      var tr = add(tb, "tr");
      add(tr, "td", null, p.label || "history");
      add(tr, "td", null, String(p.ops));
      add(add(tr, "td"), "span", "verdict " + p.valid, { "true": "linearizable", "false": "NOT linearizable" }[p.valid] || "unknown");
      add(tr, "td", null, String(p.shown));
    });
    document.body.dataset.window = String(w.shown);
    document.body.dataset.left = String(w.left);
  }

  function draw() {
    axis = add(chart, "div", "axis");
    add(axis, "div", "corner", "event");
    D.parts.forEach(function (p) {
      var sec = add(chart, "section", "part");
      var head = add(sec, "div", "phead");
      head.title = "click to fold or unfold";
      add(head, "strong", null, p.label || "history");
      var word = { "true": "linearizable", "false": "NOT linearizable" }[p.valid] || "unknown";
      add(head, "span", "verdict " + p.valid, word + (p.reason ? ": " + p.reason : ""));
      var what = plural(p.ops.length, "op") + " · " + plural(p.lanes.length, "process", "processes");
      if (p.valid === "true") what += " · linearization of " + plural(p.order, "op") + ", ending in state " + p.final;
      if (p.valid === "false") what += " · longest linearizable prefix " + plural(p.order, "op") + ", ending in state " + p.final;
      add(head, "small", null, what);
      head.addEventListener("click", function () { sec.classList.toggle("shut"); });
      var top = [], y = 0;
      p.lanes.forEach(function (l) { top.push(y); y += l.rows * ROW + 2; });
      var pb = add(sec, "div", "pbody");
      pb.style.height = y + "px";
      // A window of 10,000 ops spreads over up to a thousand partitions:
      // the browser lays out only those near the view (content-visibility
      // above), each of the others taking its height from here (its bars
      // and its head), which keeps opening the page from laying out every
      // bar twice.
      sec.style.containIntrinsicHeight = "auto " + (y + 26) + "px";
      var names = add(pb, "div", "names");
      names.style.height = y + "px";
      var track = add(pb, "div", "track");
      track.style.height = y + "px";
      p.lanes.forEach(function (l, li) {
        var n = add(names, "div", null, l.name);
        n.title = l.name;
        n.style.top = top[li] + "px";
        n.style.height = l.rows * ROW + "px";
        if (li % 2 === 0) {
          var s = add(track, "div", "stripe");
          s.style.top = top[li] + "px";
          s.style.height = l.rows * ROW + 2 + "px";
        }
      });
      var frag = document.createDocumentFragment();
      p.ops.forEach(function (op) {
        var cls = "bar";
        if (op.n) cls += " lin";
        if (op.x) cls += " bad";
        if (op.p) cls += " pend";
        var e = document.createElement("div");
        e.className = cls;
        e.tabIndex = 0;
        e.style.top = top[op.l] + op.r * ROW + 2 + "px";
        if (op.n) add(e, "b", null, String(op.n));
        add(e, "span", null, op.d);
        e._bar = bars.length;
        bars.push({ el: e, op: op, part: p, sec: sec });
        frag.appendChild(e);
      });
      track.appendChild(frag);
      sections.push({ el: sec, track: track });
    });
  }

  function fit() {
    var w = chart.clientWidth - LABEL - 24;
    return Math.max(w, 100) / SPAN;
  }

  // layout places everything for the current scale (px per event).
  function layout() {
    var w = Math.ceil(SPAN * scale) + 24;
    axis.style.width = LABEL + w + "px";
    sections.forEach(function (s) {
      s.el.style.width = LABEL + w + "px";
      s.track.style.width = w + "px";
    });
    for (var i = 0; i < bars.length; i++) {
      var b = bars[i];
      b.el.style.left = (b.op.c - FROM) * scale + "px";
      var bw = Math.max((b.op.e - b.op.c) * scale - 1, 3);
      b.el.style.width = bw + "px";
      // A bar too short for its text shows only its order number; the
      // tooltip has the rest.
      b.el.classList.toggle("narrow", bw < NARROW);
    }
    var old = axis.querySelectorAll(".tick");
    for (var j = 0; j < old.length; j++) old[j].remove();
    var want = 80 / scale, step = 1;
    while (step < want) step *= (String(step)[0] === "2" ? 2.5 : 2);
    step = Math.round(step);
    for (var pos = Math.ceil(FROM / step) * step; pos < FROM + SPAN; pos += step) {
      var t = add(axis, "div", "tick", String(eventName(pos)));
      t.style.left = LABEL + (pos - FROM) * scale + "px";
    }
  }

  // clamp keeps the chart within what browsers lay out (about 33 million
  // px wide).
  function clamp(s) { return Math.min(Math.max(s, 0.01), 400, 3e7 / SPAN); }
  function zoom(s) {
    s = clamp(s);
    var mid = (chart.scrollLeft + chart.clientWidth / 2 - LABEL) / scale;
    scale = s;
    layout();
    chart.scrollLeft = mid * scale + LABEL - chart.clientWidth / 2;
  }

  function tipText(b) {
    var op = b.op, p = b.part;
    tip.textContent = "";
    add(tip, "div", "h", op.d);
    add(tip, "div", null, p.lanes[op.l].name + " · f " + op.f + " · " + op.t +
      (op.err ? " · error " + op.err : ""));
    if (op.v) add(tip, "div", null, "value " + op.v);
    var done = op.j < 0 ? "never completed" : op.t + " at event " + op.j;
    add(tip, "div", null, "invoked at event " + op.i + ", " + done +
      (op.p ? " (outcome unknown: it may take effect any time after its invoke, or never)" : ""));
    if (op.t0 || op.t1) {
      add(tip, "div", null, "time " + ns(op.t0) + (op.t1 ? " → " + ns(op.t1) + " (" + ns(op.t1 - op.t0) + ")" : ""));
    }
    var order = p.valid === "true" ? "linearization" : "longest linearizable prefix";
    if (op.n) {
      add(tip, "div", "s", "#" + op.n + " of " + p.order + " in the " + order);
      if (op.b != null) add(tip, "div", "s", "state " + op.b + " → " + op.a);
    } else if (op.x) {
      add(tip, "div", "x", "no linearization gets past this op: the longest linearizable prefix (" +
        plural(p.order, "op") + ") ends in state " + p.final);
    } else if (p.valid === "true") {
      add(tip, "div", null, "not in the linearization: it never took effect");
    } else if (p.valid === "false") {
      add(tip, "div", null, "not in the longest linearizable prefix");
    }
  }

  function place(x, y) {
    var r = tip.getBoundingClientRect();
    var left = Math.min(x + 14, window.innerWidth - r.width - 6);
    var top = y + 16;
    if (top + r.height > window.innerHeight - 4) top = y - r.height - 10;
    tip.style.left = Math.max(left, 4) + "px";
    tip.style.top = Math.max(top, 4) + "px";
  }
  function show(b, x, y) {
    tipText(b);
    tip.style.display = "block";
    place(x, y);
  }
  function showAt(b) {
    var r = b.el.getBoundingClientRect();
    show(b, Math.max(r.left, 0), r.bottom - 10);
  }
  function hide() { tip.style.display = "none"; }
  function pin(b) {
    if (pinned) pinned.el.classList.remove("sel");
    pinned = b;
    if (b) { b.el.classList.add("sel"); showAt(b); } else hide();
  }
  function barOf(target) {
    var e = target && target.closest ? target.closest(".bar") : null;
    return e ? bars[e._bar] : null;
  }
  function showFailure() {
    if (!bad) return;
    bad.sec.classList.remove("shut");
    bad.el.scrollIntoView({ block: "center", inline: "center" });
    pin(bad);
  }

  // One set of listeners on the chart serves every bar.
  chart.addEventListener("mouseover", function (ev) {
    var b = barOf(ev.target);
    if (b && !pinned) show(b, ev.clientX, ev.clientY);
  });
  chart.addEventListener("mousemove", function (ev) {
    if (!pinned && tip.style.display === "block" && barOf(ev.target)) place(ev.clientX, ev.clientY);
  });
  chart.addEventListener("mouseout", function (ev) {
    if (!pinned && barOf(ev.target) !== barOf(ev.relatedTarget)) hide();
  });
  chart.addEventListener("click", function (ev) {
    var b = barOf(ev.target);
    pin(b && b !== pinned ? b : null);
  });
  chart.addEventListener("focusin", function (ev) {
    var b = barOf(ev.target);
    if (b && (!pinned || pinned === b)) showAt(b);
  });
  chart.addEventListener("focusout", function () { if (!pinned) hide(); });
  // A pinned tooltip follows its bar, and hides while the bar is
  // scrolled out of the chart.
  chart.addEventListener("scroll", function () {
    if (!pinned) return;
    var r = pinned.el.getBoundingClientRect(), c = chart.getBoundingClientRect();
    if (r.right < c.left + LABEL || r.left > c.right || r.bottom < c.top || r.top > c.bottom) hide();
    else showAt(pinned);
  });
  chart.addEventListener("wheel", function (ev) {
    if (!ev.ctrlKey) return;
    ev.preventDefault();
    var r = chart.getBoundingClientRect();
    var at = (chart.scrollLeft + ev.clientX - r.left - LABEL) / scale;
    scale = clamp(scale * (ev.deltaY < 0 ? 1.25 : 0.8));
    layout();
    chart.scrollLeft = at * scale + LABEL - (ev.clientX - r.left);
  }, { passive: false });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") pin(null); });

  header();
  draw();
  scale = clamp(Math.min(Math.max(fit(), MINPX), MAXPX));
  layout();
  bad = bars.filter(function (b) { return b.op.x; })[0] || null;
  if (bad) bad.el.scrollIntoView({ block: "center", inline: "center" });
  document.body.dataset.drawn = String(bars.length);
  // When the first draw was done, in ms since navigation start: what
  // BenchmarkHTML1MLoad reads as the time the page takes to open.
  document.body.dataset.ready = String(Math.round(performance.now()));
})();
</script>
</body>
</html>
`
