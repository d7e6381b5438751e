package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"slices"

	"github.com/ipfence/ipfence/verify/history"
)

// The page is a fixed shell around one JSON document (timelineData) that a
// script draws on a canvas. A page must open with 100,000 operations, so
// nothing is one DOM element per operation: the canvas covers only the
// visible part of the chart and is repainted on scroll and zoom, finding the
// visible operations of each lane by binary search on time.
//
// Escaping: the shell is constant text, and the only data written into it
// are the title, escaped with html.EscapeString, and the JSON document,
// which goes into a <script type="application/json"> element. The HTML
// tokenizer ends that element only at "</script" (and treats "<!--"
// specially); both need a '<', which encoding/json writes inside strings
// as \u003c, so no value can end the element early. The script puts every
// string on the page with textContent or fillText, never innerHTML.

// timelineData is the JSON document the page draws. Operations are stored
// as columns of numbers, with short keys, because a page of 100,000
// operations holds 100,000 of each: columns of small integers are about a
// third of the size of an object per operation.
type timelineData struct {
	Title string `json:"title"`
	// End is the right edge of the chart in µs since the test started: the
	// last event or fault boundary. Pending operations run to it.
	End int64 `json:"end"`
	// Lanes are the lanes' labels, top to bottom: the nemesis's rows, then
	// each client process. Group is each lane's worker: the processes that
	// followed one another after crashes share a number, and the page
	// shades alternate workers; the nemesis's rows are -1.
	Lanes []string `json:"lanes"`
	Group []int    `json:"group"`
	// Fs and Vals are the distinct functions and texts (values and
	// errors); operations refer to them by index, since they repeat: a
	// register's few values, "nil" for every read invoke, "timeout".
	Fs   []string `json:"fs"`
	Vals []string `json:"vals"`
	// One entry per operation, in order of invoke time.
	Lane  []int   `json:"l"` // index into Lanes
	Start []int64 `json:"s"` // invoke time in µs, minus the previous op's
	Dur   []int64 `json:"d"` // µs from invoke to completion; -1: never completed
	// Out is the outcomes as a string of digits, one per operation (a
	// byte each rather than two): 0 ok, 1 fail, 2 info, 3 pending,
	// 4 nemesis.
	Out string `json:"o"`
	F   []int  `json:"f"` // index into Fs
	Val []int  `json:"v"` // index into Vals
	// Err maps the position of each operation that has an error to the
	// error's index in Vals.
	Err    map[int]int `json:"err,omitempty"`
	Faults []pageFault `json:"faults"`
}

// pageFault is one shaded period, in µs.
type pageFault struct {
	Name  string `json:"n"`
	Start int64  `json:"s"`
	End   int64  `json:"e"`
	// Open marks a fault still active when the test ended.
	Open bool `json:"a,omitempty"`
}

// micros converts nanoseconds to whole microseconds, rounding: µs keep
// the numbers short and are finer than anything drawn.
func micros(ns int64) int64 {
	if ns < 0 {
		return -((-ns + 500) / 1000)
	}
	return (ns + 500) / 1000
}

// Timeline writes a self-contained HTML page of the history: a lane per
// process with a bar per operation from its invoke to its completion,
// coloured by outcome, the nemesis's operations in lanes of their own, the
// faults shaded across every lane, and a time axis. Hovering over or
// clicking on a bar shows its f, value, error and times.
func Timeline(w io.Writer, title string, events []history.Event, faults []Fault) error {
	r, err := prepare(events, faults)
	if err != nil {
		return fmt.Errorf("timeline %q: %w", title, err)
	}
	d := r.timeline(title, events)
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("timeline %q: %w", title, err)
	}
	for _, b := range [][]byte{
		[]byte(timelineHead), []byte(html.EscapeString(title)), []byte(timelineStyle),
		data, []byte(timelineScript),
	} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("timeline %q: %w", title, err)
		}
	}
	return nil
}

