// Package report draws what a test run did, for people: a timeline page of
// every operation per process (Timeline), a latency scatter plot (LatencyPNG)
// and a throughput plot (RatePNG), each with the periods during which faults
// were active shaded, and the latency quantiles a performance checker
// compares (Quantiles).
//
// Every report takes a history as events, in the order they happened, whose
// Time is nanoseconds since the test started. Reports never judge the
// history; the checkers do. They must draw anything a run can produce: no
// operations at all, only nemesis events, operations that never completed
// (drawn up to the end of the test) and processes that crashed and went on
// under new ids.
package report

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ipfence/ipfence/verify/history"
)

// Fault is a period during which a fault was active, shaded in every report.
type Fault struct {
	// Name says what the fault was, such as "partition halves" or
	// "pause n1"; reports print it on the shaded period.
	Name string
	// Start and End are measured from the start of the test, like event
	// times. End == 0 means the fault was still active when the test ended.
	Start, End time.Duration
}

// outcome is how an operation ended, as the reports colour it.
type outcome uint8

const (
	okOut      outcome = iota // completed ok
	failOut                   // completed fail: certainly did not happen
	infoOut                   // completed info: may or may not have happened
	pendingOut                // never completed before the history ended
	nemesisOut                // a fault injector operation
)

// outcomeNames are the outcomes as the reports print them.
var outcomeNames = [...]string{"ok", "fail", "info", "pending", "nemesis", "event", "bad event"}

func (o outcome) String() string { return outcomeNames[o] }

// span is one operation as the reports draw it: a client operation paired
// by history.Pair, or a nemesis operation paired here.
type span struct {
	proc    history.Process
	f       string
	start   int64 // ns since the test started
	end     int64 // ns; the end of the test when pending
	outcome outcome
	// call is the invoke's position in the events, which orders spans that
	// start at the same time.
	call  int
	value string // the invoke's value and the result, for people
	err   string
}

// run is a history prepared for drawing.
type run struct {
	spans []span // client then nemesis operations, each in invoke order
	// end is the last moment the reports show: the latest event time or
	// fault boundary, whichever is later.
	end    int64
	faults []fault
}

// fault is a Fault resolved against the end of the run.
type fault struct {
	name       string
	start, end int64 // ns
	open       bool  // still active when the test ended
}

// maxValue bounds the characters a value shows on a page: a list-append
// read can hold thousands of elements, and a page of 100,000 of them would
// not load. A value cut short ends in "…".
const maxValue = 200

// prepare pairs events into spans and resolves the faults.
func prepare(events []history.Event, faults []Fault) (*run, error) {
	ops, nemesis, err := history.Pair(events)
	if err != nil {
		return nil, fmt.Errorf("pairing the history's operations: %w", err)
	}
	r := &run{spans: make([]span, 0, len(ops)+len(nemesis))}
	for _, e := range events {
		r.end = max(r.end, e.Time)
	}
	for _, f := range faults {
		if f.Start < 0 || (f.End != 0 && f.End < f.Start) {
			return nil, fmt.Errorf("fault %q runs from %v to %v: it must start at or after 0 and end after it starts (End 0: still active)", f.Name, f.Start, f.End)
		}
		r.end = max(r.end, int64(f.Start), int64(f.End))
	}
	for _, f := range faults {
		rf := fault{name: f.Name, start: int64(f.Start), end: int64(f.End)}
		if f.End == 0 {
			rf.end, rf.open = r.end, true
		}
		r.faults = append(r.faults, rf)
	}
	for _, o := range ops {
		s := span{proc: o.Process, f: o.F, start: events[o.Call].Time, end: r.end, call: o.Call, outcome: pendingOut}
		if o.Return >= 0 {
			s.end = events[o.Return].Time
			switch o.Type {
			case history.OK:
				s.outcome = okOut
			case history.Fail:
				s.outcome = failOut
			default:
				s.outcome = infoOut
			}
		}
		s.value = describe(o.Input, o.Output, s.outcome == okOut)
		if o.Error != nil {
			s.err = clip(show(o.Error))
		}
		r.spans = append(r.spans, s)
	}
	r.spans = append(r.spans, pairNemesis(events, r.end)...)
	return r, nil
}

