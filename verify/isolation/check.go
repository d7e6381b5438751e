package isolation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Options configure a check.
type Options struct {
	// Workload is ListAppend or RWRegister.
	Workload string
	// Consistency is the model the history must satisfy (default
	// strict-serializable); see Models.
	Consistency string
	// SequentialKeys and LinearizableKeys add, for rw-register, the
	// assumption that each key's versions follow process order or real-time
	// order.
	SequentialKeys, LinearizableKeys bool
	// SearchBudget bounds each cycle search, in (transaction, state) pairs
	// visited per component and anomaly class; 0 means DefaultSearchBudget.
	// A search cut short is reported; it never turns into "valid".
	SearchBudget int64
	// MaxPerType caps the anomalies kept of each type (their number is
	// always counted); 0 means 8.
	MaxPerType int
}

// DefaultSearchBudget is the default bound of one cycle search.
const DefaultSearchBudget = 20_000_000

// Result is a check's answer.
type Result struct {
	Workload    string         `json:"model"`
	Consistency string         `json:"consistency"`
	Valid       linear.Verdict `json:"valid"`
	// AnomalyTypes are the types of anomaly found, sorted.
	AnomalyTypes []string `json:"anomaly_types"`
	// Not are the weakest models the anomalies rule out; AlsoNot the
	// stronger ones.
	Not     []string `json:"not"`
	AlsoNot []string `json:"also_not"`
	// Anomalies holds examples of each type; Counts their numbers.
	Anomalies map[string][]Anomaly `json:"anomalies,omitempty"`
	Counts    map[string]int       `json:"counts,omitempty"`
	// Incomplete lists the cycle searches that were cut short.
	Incomplete []string `json:"incomplete,omitempty"`
	Txns       int      `json:"txns"`
	CheckNS    int64    `json:"check_ns"`
}

// Check checks a history against a consistency model.
func Check(ctx context.Context, h *history.History, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ops, _, err := history.Pair(numberProcesses(h.Events))
	if err != nil {
		return nil, err
	}
	p, err := parse(o.Workload, ops)
	if err != nil {
		return nil, err
	}
	return p.check(ctx, o, start), nil
}

// defaults fills in and checks the options.
func (o *Options) defaults() error {
	if o.Workload != ListAppend && o.Workload != RWRegister {
		return fmt.Errorf("workload %q is not %s or %s", o.Workload, ListAppend, RWRegister)
	}
	if o.Consistency == "" {
		o.Consistency = "strict-serializable"
	}
	if err := ValidModel(o.Consistency); err != nil {
		return err
	}
	if o.SearchBudget <= 0 {
		o.SearchBudget = DefaultSearchBudget
	}
	if o.MaxPerType <= 0 {
		o.MaxPerType = 8
	}
	return nil
}

