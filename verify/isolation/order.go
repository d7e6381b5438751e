package isolation

import (
	"slices"

	"github.com/ipfence/ipfence/verify/history"
)

// inGraph says whether a transaction is a node of the dependency graph:
// the committed ones and the indeterminate ones (whose writes others may
// have seen). Aborted transactions are not.
func (tx *txn) inGraph() bool { return tx.typ == history.OK || tx.typ == history.Info }

// processEdges links each process's consecutive transactions. A process
// whose transaction ended in info continues under another number, so a
// process's transactions never overlap.
func (p *parsed) processEdges(es *edges) *edges {
	last := map[history.Process]int32{}
	order := make([]int32, 0, len(p.txns))
	for t := range p.txns {
		if p.txns[t].inGraph() {
			order = append(order, int32(t))
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return int(p.txns[a].call - p.txns[b].call) })
	for _, t := range order {
		pr := p.txns[t].process
		if prev, ok := last[pr]; ok {
			es.add(edge{prev, t, process})
		}
		last[pr] = t
	}
	return es
}

// realtimeEdges links a → b when a completed before b was invoked,
// transitively reduced: b gets an edge from each transaction of the
// frontier at its invoke, the completed transactions that no later
// completed transaction is known to follow. When a transaction completes
// it replaces in the frontier every one it follows.
func (p *parsed) realtimeEdges(es *edges) *edges {
	type point struct {
		pos    int32
		t      int32
		invoke bool
	}
	pts := make([]point, 0, 2*len(p.txns))
	for t := range p.txns {
		tx := &p.txns[t]
		if !tx.inGraph() {
			continue
		}
		pts = append(pts, point{tx.call, int32(t), true})
		if tx.typ == history.OK && tx.ret >= 0 {
			pts = append(pts, point{tx.ret, int32(t), false})
		}
	}
	slices.SortFunc(pts, func(a, b point) int { return int(a.pos - b.pos) })
	frontier := map[int32]bool{}
	preds := map[int32][]int32{}
	for _, pt := range pts {
		if pt.invoke {
			if len(frontier) == 0 {
				continue
			}
			ps := make([]int32, 0, len(frontier))
			for f := range frontier {
				ps = append(ps, f)
			}
			slices.Sort(ps)
			for _, f := range ps {
				es.add(edge{f, pt.t, realtime})
			}
			if p.txns[pt.t].typ == history.OK {
				preds[pt.t] = ps
			}
			continue
		}
		for _, f := range preds[pt.t] {
			delete(frontier, f)
		}
		delete(preds, pt.t)
		frontier[pt.t] = true
	}
	return es
}
