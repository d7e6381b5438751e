package capturesuite

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/report"
)

// onpremRecord is what the on-premises run knows beside its history: the
// ARP observer's report, when the observer started (CLOCK_MONOTONIC, to
// place its offsets on the history's clock), and which host each MAC is.
type onpremRecord struct {
	report    arpwatch.Report
	startMono int64
	hosts     map[string]string // MAC → host
}

// withOnPremStory names the processes for every page, runs the checkers,
// then rewrites timeline.html with the on-premises story: a lane per
// address of who answered ARP for it, no-responder and two-responder
// periods in red, and the verdict with each checker's findings in the
// header. A page that cannot be written is recorded in the result, never
// a change of verdict.
func withOnPremStory(rec *onpremRecord, concurrency int, inner checker.Checker) checker.Checker {
	return checker.Func(func(ctx context.Context, r *checker.Run) checker.Result {
		r.Names = report.ProcessNames(concurrency, nil)
		res := inner.Check(ctx, r)
		if r.Dir == "" {
			return res
		}
		var page bytes.Buffer
		err := report.TimelineWith(&page, r.Events, onpremStory(rec, r, res))
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

// responderPeriod is an interval of the observer's record on the history's
// clock, its responders by host name.
type responderPeriod struct {
	address    string
	hosts      []string
	start, end time.Duration
}

func (p responderPeriod) finding() report.Finding {
	what := "no responder"
	if len(p.hosts) > 1 {
		what = "answered by " + strings.Join(p.hosts, " and ")
	}
	return report.Finding{Timed: true, At: p.start, End: p.end,
		Text: fmt.Sprintf("%s %s from %.3fs to %.3fs (%v)", p.address, what, p.start.Seconds(), p.end.Seconds(),
			(p.end - p.start).Round(time.Millisecond))}
}

// responderLanes turns the observer's record into a lane per address of
// who answered ARP for it, and returns its periods. Offsets are moved by
// shift onto the history's clock; what the observer saw before the
// history began is drawn from 0.
func responderLanes(rep arpwatch.Report, hosts map[string]string, shift time.Duration) ([]report.Lane, []responderPeriod) {
	var lanes []report.Lane
	var periods []responderPeriod
	for _, a := range rep.Addresses {
		l := report.Lane{Name: "ARP " + a.Address.String()}
		for _, iv := range a.Intervals {
			p := responderPeriod{address: a.Address.String(), start: max(iv.Start+shift, 0), end: max(iv.End+shift, 0)}
			for _, m := range iv.Responders {
				p.hosts = append(p.hosts, hostOf(m, hosts))
			}
			if p.end <= 0 {
				continue
			}
			ev := report.LaneEvent{At: p.start, End: p.end}
			switch len(p.hosts) {
			case 0:
				ev.Text, ev.Detail, ev.Bad = "no responder", a.Address.String()+": nobody answered ARP", true
			case 1:
				ev.Text, ev.Detail = p.hosts[0], a.Address.String()+" answered by "+p.hosts[0]
			default:
				ev.Text, ev.Bad = strings.Join(p.hosts, "+"), true
				ev.Detail = a.Address.String() + " answered by " + strings.Join(p.hosts, " and ") + " at once: two hosts capture it"
			}
			ev.Detail += fmt.Sprintf(" (observer: %.3fs to %.3fs)", iv.Start.Seconds(), iv.End.Seconds())
			l.Events = append(l.Events, ev)
			periods = append(periods, p)
		}
		lanes = append(lanes, l)
	}
	return lanes, periods
}

// hostOf names a MAC by its host, or shows the MAC.
func hostOf(m net.HardwareAddr, hosts map[string]string) string {
	if h, ok := hosts[m.String()]; ok {
		return h
	}
	return m.String()
}

// onpremHeaderOrder is the order of the checkers the header lists first.
var onpremHeaderOrder = []string{"single-holder", "convergence", "stats", "errors"}

// onpremStory is what the on-premises timeline shows beyond the history.
func onpremStory(rec *onpremRecord, r *checker.Run, res checker.Result) report.TimelineOptions {
	o := report.TimelineOptions{Title: r.Name + " (on premises)", Faults: r.Faults, Verdict: verdictWord(res.Valid), Names: r.Names}
	shift := time.Duration(rec.startMono - r.StartMono)
	lanes, periods := responderLanes(rec.report, rec.hosts, shift)
	o.Lanes = lanes
	o.Marks = map[int]string{}
	for _, op := range r.Ops {
		if op.F != "read" || op.Return < 0 {
			continue
		}
		start, stop := time.Duration(r.Events[op.Call].Time), time.Duration(r.Events[op.Return].Time)
		for _, p := range periods {
			if len(p.hosts) != 1 && p.start < stop && start < p.end {
				if len(p.hosts) == 0 {
					o.Marks[op.Call] = "ran while nobody answered ARP for " + p.address
				} else {
					o.Marks[op.Call] = "ran while " + strings.Join(p.hosts, " and ") + " answered ARP for " + p.address
				}
				break
			}
		}
	}

	rank := func(n string) int {
		if i := slices.Index(onpremHeaderOrder, n); i >= 0 {
			return i
		}
		return len(onpremHeaderOrder)
	}
	names := slices.Sorted(maps.Keys(res.Checkers))
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	for _, name := range names {
		cr := res.Checkers[name]
		s := report.CheckerSummary{Name: name, Verdict: cr.Valid.String()}
		switch name {
		case "single-holder":
			s.Summary = fmt.Sprintf("two responders %v ms, none %v ms", cr.Fields["dual_responder_ms"], cr.Fields["no_responder_ms"])
			for _, p := range periods {
				if len(p.hosts) > 1 {
					s.Findings = append(s.Findings, p.finding())
				}
			}
		case "convergence":
			if st, ok := cr.Fields["settled_s"].(float64); ok {
				s.Summary = fmt.Sprintf("settled %.1fs after the final heal", st)
			}
			if cr.Valid != linear.True && len(r.Events) > 0 {
				end := time.Duration(r.Events[len(r.Events)-1].Time)
				s.Findings = append(s.Findings, report.Finding{Timed: true, At: end, End: end,
					Text: fmt.Sprintf("no single host answered for a second on end within %.0fs of the final heal", cr.Fields["bound_s"])})
			}
		case "stats":
			s.Summary = fmt.Sprintf("%v ok, %v failed, %v indeterminate", cr.Fields["ok"], cr.Fields["fail"], cr.Fields["info"])
		}
		if len(s.Findings) == 0 && cr.Valid != linear.True {
			s.Findings = examples(cr)
		}
		o.Checkers = append(o.Checkers, s)
	}
	none := report.CheckerSummary{Name: "no responder"}
	for _, p := range periods {
		if len(p.hosts) == 0 {
			none.Findings = append(none.Findings, p.finding())
		}
	}
	none.Verdict = fmt.Sprintf("%d periods", len(none.Findings))
	o.Checkers = append(o.Checkers, none, failedReads(r), faultWindows(r.Faults))
	return o
}

// failedReads lists the reads that failed, each at its moment: a client
// that could not reach the address.
func failedReads(r *checker.Run) report.CheckerSummary {
	s := report.CheckerSummary{Name: "failed reads"}
	n := 0
	for _, op := range r.Ops {
		if op.Return < 0 || op.Type == history.OK {
			continue
		}
		n++
		if len(s.Findings) == 20 {
			continue
		}
		who := "p" + op.Process.String()
		if r.Names != nil && r.Names(op.Process) != "" {
			who = r.Names(op.Process)
		}
		text := fmt.Sprintf("%s %s by %s at %.3fs", op.Type, op.F, who, float64(r.Events[op.Call].Time)/1e9)
		if op.Error != nil {
			b, err := history.AppendJSON(nil, op.Error)
			if err != nil {
				b = fmt.Append(nil, op.Error)
			}
			text += ": " + string(b)
		}
		s.Findings = append(s.Findings, report.Finding{Text: text, Timed: true,
			At: time.Duration(r.Events[op.Call].Time), End: time.Duration(r.Events[op.Return].Time)})
	}
	s.Verdict = fmt.Sprintf("%d", n)
	return s
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
