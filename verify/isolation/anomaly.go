package isolation

import (
	"fmt"

	"github.com/ipfence/ipfence/verify/history"
)

// OpRef names a transaction in a report.
type OpRef struct {
	// Index is the index, in the history, of the event that completed the
	// transaction (of its invoke when it never completed): the operation as
	// Elle names it, and the number after T in explanations.
	Index int64 `json:"index"`
	// Invoke is the index of the transaction's invoke event.
	Invoke int64 `json:"invoke"`
	// Process is nil for an event that named none.
	Process *history.Process `json:"process"`
	Type    string           `json:"type"`
	Value   history.Value    `json:"value"`
}

// Step is one edge of a cycle: From must precede To because of Why.
type Step struct {
	From OpRef  `json:"from"`
	To   OpRef  `json:"to"`
	Rel  string `json:"rel"`
	Why  string `json:"why"`
}

// Anomaly is one problem found in the history.
type Anomaly struct {
	Type string  `json:"type"`
	Ops  []OpRef `json:"ops"`
	// Cycle holds the steps of a dependency cycle, for cycle anomalies.
	Cycle []Step `json:"cycle,omitempty"`
	// Explanation says what is wrong, in one paragraph for people.
	Explanation string `json:"explanation"`
}

// ref describes transaction t.
func (p *parsed) ref(t int32) OpRef {
	tx := &p.txns[t]
	r := OpRef{Index: tx.index, Invoke: tx.invoke, Type: tx.typ.String(), Value: p.value(t)}
	if pr := tx.process; pr < anonymousBase {
		r.Process = &pr
	}
	return r
}

// anomalies collects the anomalies found, by type, keeping at most
// maxPerType of each (the count is kept whole).
type anomalies struct {
	byType map[string][]Anomaly
	counts map[string]int
	max    int
}

func newAnomalies(max int) *anomalies {
	return &anomalies{byType: map[string][]Anomaly{}, counts: map[string]int{}, max: max}
}

func (a *anomalies) add(x Anomaly) {
	a.counts[x.Type]++
	if len(a.byType[x.Type]) < a.max {
		a.byType[x.Type] = append(a.byType[x.Type], x)
	}
}

func (a *anomalies) addf(p *parsed, typ string, txns []int32, format string, args ...any) {
	x := Anomaly{Type: typ, Explanation: fmt.Sprintf(format, args...)}
	for _, t := range txns {
		x.Ops = append(x.Ops, p.ref(t))
	}
	a.add(x)
}
