package etcdsuite

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/report"
	"github.com/ipfence/ipfence/verify/workload"
)

// withStory names the processes for every page the checkers write, runs
// them, then rewrites timeline.html with the run's story: the perf checker
// draws its page while the others still judge, so it knows neither the
// verdict nor what they found. A page that cannot be written is recorded
// in the result, never a change of verdict.
func withStory(concurrency int, inner checker.Checker) checker.Checker {
	return checker.Func(func(ctx context.Context, r *checker.Run) checker.Result {
		r.Names = report.ProcessNames(concurrency, nil)
		res := inner.Check(ctx, r)
		if r.Dir == "" {
			return res
		}
		var page bytes.Buffer
		err := report.TimelineWith(&page, r.Events, story(r, res))
		if err == nil {
			err = os.WriteFile(filepath.Join(r.Dir, harness.TimelineFile), page.Bytes(), 0o644)
		}
		if err != nil {
			if res.Fields == nil {
				res.Fields = map[string]any{}
			}
			res.Fields["timeline_error"] = err.Error()
		}
		return res
	})
}

// headerOrder is the order of the checkers the header lists first: the
// workload's verdict, then what went wrong around it.
var headerOrder = []string{"transactional", "linear", "set", "errors", "stats"}

// maxMarked bounds the anomalies whose operations are marked: the first
// cycles of each type tell the story; thousands of outlines would hide it.
const maxMarked = 3

// story is what the etcd test's timeline shows beyond the history: the
// verdict and each checker's findings, each at its moment; the operations
// of the first anomalies of each type and the one no linearization gets
// past, marked; the nemesis's windows as findings of their own.
func story(r *checker.Run, res checker.Result) report.TimelineOptions {
	o := report.TimelineOptions{
		Title: r.Name, Faults: r.Faults, Verdict: verdictWord(res.Valid), Names: r.Names,
		Marks: map[int]string{},
	}
	at := atIndex(r)
	rank := func(n string) int {
		if i := slices.Index(headerOrder, n); i >= 0 {
			return i
		}
		return len(headerOrder)
	}
	names := slices.Sorted(maps.Keys(res.Checkers))
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	for _, name := range names {
		cr := res.Checkers[name]
		s := report.CheckerSummary{Name: name, Verdict: cr.Valid.String()}
		switch name {
		case "transactional":
			s.Findings = anomalyFindings(r, cr, at, o.Marks)
		case "linear":
			s.Summary = fmt.Sprintf("%v ops, %v partitions", cr.Fields["ops"], cr.Fields["partitions"])
			if f := cr.Failure; f != nil && f.Op != nil {
				find := report.Finding{Text: f.Summary}
				if f.Op.Op != "" {
					find.Text = fmt.Sprintf("%s: %s", f.Op.Op, f.Summary)
				}
				if pos, ok := at[f.Op.InvokeIndex]; ok {
					find.Timed, find.At, find.End = true, time.Duration(r.Events[pos].Time), opEnd(r, pos)
					o.Marks[pos] = "no linearization gets past this op: " + f.Summary
				}
				s.Findings = append(s.Findings, find)
			}
		case "set":
			s.Summary, _ = cr.Fields["summary"].(string)
			s.Findings = setFindings(r, cr, at, o.Marks)
		case "stats":
			s.Summary = fmt.Sprintf("%v ok, %v failed, %v indeterminate", cr.Fields["ok"], cr.Fields["fail"], cr.Fields["info"])
		}
		if len(s.Findings) == 0 && cr.Valid != linear.True {
			s.Findings = examples(cr)
		}
		o.Checkers = append(o.Checkers, s)
	}
	o.Checkers = append(o.Checkers, outcomes(r), faultWindows(r.Faults))
	return o
}

// verdictWord is a run's verdict as the terminal prints it.
func verdictWord(v linear.Verdict) string {
	switch v {
	case linear.True:
		return "valid"
	case linear.False:
		return "invalid"
	}
	return "unknown"
}

// atIndex maps each event's Index to its position in the events: the
// checkers name operations by the indices of the history file.
func atIndex(r *checker.Run) map[int64]int {
	at := make(map[int64]int, len(r.Events))
	for pos, e := range r.Events {
		at[e.Index] = pos
	}
	return at
}

// opEnd is when the operation invoked at pos completed: its completion's
// time, or its invoke's when it never completed.
func opEnd(r *checker.Run, pos int) time.Duration {
	for _, o := range r.Ops {
		if o.Call == pos {
			if o.Return >= 0 {
				return time.Duration(r.Events[o.Return].Time)
			}
			break
		}
	}
	return time.Duration(r.Events[pos].Time)
}

// anomalyFindings are the transactional checker's anomalies, each with its
// explanation and the span of its transactions; the transactions of the
// first maxMarked of each type are marked with what they are part of.
func anomalyFindings(r *checker.Run, cr checker.Result, at map[int64]int, marks map[int]string) []report.Finding {
	f := cr.Failure
	if f == nil {
		return nil
	}
	var out []report.Finding
	for _, typ := range slices.Sorted(maps.Keys(f.Anomalies)) {
		for k, a := range f.Anomalies[typ] {
			find := report.Finding{Text: typ + ": " + a.Explanation}
			if a.Explanation == "" {
				find.Text = typ
			}
			var first, last time.Duration
			for _, ref := range a.Ops {
				pos, ok := invokeOf(ref, at, r)
				if !ok {
					continue
				}
				start, end := time.Duration(r.Events[pos].Time), opEnd(r, pos)
				if !find.Timed || start < first {
					first = start
				}
				last = max(last, end)
				find.Timed = true
				if k < maxMarked {
					note := fmt.Sprintf("in %s #%d", typ, k+1)
					if prev, ok := marks[pos]; ok && !strings.Contains(prev, note) {
						note = prev + "; " + note
					}
					marks[pos] = note
				}
			}
			find.At, find.End = first, max(last, first)
			out = append(out, find)
		}
	}
	return out
}