// check analyses parsed transactions.
func (p *parsed) check(ctx context.Context, o Options, start time.Time) *Result {
	an := newAnomalies(o.MaxPerType)
	prohibited := Prohibited(o.Consistency)

	var vs *versions
	var es []edge
	if o.Workload == ListAppend {
		vs, es = p.listAppend(an)
		p.versionConflicts(an, vs)
	} else {
		vs, es = p.rwRegister(an, o)
	}
	needProcess, needRealtime := false, false
	for a := range prohibited {
		needProcess = needProcess || strings.HasSuffix(a, "-process")
		needRealtime = needRealtime || strings.HasSuffix(a, "-realtime")
	}
	if needProcess {
		es = p.processEdges(es)
	}
	if needRealtime {
		es = p.realtimeEdges(es)
	}
	g := build(len(p.txns), es)
	es = nil

	res := &Result{Workload: o.Workload, Consistency: o.Consistency}
	res.Incomplete = p.findCycles(ctx, g, vs, an, prohibited, o.SearchBudget)
	p.cycleExists(g, an, o.Consistency)

	committed := 0
	for t := range p.txns {
		if p.txns[t].typ == history.OK {
			committed++
		}
	}
	res.Txns = len(p.txns)
	res.AnomalyTypes = []string{}
	res.Anomalies, res.Counts = an.byType, an.counts
	for typ := range an.counts {
		res.AnomalyTypes = append(res.AnomalyTypes, typ)
	}
	sort.Strings(res.AnomalyTypes)
	res.Not, res.AlsoNot = Boundary(res.AnomalyTypes)
	if res.Not == nil {
		res.Not = []string{}
	}
	if res.AlsoNot == nil {
		res.AlsoNot = []string{}
	}
	res.Valid = linear.True
	for _, typ := range res.AnomalyTypes {
		if prohibited[typ] {
			res.Valid = linear.False
		}
	}
	if res.Valid == linear.True {
		switch {
		case committed == 0:
			res.Incomplete = append(res.Incomplete, "no transaction committed: nothing to check")
			res.Valid = linear.Unknown
		case an.counts["duplicate-appends"] > 0:
			// The version order cannot be trusted.
			res.Valid = linear.Unknown
		case len(res.Incomplete) > 0:
			res.Valid = linear.Unknown
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Valid == linear.True {
		res.Valid = linear.Unknown
	}
	res.CheckNS = time.Since(start).Nanoseconds()
	return res
}

// anonymousBase is the first process number given to events that named
// none; reports show them without a process.
const anonymousBase history.Process = 1 << 40

// numberProcesses gives events that name no process (Elle's paper example
// has none) processes of their own: each such invoke a new one, and each
// such completion the oldest invoke still open. Events with processes are
// left alone.
func numberProcesses(events []history.Event) []history.Event {
	var out []history.Event
	var open []history.Process
	next := anonymousBase
	for i, e := range events {
		if e.Process != history.NoProcess {
			continue
		}
		if out == nil {
			out = slices.Clone(events)
		}
		if e.Type == history.Invoke {
			out[i].Process = next
			open = append(open, next)
			next++
			continue
		}
		if len(open) > 0 {
			out[i].Process = open[0]
			open = open[1:]
		}
	}
	if out == nil {
		return events
	}
	return out
}

// findCycles runs the searches for the cycle classes the model prohibits,
// most severe first. Every class is searched even when a more severe one
// that implies it was found: the cycles differ, and each tells its own
// story (huge-scc.edn has both a G-single-item-realtime and a
// G2-item-realtime). It returns the searches that were cut short.
func (p *parsed) findCycles(ctx context.Context, g *graph, vs *versions, an *anomalies, prohibited map[string]bool, budget int64) []string {
	var incomplete []string
	comps := map[rel][][]int32{}
	local := make([]int32, g.n)
	for i := range local {
		local[i] = -1
	}
	for _, sp := range allSpecs {
		name := sp.name()
		if !prohibited[name] {
			continue
		}
		mask := sp.mask()
		cs, ok := comps[mask]
		if !ok {
			cs = g.sccs(mask)
			comps[mask] = cs
		}
		found := 0
		for _, comp := range cs {
			if found >= an.max || ctx.Err() != nil {
				break
			}
			s := newSearcher(g, comp, local)
			s.budget = budget
			c, cut := s.searchComponent(ctx, sp)
			s.release()
			if cut {
				incomplete = append(incomplete, fmt.Sprintf("%s in a component of %d transactions: the search budget ran out before any cycle of the class was found", name, len(comp)))
			}
			if c == nil {
				continue
			}
			found++
			an.add(p.cycleAnomaly(c, vs))
		}
	}
	return incomplete
}

// foundTypes lists the anomaly types found so far.
func foundTypes(an *anomalies) []string {
	out := make([]string, 0, len(an.counts))
	for t := range an.counts {
		out = append(out, t)
	}
	return out
}

// cycleAnomaly describes a cycle step by step.
func (p *parsed) cycleAnomaly(c []cycleStep, vs *versions) Anomaly {
	a := Anomaly{Type: classify(c)}
	var b strings.Builder
	for i, st := range c {
		why := p.explainEdge(st.from, st.to, st.kind, vs)
		a.Ops = append(a.Ops, p.ref(st.from))
		a.Cycle = append(a.Cycle, Step{From: p.ref(st.from), To: p.ref(st.to), Rel: st.kind.String(), Why: why})
		if i == len(c)-1 {
			b.WriteString("However, ")
		}
		fmt.Fprintf(&b, "%s < %s because %s", p.name(st.from), p.name(st.to), why)
		if i < len(c)-1 {
			b.WriteString(". ")
		}
	}
	b.WriteString(": a cycle.")
	a.Explanation = b.String()
	return a
}

// explainEdge says why a precedes b by kind r.
func (p *parsed) explainEdge(a, b int32, r rel, vs *versions) string {
	if r == process || r == realtime {
		return p.explainOrderEdge(a, b, r)
	}
	if p.workload == ListAppend {
		return p.explainListEdge(a, b, r, vs)
	}
	return p.explainRegisterEdge(a, b, r, vs)
}

// cycleSubgraphs are the dependency subgraphs whose cycles rule a model
// out, weakest model first.
var cycleSubgraphs = []struct {
	model string
	mask  rel
}{
	{"read-uncommitted", ww},
	{"read-committed", ww | wr},
	{"serializable", ww | wr | rw},
	{"strong-session-read-uncommitted", ww | process},
	{"strong-session-read-committed", ww | wr | process},
	{"strong-session-serializable", ww | wr | rw | process},
	{"strong-read-uncommitted", ww | realtime},
	{"strong-read-committed", ww | wr | realtime},
	{"strict-serializable", ww | wr | rw | realtime},
}

// cycleExists is the fallback when no specific cycle explains a model's
// violation: a strongly connected component of the model's dependency
// subgraph proves a cycle exists, classified or not. Only models the
// checked one implies are looked at, and only when no anomaly found rules
// them out already.
func (p *parsed) cycleExists(g *graph, an *anomalies, model string) {
	within := closure([]string{model}, func(m string) []string { return implies[m] })
	for _, cs := range cycleSubgraphs {
		if !within[cs.model] {
			continue
		}
		not, also := Boundary(foundTypes(an))
		if slices.Contains(not, cs.model) || slices.Contains(also, cs.model) {
			continue
		}
		comps := g.sccs(cs.mask)
		if len(comps) == 0 {
			continue
		}
		smallest := comps[0]
		for _, c := range comps {
			if len(c) < len(smallest) {
				smallest = c
			}
		}
		x := Anomaly{Type: cs.model + "-cycle-exists",
			Explanation: fmt.Sprintf("a cycle of %s dependencies exists among %d transactions (the smallest of %d such components), which %s forbids; no cycle of a named class was found in it",
				cs.mask, len(smallest), len(comps), cs.model)}
		for i, t := range smallest {
			if i == 8 {
				break
			}
			x.Ops = append(x.Ops, p.ref(t))
		}
		an.add(x)
	}
}
