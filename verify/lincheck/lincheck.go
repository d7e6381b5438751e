// Package lincheck checks a history against a model for linearizability and
// reports the answer: a one-line summary, a JSON object, and a self-contained
// HTML page. It is where history, model and the linear checker meet; the
// command line and the harness both call it.
package lincheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// Options configure one check.
type Options struct {
	Model model.Model
	// Semantics overrides model.OptionsFor(the history's format) when set.
	Semantics *model.Options
	// Initial, when HasInitial, overrides the semantics' initial value.
	Initial    history.Value
	HasInitial bool
	// Unpartitioned sets model.Options.Unpartitioned.
	Unpartitioned bool
	// Timeout bounds the search; 0 means none.
	Timeout time.Duration
	// MaxMemory bounds the search's memory in bytes; 0 means the default.
	// CheckDecoder counts the operations it holds against it.
	MaxMemory int64
}

// Report is the answer for one history.
type Report struct {
	File   string         `json:"file"`
	Model  string         `json:"model"`
	Valid  linear.Verdict `json:"valid"`
	Reason string         `json:"reason,omitempty"`
	// Ops counts client operations (an invoke and its completion are one).
	Ops int `json:"ops"`
	// Partitions is the number of independent parts checked.
	Partitions int `json:"partitions"`
	// CheckNS is the time spent compiling and searching, parsing excluded.
	CheckNS int64 `json:"check_ns"`
	// Configs is the number of configurations the search visited, over
	// all partitions: a measure of the work that does not depend on the
	// machine.
	Configs int      `json:"configs"`
	Failure *Failure `json:"failure,omitempty"`

	history *history.History
	// returnIndex is each op's completion Index when there is no history
	// (CheckDecoder).
	returnIndex []int64
	ops         []history.Op
	parts       []linear.Partition
	result      linear.Result
}

// OpRef names one operation of the history.
type OpRef struct {
	Process history.Process `json:"process"`
	F       string          `json:"f"`
	// Index is the completion event's index (-1 when it never completed);
	// InvokeIndex the invoke's.
	Index       int64         `json:"index"`
	InvokeIndex int64         `json:"invoke_index"`
	Type        string        `json:"type"`
	Value       history.Value `json:"value"`
	// Op is the model's rendering, such as "read → 3".
	Op string `json:"op"`
}

// PrefixStep is one operation of a linearizable prefix and the state after.
type PrefixStep struct {
	OpRef
	State string `json:"state"`
}

// Failure explains an invalid verdict.
type Failure struct {
	Partition string `json:"partition,omitempty"`
	// Op is the operation no linearization gets past.
	Op OpRef `json:"op"`
	// State is the state after the longest linearizable prefix.
	State  string `json:"state"`
	Reason string `json:"reason"`
	// Prefix is the longest linearizable prefix of the failing partition,
	// in linearization order.
	Prefix []PrefixStep `json:"prefix"`
	// Prefixes holds the prefix length of every partition found invalid,
	// by label.
	Prefixes map[string]int `json:"prefixes,omitempty"`
}

// Check pairs, compiles and checks one parsed history.
func Check(ctx context.Context, file string, h *history.History, opt Options) (*Report, error) {
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return checkPairedOps(ctx, file, h.Format, ops, opt, h, nil)
}

// CheckDecoder reads, pairs and checks a history as d decodes it: only
// the operations are held, never the file or its events, so a history of
// ten million operations needs memory for its operations alone. The
// report has no events: it makes no HTML page (WriteHTML needs Check's).
// The memory of what is read is bounded by d (Decoder.LimitParsed).
func CheckDecoder(ctx context.Context, file string, d *history.Decoder, opt Options) (*Report, error) {
	format, err := d.Format()
	if err != nil {
		return nil, err
	}
	p := history.Pairer{Track: true}
	for pos := 0; ; pos++ {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if e.Process == history.Nemesis {
			continue
		}
		if err := p.Add(pos, e); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if pos == presizeAfter {
			p.Grow(int(d.ExpectedEvents() / 2))
		}
	}
	if opt.MaxMemory > 0 {
		// The operations share the memory bound with the search, as
		// parsed events do in Check's callers.
		opt.MaxMemory = max(opt.MaxMemory-p.Bytes, 1)
	}
	return checkPairedOps(ctx, file, format, p.Ops, opt, nil, p.ReturnIndex)
}

// presizeAfter is how many events CheckDecoder reads before it sizes its
// operations for the whole input, from the bytes those events took.
const presizeAfter = 10_000

