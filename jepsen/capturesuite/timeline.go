package capturesuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/report"
)

// withTimeline runs the test's checkers, then rewrites the run's
// timeline.html with the capture test's story: the perf checker draws the
// page while the others still judge, so it knows neither the verdict nor
// the provider's record; this page adds both. A page that cannot be
// written is recorded in the result, never a change of verdict: pages are
// for people.
func withTimeline(col *collected, concurrency int, inner checker.Checker) checker.Checker {
	return checker.Func(func(ctx context.Context, r *checker.Run) checker.Result {
		// Every page the checkers write (linear.html among them) names
		// the processes as this one does.
		r.Names = processNames(concurrency)
		res := inner.Check(ctx, r)
		if r.Dir == "" {
			return res
		}
		var page bytes.Buffer
		err := report.TimelineWith(&page, r.Events, story(col, concurrency, r, res))
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

// story is what the capture test's timeline shows beyond the history.
func story(col *collected, concurrency int, r *checker.Run, res checker.Result) report.TimelineOptions {
	o := report.TimelineOptions{
		Title: r.Name, Faults: r.Faults, Verdict: verdictWord(res.Valid),
		Names: processNames(concurrency),
	}
	end := int64(0)
	for _, e := range r.Events {
		end = max(end, e.Time)
	}
	for _, m := range col.mutations {
		end = max(end, mutationTime(m, r.StartMono))
	}
	lanes, gaps := providerLanes(col.mutations, r.StartMono, end)
	o.Lanes = lanes
	o.Marks = readMarks(r, gaps)

	byName, _ := res.Fields["checkers"].(map[string]checker.Result)
	// The cause before its effects: the header lists the fence first,
	// then what a stale action breaks, then the rest by name.
	rank := func(n string) int {
		if i := slices.Index(headerOrder, n); i >= 0 {
			return i
		}
		return len(headerOrder)
	}
	names := slices.Sorted(maps.Keys(byName))
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	for _, name := range names {
		cr := byName[name]
		s := report.CheckerSummary{Name: name, Verdict: cr.Valid.String(), Summary: summary(name, cr)}
		switch name {
		case "fence":
			s.Findings = staleFindings(col.mutations, r.StartMono)
		case "single-holder":
			for _, g := range gaps {
				if g.holders > 1 {
					s.Findings = append(s.Findings, g.finding())
				}
			}
		case "availability":
			// The checker's own periods in its words, those that failed it
			// first.
			periods, _ := cr.Fields["periods"].([]outage)
			var failed, others []report.Finding
			for _, p := range periods {
				f := report.Finding{Text: p.words(), Timed: true, At: time.Duration(p.Start), End: time.Duration(p.End)}
				if p.Outside > outageBound {
					f.Text += fmt.Sprintf(", over the %v bound", outageBound)
					failed = append(failed, f)
				} else {
					others = append(others, f)
				}
			}
			s.Findings = append(failed, others...)
		case "linear":
			if f, ok := linearFinding(cr, col.mutations, r.StartMono); ok {
				s.Findings = append(s.Findings, f)
			}
		case "convergence":
			s.Findings = convergenceFindings(cr, end)
		}
		if len(s.Findings) == 0 && cr.Valid != linear.True {
			s.Findings = examples(cr)
		}
		o.Checkers = append(o.Checkers, s)
	}
	// Outages are evidence whatever the checkers make of them: an address
	// no NIC held is an address nobody could reach.
	out := report.CheckerSummary{Name: "no holder", Verdict: "none"}
	for _, g := range gaps {
		if g.holders == 0 {
			out.Findings = append(out.Findings, g.finding())
		}
	}
	if _, ok := byName["availability"]; !ok && len(out.Findings) > 0 {
		out.Verdict = fmt.Sprintf("%d periods", len(out.Findings))
		o.Checkers = append(o.Checkers, out)
	}
	return o
}

// headerOrder is the order of the checkers the header lists first.
var headerOrder = []string{"fence", "single-holder", "availability", "linear", "convergence", "failover"}

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

// processNames names the harness's processes on every page of a capture
// run: the nemesis, the provider's record merged into the history, and
// each client by its thread, with the process number when the thread
// crashed and went on under a new one.
func processNames(concurrency int) func(history.Process) string {
	return report.ProcessNames(concurrency, map[history.Process]string{mutationProcess: "provider"})
}

// processName is processNames(concurrency)'s name of p.
func processName(p history.Process, concurrency int) string { return processNames(concurrency)(p) }

// short names the simulator's calls on the page.
var short = map[string]string{
	"assign-secondary-ip": "assign", "unassign-secondary-ip": "unassign",
	"ensure-forwarding-enabled": "forward on", "ensure-forwarding-disabled": "forward off",
}

// gap is a period in which an address had no holder, or more than one.
type gap struct {
	address    string
	holders    int
	nics       []string
	start, end int64 // ns on the history's clock
}

func (g gap) finding() report.Finding {
	what := "no holder"
	if g.holders > 1 {
		what = "on " + strings.Join(g.nics, " and ")
	}
	return report.Finding{Timed: true, At: time.Duration(g.start), End: time.Duration(g.end),
		Text: fmt.Sprintf("%s %s from %.3fs to %.3fs (%v)", g.address, what, float64(g.start)/1e9, float64(g.end)/1e9,
			time.Duration(g.end-g.start).Round(time.Millisecond))}
}

// providerLanes turns the simulator's record into the page's lanes: one of
// every mutation it applied, stale ones in red with their epochs, and one
// per address of who held it, its periods with no holder or two in red.
// It also returns those periods.
func providerLanes(ms []mutationRecord, startMono, end int64) ([]report.Lane, []gap) {
	stale := map[int]provider.Stale{}
	for _, s := range provider.StaleMutations(toMutations(ms)) {
		stale[s.Index] = s
	}
	lane := report.Lane{Name: "provider"}
	holders := map[string][]string{} // address → NICs, in the order they came
	since := map[string]int64{}
	var order []string
	byAddr := map[string]*report.Lane{}
	var gaps []gap
	closePeriod := func(a string, t int64) {
		h, l := holders[a], byAddr[a]
		if t <= since[a] && len(h) != 1 {
			return
		}
		ev := report.LaneEvent{At: time.Duration(since[a]), End: time.Duration(t)}
		switch len(h) {
		case 1:
			ev.Text, ev.Detail = h[0], a+" on "+h[0]
		case 0:
			ev.Text, ev.Detail, ev.Bad = "no holder", a+" on no NIC: unreachable", true
			gaps = append(gaps, gap{address: a, holders: 0, start: since[a], end: t})
		default:
			ev.Text, ev.Detail, ev.Bad = fmt.Sprintf("%d holders", len(h)), a+" on "+strings.Join(h, " and ")+" at once", true
			gaps = append(gaps, gap{address: a, holders: len(h), nics: slices.Clone(h), start: since[a], end: t})
		}
		l.Events = append(l.Events, ev)
	}
	for i, m := range ms {
		// The cluster starts before the history's clock does: what it did
		// then is drawn at 0, its time in the tooltip.
		t := max(mutationTime(m, startMono), 0)
		f := short[m.Call]
		if f == "" {
			f = m.Call
		}
		ev := report.LaneEvent{At: time.Duration(t), Text: fmt.Sprintf("%s %s %s e%d", f, m.Address, m.NIC, m.Epoch),
			Detail: fmt.Sprintf("mutation %d: %s %s on %s at epoch %d", i, m.Call, m.Address, m.NIC, m.Epoch)}
		if m.From != "" {
			ev.Detail += " (from " + m.From + ")"
		}
		if raw := mutationTime(m, startMono); raw < 0 {
			ev.Detail += fmt.Sprintf(", %.3fs before the test started", float64(-raw)/1e9)
		}
		if s, ok := stale[i]; ok {
			if s.Effective {
				ev.Bad = true
				ev.Text = fmt.Sprintf("STALE %s %s epoch %d after %d", f, m.Address, m.Epoch, s.High)
				ev.Detail += fmt.Sprintf(": stale, epoch %d after %d, and it executed", m.Epoch, s.High)
			} else {
				ev.Detail += fmt.Sprintf(": stale (epoch %d after %d) on a NIC that no longer held the address: harmless", m.Epoch, s.High)
			}
		}
		lane.Events = append(lane.Events, ev)

		if m.Address == "" || (m.Call != "assign-secondary-ip" && m.Call != "unassign-secondary-ip") {
			continue
		}
		a := m.Address
		if byAddr[a] == nil {
			byAddr[a] = &report.Lane{Name: "holder " + a}
			order = append(order, a)
			since[a] = t
		}
		before := slices.Clone(holders[a])
		h := holders[a]
		if m.Call == "assign-secondary-ip" {
			h = slices.DeleteFunc(h, func(n string) bool { return n == m.From || n == m.NIC })
			h = append(h, m.NIC)
		} else {
			h = slices.DeleteFunc(h, func(n string) bool { return n == m.NIC })
		}
		if slices.Equal(before, h) {
			continue
		}
		holders[a] = before
		closePeriod(a, t)
		holders[a], since[a] = h, t
	}
	for _, a := range order {
		closePeriod(a, end)
	}
	out := []report.Lane{lane}
	slices.Sort(order)
	for _, a := range order {
		out = append(out, *byAddr[a])
	}
	return out, gaps
}

// readMarks marks the reads that found no holder, and those that ran while
// their address was on two NICs.
func readMarks(r *checker.Run, gaps []gap) map[int]string {
	marks := map[int]string{}
	for _, o := range r.Ops {
		if o.F != "read" || o.Return < 0 {
			continue
		}
		in, _ := o.Input.(map[string]history.Value)
		a, _ := in["address"].(string)
		if o.Type == history.OK {
			if out, _ := o.Output.(map[string]history.Value); out != nil && out["holder"] == nil {
				marks[o.Call] = "found no holder for " + a
				continue
			}
		}
		start, stop := r.Events[o.Call].Time, r.Events[o.Return].Time
		for _, g := range gaps {
			if g.holders > 1 && g.address == a && g.start < stop && start < g.end {
				marks[o.Call] = fmt.Sprintf("ran while %s was on %s", a, strings.Join(g.nics, " and "))
				break
			}
		}
	}
	return marks
}

// staleFindings are the stale mutations that executed, each at its moment,
// in the fence checker's words.
func staleFindings(ms []mutationRecord, startMono int64) []report.Finding {
	var out []report.Finding
	for _, s := range provider.StaleMutations(toMutations(ms)) {
		if !s.Effective {
			continue
		}
		m := s.Mutation
		t := mutationTime(ms[s.Index], startMono)
		f := short[ms[s.Index].Call]
		if f == "" {
			f = ms[s.Index].Call
		}
		out = append(out, report.Finding{Timed: true, At: time.Duration(max(t, 0)),
			Text: fmt.Sprintf("mutation %d at %.3fs: %s %s on %s at epoch %d, after epoch %d",
				s.Index, float64(t)/1e9, m.Call, m.Address, m.NIC, m.Epoch, s.High),
			// The provider lane's text of this mutation (providerLanes).
			Pin: fmt.Sprintf("STALE %s %s epoch %d after %d", f, m.Address, m.Epoch, s.High)})
	}
	return out
}

// linearFinding places the capture-owner model's failing operation: when
// it is one of the provider's mutations, at the moment the simulator
// applied it.
func linearFinding(cr checker.Result, ms []mutationRecord, startMono int64) (report.Finding, bool) {
	raw, err := json.Marshal(cr.Fields["failure"])
	if err != nil || string(raw) == "null" {
		return report.Finding{}, false
	}
	var f struct {
		Partition string `json:"partition"`
		State     string `json:"state"`
		Op        struct {
			F     string `json:"f"`
			Op    string `json:"op"`
			Value struct {
				Address string `json:"address"`
				NIC     string `json:"nic"`
				Epoch   uint64 `json:"epoch"`
			} `json:"value"`
		} `json:"op"`
	}
	if json.Unmarshal(raw, &f) != nil || f.Op.Op == "" {
		return report.Finding{}, false
	}
	text := fmt.Sprintf("%s: no order of the operations gets past %s (state: %s)", f.Partition, f.Op.Op, f.State)
	for _, m := range ms {
		if short[m.Call] == f.Op.F && m.Address == f.Op.Value.Address && m.NIC == f.Op.Value.NIC && m.Epoch == f.Op.Value.Epoch {
			t := mutationTime(m, startMono)
			return report.Finding{Text: fmt.Sprintf("%s, at %.3fs", text, float64(t)/1e9), Timed: true, At: time.Duration(t)}, true
		}
	}
	return report.Finding{Text: text}, true
}

// convergenceFindings are the addresses that did not come to rest where
// the nodes wanted them, from the final heal to the end of the record.
func convergenceFindings(cr checker.Result, end int64) []report.Finding {
	desired, _ := cr.Fields["desired"].(map[string]string)
	actual, _ := cr.Fields["actual"].(map[string]string)
	heal, _ := cr.Fields["heal_s"].(float64)
	at := time.Duration(heal * 1e9)
	var out []report.Finding
	for _, a := range slices.Sorted(maps.Keys(desired)) {
		if desired[a] == actual[a] {
			continue
		}
		shows := "on no NIC"
		if actual[a] != "" {
			shows = "on " + actual[a]
		}
		out = append(out, report.Finding{Timed: true, At: at, End: max(at, time.Duration(end)),
			Text: fmt.Sprintf("%s did not settle after the heal at %.3fs: the nodes want it on %s, the provider shows it %s", a, heal, desired[a], shows)})
	}
	return out
}

// examples are a checker's findings or examples, for checkers this file
// does not know: untimed.
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

// summary is a few words of a known checker's figures.
func summary(name string, cr checker.Result) string {
	f := cr.Fields
	switch name {
	case "fence":
		return fmt.Sprintf("%v stale actions executed", f["stale_actions_executed"])
	case "single-holder":
		return fmt.Sprintf("dual-holder %v ms", f["dual_holder_ms"])
	case "failover":
		return fmt.Sprintf("%v failovers", f["failovers"])
	case "convergence":
		if c, ok := f["convergence_s"].(float64); ok {
			return fmt.Sprintf("last move %.3fs after the heal", c)
		}
	case "availability":
		return fmt.Sprintf("no holder %v ms, %v ms outside faults", f["no_holder_ms"], f["outside_faults_ms"])
	case "linear":
		if m, ok := f["model"].(string); ok {
			return m + " model"
		}
	}
	return ""
}
