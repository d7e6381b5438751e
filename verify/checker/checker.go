// Package checker judges a finished run: each checker reads the history and
// answers valid (true), invalid (false) or unknown, with whatever figures
// explain the answer. Checkers compose: the combined answer is false if any
// is false, else unknown if any is unknown, else true.
//
// The general checkers live here: the linearizability of a model's
// operations, operation statistics, errors the clients reported, and
// performance (latency and rate plots, with the faults shaded). Workloads
// add their own.
package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/report"
)

// Run is what a checker sees of a finished test.
type Run struct {
	// Events is the history in the order it happened.
	Events []history.Event
	// Ops are the client operations paired; Nemesis the nemesis events.
	Ops     []history.Op
	Nemesis []history.Event
	// Faults are the periods during which a fault was active.
	Faults []report.Fault
	// Dir is the run's folder, where checkers write their pages and plots;
	// empty when there is none (they then write nothing).
	Dir string
	// StartMono is the moment the history's clock read zero, on
	// CLOCK_MONOTONIC, for checkers that merge records of other processes.
	StartMono int64
	// Name is the test's name, for titles.
	Name string
	// Names names the processes on the pages checkers write (the
	// timeline, the linearizability page), such as "client 3" or
	// "provider"; nil, or "" for a process, keeps each page's default.
	// A test sets it before its checkers run.
	Names func(history.Process) string
}

// NewRun pairs the history's operations and derives the fault periods.
func NewRun(name string, events []history.Event, dir string, startMono int64) (*Run, error) {
	ops, nem, err := history.Pair(events)
	if err != nil {
		return nil, err
	}
	return &Run{Events: events, Ops: ops, Nemesis: nem, Faults: Faults(nem), Dir: dir, StartMono: startMono, Name: name}, nil
}

// Faults derives the fault periods from nemesis events. A nemesis names a
// fault's beginning "start-KIND" and its end "stop-KIND"; the period runs
// from the start's invoke to the stop's completion, the widest window in
// which the fault may have been active, and is named after the kind and
// what the start's completion said it did. A fault never stopped runs to
// the end of the history (End 0), unless the harness's "teardown" heal
// ends it. Nemesis ops of other names are not periods.
func Faults(nemesis []history.Event) []report.Fault {
	type open struct {
		start int64
		desc  string
	}
	active := map[string]*open{}
	var out []report.Fault
	invoked := map[string]int64{}
	for _, e := range nemesis {
		if e.Type == history.Invoke {
			invoked[e.F] = e.Time
			continue
		}
		if kind, ok := strings.CutPrefix(e.F, "start-"); ok {
			if _, dup := active[kind]; dup {
				continue
			}
			desc := kind
			if s, ok := e.Value.(string); ok && s != "" {
				desc += " " + s
			}
			start, ok := invoked[e.F]
			if !ok {
				start = e.Time
			}
			active[kind] = &open{start: start, desc: desc}
		} else if kind, ok := strings.CutPrefix(e.F, "stop-"); ok {
			if o := active[kind]; o != nil {
				out = append(out, report.Fault{Name: o.desc, Start: time.Duration(o.start), End: time.Duration(max(e.Time, o.start+1))})
				delete(active, kind)
			}
		} else if e.F == "teardown" {
			// The harness's final heal ends whatever is still active.
			for _, kind := range slices.Sorted(maps.Keys(active)) {
				o := active[kind]
				out = append(out, report.Fault{Name: o.desc, Start: time.Duration(o.start), End: time.Duration(max(e.Time, o.start+1))})
			}
			clear(active)
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(active)) {
		o := active[kind]
		out = append(out, report.Fault{Name: o.desc, Start: time.Duration(o.start)})
	}
	slices.SortStableFunc(out, func(a, b report.Fault) int { return int(a.Start - b.Start) })
	return out
}

// Result is one checker's answer: its verdict and the figures behind it.
// It is written as one JSON object, {"valid": true|false|"unknown", ...Fields}.
// The typed fields repeat what Fields says for code to read without type
// assertions: Checker(name) finds a composed checker's result,
// FirstFailure the explanation of a false verdict.
type Result struct {
	Valid  linear.Verdict
	Fields map[string]any
	// Checkers holds the results of the checkers Compose ran, by name (as
	// Fields["checkers"] does).
	Checkers map[string]Result
	// Failure explains a false verdict, when the checker gives an
	// explanation (Linearizable and Transactional do).
	Failure *Failure
	// Panic is "NAME panicked: TEXT" when the checker panicked (its
	// verdict is then unknown); empty otherwise.
	Panic string
}

// MarshalJSON writes the verdict and the fields as one object.
func (r Result) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.Fields)+1)
	maps.Copy(m, r.Fields)
	m["valid"] = r.Valid
	return json.Marshal(m)
}

// Checker judges a run.
type Checker interface {
	Check(ctx context.Context, r *Run) Result
}

// Func adapts a function to Checker.
type Func func(ctx context.Context, r *Run) Result

// Check calls f.
func (f Func) Check(ctx context.Context, r *Run) Result { return f(ctx, r) }

// Errorf is the result of a checker that could not judge: unknown, with
// the reason.
func Errorf(format string, args ...any) Result {
	return Result{Valid: linear.Unknown, Fields: map[string]any{"error": fmt.Sprintf(format, args...)}}
}

// Compose runs the checkers concurrently and combines their verdicts: false
// beats unknown beats true. The result's "checkers" field holds each
// checker's result by name. A checker that panics is unknown, with the
// panic as its error: one broken checker must not hide the others.
func Compose(checkers map[string]Checker) Checker {
	return Func(func(ctx context.Context, r *Run) Result {
		names := slices.Sorted(maps.Keys(checkers))
		results := make([]Result, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						results[i] = Panicked("checker "+name, p)
					}
				}()
				results[i] = checkers[name].Check(ctx, r)
			})
		}
		wg.Wait()
		byName := make(map[string]Result, len(names))
		verdicts := make([]linear.Verdict, len(names))
		for i, name := range names {
			byName[name] = results[i]
			verdicts[i] = results[i].Valid
		}
		return Result{Valid: linear.Combine(verdicts...), Fields: map[string]any{"checkers": byName}, Checkers: byName}
	})
}