// invokeOf finds the position of a transaction's invoke from the
// checker's reference, which gives the invoke's index, and the
// completion's.
func invokeOf(ref isolation.OpRef, at map[int64]int, r *checker.Run) (int, bool) {
	if pos, ok := at[ref.Invoke]; ok && r.Events[pos].Type == history.Invoke {
		return pos, true
	}
	if pos, ok := at[ref.Index]; ok {
		for _, o := range r.Ops {
			if o.Return == pos || o.Call == pos {
				return o.Call, true
			}
		}
	}
	return 0, false
}

// setFindings are the set checker's lost and stale elements, each at the
// read that missed it, which is marked.
func setFindings(r *checker.Run, cr checker.Result, at map[int64]int, marks map[int]string) []report.Finding {
	var out []report.Finding
	place := func(text string, ref workload.OpRef) {
		find := report.Finding{Text: text}
		if pos, ok := at[ref.InvokeIndex]; ok {
			find.Timed, find.At, find.End = true, time.Duration(r.Events[pos].Time), opEnd(r, pos)
			if len(marks) < 50 {
				marks[pos] = text
			}
		}
		out = append(out, find)
	}
	lost, _ := cr.Fields["lost_detail"].([]workload.LostElement)
	for _, l := range lost {
		place(fmt.Sprintf("element %s lost: known from event %d, missing from the read invoked at event %d",
			show(l.Element), l.Known.Index, l.Missing.InvokeIndex), l.Missing)
	}
	stale, _ := cr.Fields["worst_stale"].([]workload.StaleElement)
	for _, s := range stale {
		place(fmt.Sprintf("element %s stale: known from event %d, missing from the read invoked at event %d (%v later)",
			show(s.Element), s.Known.Index, s.Missing.InvokeIndex, time.Duration(s.LatencyNS).Round(time.Millisecond)), s.Missing)
	}
	return out
}

// show renders a value in JSON, the pages' one notation.
func show(v history.Value) string {
	b, err := history.AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// maxOutcomes bounds the failed and indeterminate operations the header
// lists.
const maxOutcomes = 20

// outcomes lists the client operations that did not succeed, apart: those
// that failed (certainly no effect) and those of unknown outcome (they may
// have taken effect at any time after their invoke), each at its moment.
func outcomes(r *checker.Run) report.CheckerSummary {
	var failed, unknown []report.Finding
	nf, ni := 0, 0
	for _, o := range r.Ops {
		if o.Return < 0 {
			continue
		}
		e := r.Events[o.Return]
		what := ""
		switch o.Type {
		case history.Fail:
			nf++
			if len(failed) < maxOutcomes {
				what = "failed"
			}
		case history.Info:
			ni++
			if len(unknown) < maxOutcomes {
				what = "indeterminate"
			}
		}
		if what == "" {
			continue
		}
		who := "p" + o.Process.String()
		if r.Names != nil && r.Names(o.Process) != "" {
			who = r.Names(o.Process)
		}
		text := fmt.Sprintf("%s %s of %s at %.3fs", what, o.F, who, float64(r.Events[o.Call].Time)/1e9)
		if o.Error != nil {
			text += ": " + show(o.Error)
		}
		f := report.Finding{Text: text, Timed: true, At: time.Duration(r.Events[o.Call].Time), End: time.Duration(e.Time)}
		if o.Type == history.Fail {
			failed = append(failed, f)
		} else {
			unknown = append(unknown, f)
		}
	}
	return report.CheckerSummary{Name: "outcomes", Verdict: fmt.Sprintf("%d failed, %d indeterminate", nf, ni),
		Summary: "failed ops certainly took no effect; indeterminate ones may have", Findings: append(unknown, failed...)}
}

// faultWindows lists the nemesis's fault windows, each a link to its
// period.
func faultWindows(faults []report.Fault) report.CheckerSummary {
	s := report.CheckerSummary{Name: "nemesis", Verdict: fmt.Sprintf("%d faults", len(faults))}
	for _, f := range faults {
		end := "the end"
		if f.End > 0 {
			end = fmt.Sprintf("%.3fs", f.End.Seconds())
		}
		s.Findings = append(s.Findings, report.Finding{Text: fmt.Sprintf("%s from %.3fs to %s", f.Name, f.Start.Seconds(), end),
			Timed: true, At: f.Start, End: max(f.End, f.Start)})
	}
	return s
}

// examples are a checker's findings in its own words, untimed.
func examples(cr checker.Result) []report.Finding {
	var out []report.Finding
	for _, key := range []string{"findings", "examples"} {
		if ex, ok := cr.Fields[key].([]string); ok && len(ex) > 0 {
			for _, e := range ex {
				out = append(out, report.Finding{Text: e})
			}
			break
		}
	}
	if e, ok := cr.Fields["error"].(string); ok {
		out = append(out, report.Finding{Text: e})
	}
	return out
}
