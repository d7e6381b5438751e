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

// Result is a check's answer, in Elle's terms: Valid is false when an
// anomaly the model forbids was found, unknown when nothing forbidden was
// found but the check could not vouch for the history (no dependency to
// check, a search cut short, the test's own assumptions broken), and true
// otherwise.
type Result struct {
	Workload    string         `json:"model"`
	Consistency string         `json:"consistency"`
	Valid       linear.Verdict `json:"valid"`
	// AnomalyTypes are the types of what was found that the model forbids,
	// and of what makes the verdict unknown (empty-transaction-graph,
	// cycle-search-timeout), sorted: empty when Valid is true.
	AnomalyTypes []string `json:"anomaly_types"`
	// Not are the weakest models the anomalies found (forbidden or
	// allowed) rule out; AlsoNot the stronger ones. Both are empty when
	// Valid is true, as Elle leaves them out.
	Not     []string `json:"not"`
	AlsoNot []string `json:"also_not"`
	// Anomalies holds examples of each of AnomalyTypes; Counts the
	// numbers of every type found, allowed ones and broken assumptions
	// included.
	Anomalies map[string][]Anomaly `json:"anomalies,omitempty"`
	Counts    map[string]int       `json:"counts,omitempty"`
	// AllowedTypes and Allowed are the anomalies found that the model
	// allows (write skew under snapshot isolation, ...): facts about the
	// history, not failures.
	AllowedTypes []string             `json:"allowed_types,omitempty"`
	Allowed      map[string][]Anomaly `json:"allowed,omitempty"`
	// Assumptions holds inputs that break the test's own assumptions (a
	// value appended or written twice), which make the verdict unknown:
	// they say nothing about the database, but no inference from the
	// values they reuse can be trusted.
	Assumptions map[string][]Anomaly `json:"assumptions,omitempty"`
	// Incomplete lists the cycle searches that were cut short.
	Incomplete []string `json:"incomplete,omitempty"`
	Txns       int      `json:"txns"`
	CheckNS    int64    `json:"check_ns"`
}

// assumptionTypes are the findings that break the test's assumptions
// rather than show a database anomaly; unknownTypes those that leave the
// verdict unknown.
var (
	assumptionTypes = map[string]bool{"duplicate-appends": true, "duplicate-writes": true}
	unknownTypes    = map[string]bool{"empty-transaction-graph": true, "cycle-search-timeout": true}
)

