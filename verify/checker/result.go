package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
)

// OpRef names one operation of the history, the same way whichever checker
// found it: Index is its completion event's index (-1 when it never
// completed) and InvokeIndex its invoke's, as in lincheck.OpRef and
// workload.OpRef; FromIsolation converts the transactional checker's.
type OpRef struct {
	Index       int64           `json:"index"`
	InvokeIndex int64           `json:"invoke_index"`
	Process     history.Process `json:"process"`
	F           string          `json:"f"`
	Type        string          `json:"type"`
	// Value is the result of an ok operation, the argument otherwise.
	Value history.Value `json:"value"`
	// Op is the model's rendering, such as "read → 3", when a model
	// judged the operation.
	Op string `json:"op,omitempty"`
}

// FromLincheck converts the linearizability checker's reference, which
// means the same.
func FromLincheck(r lincheck.OpRef) OpRef {
	return OpRef{Index: r.Index, InvokeIndex: r.InvokeIndex, Process: r.Process, F: r.F, Type: r.Type, Value: r.Value, Op: r.Op}
}

// FromIsolation converts the transactional checker's reference, finding
// the operation among ops (the paired operations of the history it
// checked) and events. isolation.OpRef.Index names a transaction by one
// of its two events (the invoke's index, in older versions of that
// package; the completion's, as Elle names it): either is found, and the
// result has both.
func FromIsolation(r isolation.OpRef, ops []history.Op, events []history.Event) OpRef {
	out := OpRef{Index: -1, InvokeIndex: -1, Type: r.Type, Value: r.Value, Process: history.NoProcess}
	if r.Process != nil {
		out.Process = *r.Process
	}
	for i := range ops {
		o := &ops[i]
		done := int64(-1)
		if o.Return >= 0 && o.Return < len(events) {
			done = events[o.Return].Index
		}
		if o.Index != r.Index && done != r.Index {
			continue
		}
		out.Index, out.InvokeIndex, out.F, out.Process = done, o.Index, o.F, o.Process
		break
	}
	return out
}

// Failure explains a false verdict as a value that code can read: which
// checker found what, about which operations.
type Failure struct {
	// Checker names the checker that found it, the names of composed
	// checkers joined by "/" ("linear", or "txn/append").
	Checker string
	// Summary says what is wrong in one line.
	Summary string
	// Op is the operation the failure is about (the one no linearization
	// gets past; an anomaly's first), when there is one.
	Op *OpRef
	// Ops are all the operations the failure names.
	Ops []OpRef
	// Linear is the linearizability checker's whole explanation (the
	// longest linearizable prefix and its state), for its failures.
	Linear *lincheck.Failure
	// Anomalies are the transactional checker's findings by type, for its
	// failures.
	Anomalies map[string][]isolation.Anomaly
}

// Error makes a Failure an error, "checker: summary".
func (f *Failure) Error() string {
	if f.Checker == "" {
		return f.Summary
	}
	return f.Checker + ": " + f.Summary
}

// Checker returns the result of the checker of that name among the
// checkers composed into r, at any depth (the shallowest first, then by
// name), and whether there is one.
func (r Result) Checker(name string) (Result, bool) {
	if c, ok := r.Checkers[name]; ok {
		return c, true
	}
	for _, n := range slices.Sorted(maps.Keys(r.Checkers)) {
		if c, ok := r.Checkers[n].Checker(name); ok {
			return c, true
		}
	}
	return Result{}, false
}

// FirstFailure returns r's failure, or the first of its composed
// checkers' (by name, depth first), with Checker naming where it was found;
// nil when none explained a false verdict.
func (r Result) FirstFailure() *Failure {
	if r.Failure != nil {
		return r.Failure
	}
	for _, n := range slices.Sorted(maps.Keys(r.Checkers)) {
		if f := r.Checkers[n].FirstFailure(); f != nil {
			c := *f
			if c.Checker == "" {
				c.Checker = n
			} else {
				c.Checker = n + "/" + c.Checker
			}
			return &c
		}
	}
	return nil
}

// Panicked lists the panics that ended r's checker or any composed into
// it, each as "NAME panicked: TEXT".
func (r Result) Panicked() []string {
	var out []string
	if r.Panic != "" {
		out = append(out, r.Panic)
	}
	for _, n := range slices.Sorted(maps.Keys(r.Checkers)) {
		for _, p := range r.Checkers[n].Panicked() {
			if !strings.HasPrefix(p, n+" ") {
				p = n + ": " + p
			}
			out = append(out, p)
		}
	}
	return out
}

// Panicked is the result of a checker that panicked: unknown, with the
// panic's text as its error.
func Panicked(name string, p any) Result {
	msg := fmt.Sprintf("%s panicked: %v", name, p)
	return Result{Valid: linear.Unknown, Fields: map[string]any{"error": msg}, Panic: msg}
}