// checkPairedOps compiles and checks a history's operations. Reports name where
// an op completed from h's events or, without them, from returnIndex.
func checkPairedOps(ctx context.Context, file string, format history.Format, ops []history.Op, opt Options, h *history.History, returnIndex []int64) (*Report, error) {
	sem := model.OptionsFor(format)
	if opt.Semantics != nil {
		sem = *opt.Semantics
	}
	if opt.HasInitial {
		sem.Initial = opt.Initial
	}
	if opt.Unpartitioned {
		sem.Unpartitioned = true
	}
	if opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.Timeout)
		defer cancel()
	}
	start := time.Now()
	parts, err := opt.Model.Compile(ops, sem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	res, err := linear.Check(ctx, parts, linear.Options{MaxMemory: opt.MaxMemory})
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := model.SpecError(parts); err != nil {
		// The model's own code failed while the search stepped it (a
		// model.Funcs Step that panicked): no verdict can be trusted.
		res.Valid, res.Reason = linear.Unknown, err.Error()
	}
	r := &Report{
		File: file, Model: opt.Model.Name(), Valid: res.Valid, Reason: res.Reason,
		Ops: len(ops), Partitions: len(parts), CheckNS: elapsed.Nanoseconds(),
		ops: ops, parts: parts, result: res, history: h, returnIndex: returnIndex,
	}
	for _, p := range res.Partitions {
		r.Configs += p.Visited
	}
	if i := res.FirstFailure(); i >= 0 && res.Valid == linear.False {
		r.Failure = r.failure(i)
	}
	return r, nil
}

// ref describes partition p's operation i.
func (r *Report) ref(p, i int) OpRef {
	part := &r.parts[p]
	o := &r.ops[part.Ops[i].ID]
	ref := OpRef{
		Process: o.Process, F: o.F, Index: -1, InvokeIndex: o.Index,
		Type: o.Type.String(), Value: o.Input, Op: linear.OpString(part.Spec, i),
	}
	if o.Return >= 0 {
		if r.history != nil {
			ref.Index = r.history.Events[o.Return].Index
		} else {
			ref.Index = r.returnIndex[part.Ops[i].ID]
		}
		if o.Type == history.OK {
			ref.Value = o.Output
		}
	}
	return ref
}

func (r *Report) failure(p int) *Failure {
	pr := &r.result.Partitions[p]
	part := &r.parts[p]
	f := &Failure{Partition: pr.Label}
	steps := linear.Replay(part.Spec, pr.Prefix)
	state := part.Spec.Init()
	for _, s := range steps {
		f.Prefix = append(f.Prefix, PrefixStep{OpRef: r.ref(p, s.Op), State: linear.StateString(part.Spec, s.After)})
		state = s.After
	}
	f.State = linear.StateString(part.Spec, state)
	if pr.Failed >= 0 {
		f.Op = r.ref(p, pr.Failed)
		f.Reason = fmt.Sprintf("no order of the operations gets past this one; the longest linearizable prefix (%d ops) ends in state %s",
			len(f.Prefix), f.State)
	} else {
		f.Reason = "no linearization exists"
	}
	for _, q := range r.result.Partitions {
		if q.Valid == linear.False && len(r.result.Partitions) > 1 {
			if f.Prefixes == nil {
				f.Prefixes = map[string]int{}
			}
			f.Prefixes[q.Label] = len(q.Prefix)
		}
	}
	return f
}

// Summary is the one-line answer for people.
func (r *Report) Summary() string {
	head := fmt.Sprintf("%s: %s (%s, %d ops, %s)", r.File, verdictWord(r.Valid), r.Model, r.Ops, time.Duration(r.CheckNS).Round(time.Microsecond))
	switch {
	case r.Failure != nil:
		f := r.Failure
		where := ""
		if f.Partition != "" {
			where = " in " + f.Partition
		}
		done := fmt.Sprintf("completed at index %d", f.Op.Index)
		if f.Op.Index < 0 {
			done = "never completed"
		}
		return fmt.Sprintf("%s\n  process %s %s (invoked at index %d, %s)%s: %s", head, f.Op.Process, f.Op.Op, f.Op.InvokeIndex, done, where, f.Reason)
	case r.Valid == linear.Unknown:
		return head + ": " + r.Reason
	}
	return head
}

func verdictWord(v linear.Verdict) string {
	switch v {
	case linear.True:
		return "linearizable"
	case linear.False:
		return "NOT linearizable"
	}
	return "unknown"
}