// Check checks a history against a consistency model.
func Check(ctx context.Context, h *history.History, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	events := numberProcesses(h.Events)
	ops, _, err := history.Pair(events)
	if err != nil {
		return nil, err
	}
	p, err := parse(o.Workload, events, ops)
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
	o.Consistency = CanonicalModel(o.Consistency)
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
	var es *edges
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
	p.cycleExists(g, an, o.Consistency, len(res.Incomplete) > 0 || ctx.Err() != nil)

	committed := 0
	for t := range p.txns {
		if p.txns[t].typ == history.OK {
			committed++
		}
	}
	if len(g.to) == 0 {
		// Elle's empty transaction graph: no dependency between any two
		// transactions, so no cycle could be looked for.
		x := Anomaly{Type: "empty-transaction-graph", Explanation: "no transaction depends on another (nothing read what another wrote, or overwrote what another read), so no dependency cycle could be checked"}
		if committed == 0 {
			x.Explanation = "no transaction committed: nothing to check"
		}
		an.add(x)
	}
	for _, inc := range res.Incomplete {
		an.add(Anomaly{Type: "cycle-search-timeout", Explanation: inc})
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		an.add(Anomaly{Type: "cycle-search-timeout", Explanation: "the time allowed ran out before every search finished"})
	}
	res.Txns = len(p.txns)
	res.Counts = an.counts
	res.AnomalyTypes = []string{}
	var found []string
	for typ := range an.counts {
		switch {
		case assumptionTypes[typ]:
			if res.Assumptions == nil {
				res.Assumptions = map[string][]Anomaly{}
			}
			res.Assumptions[typ] = an.byType[typ]
		case prohibited[typ] || unknownTypes[typ]:
			res.AnomalyTypes = append(res.AnomalyTypes, typ)
			if res.Anomalies == nil {
				res.Anomalies = map[string][]Anomaly{}
			}
			res.Anomalies[typ] = an.byType[typ]
		default:
			res.AllowedTypes = append(res.AllowedTypes, typ)
			if res.Allowed == nil {
				res.Allowed = map[string][]Anomaly{}
			}
			res.Allowed[typ] = an.byType[typ]
		}
		if !assumptionTypes[typ] && !unknownTypes[typ] {
			found = append(found, typ)
		}
	}
	sort.Strings(res.AnomalyTypes)
	sort.Strings(res.AllowedTypes)
	res.Not, res.AlsoNot = []string{}, []string{}
	res.Valid = linear.True
	for _, typ := range res.AnomalyTypes {
		if prohibited[typ] {
			res.Valid = linear.False
		}
	}
	if res.Valid == linear.True && (len(res.AnomalyTypes) > 0 || len(res.Assumptions) > 0) {
		res.Valid = linear.Unknown
	}
	if len(res.Assumptions) > 0 {
		// Elle stops at a reused value: every inference that used it is
		// suspect, the anomalies found included.
		res.Valid = linear.Unknown
	}
	if res.Valid != linear.True {
		not, also := Boundary(found)
		if not != nil {
			res.Not = not
		}
		if also != nil {
			res.AlsoNot = also
		}
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
	var found1 []foundCycle
	comps := map[rel][][]int32{}
	local := make([]int32, g.n)
	for i := range local {
		local[i] = -1
	}
	// The components of the subgraph of every kind a search may use
	// bound those of each search's kinds (see sccsWithin).
	union := rel(0)
	for _, sp := range allSpecs {
		if prohibited[sp.name()] {
			union |= sp.mask()
		}
	}
	outer := g.sccs(union)
	within := make([]int32, g.n)
	for i := range within {
		within[i] = -1
	}
	for i, c := range outer {
		for _, v := range c {
			within[v] = int32(i)
		}
	}
	comps[union] = byFirst(outer)
	for _, sp := range allSpecs {
		name := sp.name()
		if !prohibited[name] {
			continue
		}
		mask := sp.mask()
		cs, ok := comps[mask]
		if !ok {
			cs = byFirst(g.sccsWithin(mask, within))
			comps[mask] = cs
		}
		found := 0
		for _, comp := range cs {
			if found >= an.max || ctx.Err() != nil {
				break
			}
			s := newSearcher(g, comp, local)
			if sp.class == classGNonadjacent && impliedIn(found1, name, local) {
				// A G-single of this component already is a
				// G-nonadjacent (Elle skips such searches too); looking
				// for a longer one would only cost time.
				s.release()
				continue
			}
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
			x := p.cycleAnomaly(c, vs)
			found1 = append(found1, foundCycle{x.Type, c[0].from})
			an.add(x)
		}
	}
	return incomplete
}

// byFirst orders components by their first transaction (their nodes are
// sorted), so that the searches look at them in the history's order,
// whichever subgraph they were found in.
func byFirst(cs [][]int32) [][]int32 {
	slices.SortFunc(cs, func(a, b []int32) int { return int(a[0] - b[0]) })
	return cs
}

// foundCycle is a cycle found: its type and one of its transactions.
type foundCycle struct {
	typ string
	at  int32
}

// impliedIn says whether a cycle already found in the component whose
// transactions local numbers is of a type that implies anomaly name.
func impliedIn(found []foundCycle, name string, local []int32) bool {
	for _, f := range found {
		if local[f.at] >= 0 && closure([]string{f.typ}, func(a string) []string { return impliedAnomalies[a] })[name] {
			return true
		}
	}
	return false
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
// out, weakest model first, with the anomaly Elle names for each. A
// subgraph is the edges of kinds mask, or, when ext is set, Elle's
// extension of it by one rw step: a → c when a → b by mask and b → c by
// rw. A cycle of the extension is a cycle of the whole graph in which no
// rw edge follows another, which snapshot isolation forbids (Cerone and
// Gotsman's characterization; Elle's G-nonadjacent family). Such a
// closed walk always holds a simple cycle of that shape (split it at a
// repeated transaction: the two junctions cannot both join two rw
// edges, as the walk's own junction then would), so the named searches
// find one whenever this fallback fires, unless their budget ran out.
var cycleSubgraphs = []struct {
	model, anomaly string
	mask           rel
	ext            bool
}{
	{"read-uncommitted", "PL-1-cycle-exists", ww, false},
	{"read-committed", "PL-2-cycle-exists", ww | wr, false},
	{"snapshot-isolation", "PL-SI-cycle-exists", ww | wr, true},
	{"repeatable-read", "PL-2.99-cycle-exists", ww | wr | rw, false},
	{"serializable", "PL-3-cycle-exists", ww | wr | rw, false},
	{"strong-session-read-uncommitted", "strong-session-PL-1-cycle-exists", ww | process, false},
	{"strong-session-read-committed", "strong-session-PL-2-cycle-exists", ww | wr | process, false},
	{"strong-session-snapshot-isolation", "strong-session-snapshot-isolation-cycle-exists", ww | wr | process, true},
	{"strong-session-serializable", "strong-session-serializable-cycle-exists", ww | wr | rw | process, false},
	{"strong-read-uncommitted", "strong-PL-1-cycle-exists", ww | realtime, false},
	{"strong-read-committed", "strong-PL-2-cycle-exists", ww | wr | realtime, false},
	{"strong-snapshot-isolation", "strong-snapshot-isolation-cycle-exists", ww | wr | realtime, true},
	{"strict-serializable", "PL-SS-cycle-exists", ww | wr | rw | realtime, false},
}

// cycleExists is the fallback when no specific cycle explains a model's
// violation: a strongly connected component of the model's dependency
// subgraph proves a cycle exists, classified or not. Only models the
// checked one implies are looked at, and only when no anomaly found rules
// them out already.
//
// The subgraphs are looked at only when some search was cut short: every
// cycle of one holds a simple cycle of a class the model forbids (for the
// extensions, see cycleSubgraphs), which the named searches find when they
// run to the end, so then the fallback has nothing to add.
func (p *parsed) cycleExists(g *graph, an *anomalies, model string, cut bool) {
	within := closure([]string{model}, func(m string) []string { return implies[m] })
	for _, cs := range cycleSubgraphs {
		if !within[cs.model] || !cut {
			continue
		}
		not, also := Boundary(foundTypes(an))
		if slices.Contains(not, cs.model) || slices.Contains(also, cs.model) {
			continue
		}
		var comps [][]int32
		if cs.ext {
			comps = g.extensionSCCs(cs.mask, rw)
		} else {
			comps = g.sccs(cs.mask)
		}
		if len(comps) == 0 {
			continue
		}
		smallest := comps[0]
		for _, c := range comps {
			if len(c) < len(smallest) {
				smallest = c
			}
		}
		sub := cs.mask.String()
		if cs.ext {
			sub = "(" + sub + ") extended by one rw step"
		}
		x := Anomaly{Type: cs.anomaly,
			Explanation: fmt.Sprintf("a cycle of %s dependencies exists among %d transactions (the smallest of %d such components), which %s forbids; no cycle of a named class was found in it",
				sub, len(smallest), len(comps), cs.model)}
		for i, t := range smallest {
			if i == 8 {
				break
			}
			x.Ops = append(x.Ops, p.ref(t))
		}
		an.add(x)
	}
}