// timeline gathers what the page shows.
func (r *run) timeline(title string, events []history.Event) *timelineData {
	n := len(r.spans)
	d := &timelineData{
		Title: title, End: micros(r.end),
		Lanes: []string{}, Group: []int{}, Fs: []string{}, Vals: []string{},
		Lane: make([]int, 0, n), Start: make([]int64, 0, n), Dur: make([]int64, 0, n),
		F: make([]int, 0, n), Val: make([]int, 0, n),
		Faults: []pageFault{},
	}
	for _, f := range r.faults {
		d.Faults = append(d.Faults, pageFault{Name: f.name, Start: micros(f.start), End: micros(f.end), Open: f.open})
	}

	spans := slices.Clone(r.spans)
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.call, b.call))
	})

	// The nemesis's operations may overlap, so they take as many rows as
	// they need, first fit in invoke order.
	nemRow := make(map[int]int) // call → row
	var rowEnds []int64
	for _, s := range spans {
		if s.outcome != nemesisOut {
			continue
		}
		row := slices.IndexFunc(rowEnds, func(end int64) bool { return end <= s.start })
		if row < 0 {
			row = len(rowEnds)
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = max(s.end, s.start+1)
		nemRow[s.call] = row
	}
	for i := range rowEnds {
		name := "nemesis"
		if i > 0 {
			name = fmt.Sprintf("nemesis %d", i+1)
		}
		d.Lanes = append(d.Lanes, name)
		d.Group = append(d.Group, -1)
	}
	procLane := make(map[history.Process]int)
	for w, procs := range workers(events) {
		for _, p := range procs {
			procLane[p] = len(d.Lanes)
			d.Lanes = append(d.Lanes, "p"+p.String())
			d.Group = append(d.Group, w)
		}
	}

	fIndex := make(map[string]int)
	vIndex := make(map[string]int)
	intern := func(index map[string]int, table *[]string, s string) int {
		i, ok := index[s]
		if !ok {
			i = len(*table)
			index[s] = i
			*table = append(*table, s)
		}
		return i
	}
	var prev int64
	out := make([]byte, 0, n)
	for i, s := range spans {
		lane := procLane[s.proc]
		if s.outcome == nemesisOut {
			lane = nemRow[s.call]
		}
		start := micros(s.start)
		dur := micros(s.end) - start
		if s.outcome == pendingOut {
			dur = -1
		}
		d.Lane = append(d.Lane, lane)
		d.Start = append(d.Start, start-prev)
		prev = start
		d.Dur = append(d.Dur, dur)
		out = append(out, '0'+byte(s.outcome))
		d.F = append(d.F, intern(fIndex, &d.Fs, s.f))
		d.Val = append(d.Val, intern(vIndex, &d.Vals, s.value))
		if s.err != "" {
			if d.Err == nil {
				d.Err = make(map[int]int)
			}
			d.Err[i] = intern(vIndex, &d.Vals, s.err)
		}
	}
	d.Out = string(out)
	return d
}

// workers groups the client processes into the workers that ran them, in
// order of first appearance. After an indeterminate (info) completion a
// worker goes on under a new process id, since the crashed operation may
// still take effect; the history does not say which new id belongs to
// which worker, so a new process joins a worker whose process crashed
// before the new one's first invoke, preferring one whose id differs from
// the new one by a multiple of the number of workers (the usual numbering:
// process + concurrency), then the one that crashed first. The grouping
// only orders and shades the lanes, so a wrong guess misplaces a lane,
// never an operation.
func workers(events []history.Event) [][]history.Process {
	type worker struct {
		procs    []history.Process
		crashed  bool
		crashPos int
	}
	var ws []worker
	of := make(map[history.Process]int)
	for pos, e := range events {
		if e.Process < 0 {
			continue
		}
		w, known := of[e.Process]
		switch {
		case e.Type == history.Invoke && known:
			ws[w].crashed = false
		case e.Type == history.Invoke:
			best := -1
			for i := range ws {
				c := &ws[i]
				if !c.crashed {
					continue
				}
				step := e.Process - c.procs[len(c.procs)-1]
				fits := step > 0 && step%history.Process(len(ws)) == 0
				if best < 0 {
					best = i
					continue
				}
				b := &ws[best]
				bstep := e.Process - b.procs[len(b.procs)-1]
				bfits := bstep > 0 && bstep%history.Process(len(ws)) == 0
				if (fits && !bfits) || (fits == bfits && c.crashPos < b.crashPos) {
					best = i
				}
			}
			if best < 0 {
				best = len(ws)
				ws = append(ws, worker{})
			}
			ws[best].procs = append(ws[best].procs, e.Process)
			ws[best].crashed = false
			of[e.Process] = best
		case e.Type == history.Info && known:
			ws[w].crashed, ws[w].crashPos = true, pos
		}
	}
	out := make([][]history.Process, len(ws))
	for i, w := range ws {
		out[i] = w.procs
	}
	return out
}