// describe renders an operation's value: the invoke's value, and what an
// ok completion returned when that says more (a read's result).
func describe(in, out history.Value, ok bool) string {
	a := show(in)
	if !ok || out == nil {
		return clip(a)
	}
	b := show(out)
	switch {
	case a == b:
		return clip(a)
	case in == nil:
		return clip("→ " + b)
	}
	return clip(a + " → " + b)
}

// show renders a value in JSON, the one notation every report uses: the
// notation of the history file the run wrote, so that what a page shows
// can be searched for in history.jsonl. A value JSON cannot hold (a NaN)
// falls back to Go's formatting.
func show(v history.Value) string {
	b, err := history.AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// clip shortens s to maxValue characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxValue {
		return s
	}
	n := 0
	for i := range s {
		if n == maxValue {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// pairNemesis pairs the fault injector's events into spans. Its operations
// are not checked and may overlap, so the pairing is lenient: a completion
// closes the oldest open invoke with the same f, a completion that closes
// nothing is drawn as an instant, and an invoke never completed runs to the
// end.
func pairNemesis(events []history.Event, end int64) []span {
	var out []span
	var open []int // indices into out, oldest first
	for pos, e := range events {
		if e.Process != history.Nemesis {
			continue
		}
		if e.Type == history.Invoke {
			open = append(open, len(out))
			out = append(out, span{proc: history.Nemesis, f: e.F, start: e.Time, end: end, call: pos,
				outcome: nemesisOut, value: clip(show(e.Value))})
			continue
		}
		k := slices.IndexFunc(open, func(i int) bool { return out[i].f == e.F })
		if k < 0 {
			out = append(out, span{proc: history.Nemesis, f: e.F, start: e.Time, end: e.Time, call: pos,
				outcome: nemesisOut, value: clip(show(e.Value))})
			continue
		}
		s := &out[open[k]]
		open = slices.Delete(open, k, k+1)
		s.end = e.Time
		if e.Value != nil {
			if v := show(e.Value); v != s.value {
				s.value = clip(s.value + " → " + v)
			}
		}
		if e.Error != nil {
			s.err = clip(show(e.Error))
		}
	}
	return out
}

// Latency summarizes the latencies of one function's ok operations.
type Latency struct {
	Count              int
	P50, P95, P99, Max time.Duration
}

// Quantiles returns, for each f, the latency quantiles of the operations
// that completed ok, by the nearest-rank method. Failed and indeterminate
// operations are left out: their latency is that of the error path or the
// client's timeout, which says little about the service. An f with no ok
// operation has no entry.
func Quantiles(events []history.Event) (map[string]Latency, error) {
	ops, _, err := history.Pair(events)
	if err != nil {
		return nil, fmt.Errorf("latency quantiles: pairing the history's operations: %w", err)
	}
	byF := map[string][]time.Duration{}
	for _, o := range ops {
		if o.Type == history.OK && o.Return >= 0 {
			byF[o.F] = append(byF[o.F], time.Duration(events[o.Return].Time-events[o.Call].Time))
		}
	}
	out := make(map[string]Latency, len(byF))
	for f, ds := range byF {
		slices.Sort(ds)
		rank := func(percent int) time.Duration {
			// The smallest latency that at least percent of the ops do not
			// exceed: rank ⌈percent·n/100⌉, in integers so that no
			// rounding moves it.
			return ds[(percent*len(ds)+99)/100-1]
		}
		out[f] = Latency{Count: len(ds), P50: rank(50), P95: rank(95), P99: rank(99), Max: ds[len(ds)-1]}
	}
	return out, nil
}

// completed returns the client spans that completed, in invoke order: those
// with a latency.
func (r *run) completed() []span {
	var out []span
	for _, s := range r.spans {
		if s.outcome <= infoOut {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	return out
}
