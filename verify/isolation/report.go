package isolation

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
)

// Summary is the answer on one line, for people.
func (r *Result) Summary(file string) string {
	var b strings.Builder
	noun := "transactions"
	if r.Txns == 1 {
		noun = "transaction"
	}
	fmt.Fprintf(&b, "%s: %s (%s, %s, %d %s)", file, strings.ToUpper(verdictWord(r)), r.Workload, r.Consistency, r.Txns, noun)
	if len(r.AnomalyTypes) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(r.AnomalyTypes, ", "))
	}
	if len(r.Not) > 0 {
		fmt.Fprintf(&b, "; not %s", strings.Join(r.Not, ", "))
	}
	if len(r.AllowedTypes) > 0 {
		fmt.Fprintf(&b, "; allowed by %s: %s", r.Consistency, strings.Join(r.AllowedTypes, ", "))
	}
	if len(r.Assumptions) > 0 {
		var ts []string
		for t := range r.Assumptions {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		fmt.Fprintf(&b, "; the history breaks the test's assumptions: %s", strings.Join(ts, ", "))
	}
	if len(r.Incomplete) > 0 && r.Valid.String() != "false" {
		fmt.Fprintf(&b, "; %s", r.Incomplete[0])
	}
	return b.String()
}

func verdictWord(r *Result) string {
	switch r.Valid.String() {
	case "true":
		return "valid"
	case "false":
		return "invalid"
	}
	return "unknown"
}

// DOT draws a cycle anomaly as a Graphviz digraph: a node per
// transaction, labelled with its index and micro-operations, and an edge
// per step, labelled with its kind and why. It returns "" for anomalies
// without a cycle.
func (a Anomaly) DOT() string {
	if len(a.Cycle) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  label=%q;\n  node [shape=box, fontname=\"monospace\"];\n", a.Type, a.Type)
	seen := map[int64]bool{}
	for _, st := range a.Cycle {
		for _, r := range []OpRef{st.From, st.To} {
			if seen[r.Index] {
				continue
			}
			seen[r.Index] = true
			proc := "no process"
			if r.Process != nil {
				proc = "process " + r.Process.String()
			}
			fmt.Fprintf(&b, "  T%d [label=%q];\n", r.Index, fmt.Sprintf("T%d (%s, %s)\n%s", r.Index, proc, r.Type, clipValue(r.Value)))
		}
	}
	for _, st := range a.Cycle {
		color := map[string]string{"ww": "black", "wr": "blue", "rw": "red", "process": "darkgreen", "realtime": "purple"}[st.Rel]
		fmt.Fprintf(&b, "  T%d -> T%d [label=%q, color=%q, fontcolor=%q];\n", st.From.Index, st.To.Index, st.Rel+": "+st.Why, color, color)
	}
	b.WriteString("}\n")
	return b.String()
}

// clipValue renders a transaction's value, cut at 300 characters.
func clipValue(v history.Value) string {
	s := history.Show(v)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
