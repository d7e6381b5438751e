package isolation

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ipfence/ipfence/verify/history"
)

// observation is a transaction's contact with a key: its external read,
// or its last write.
type observation struct {
	t   int32
	val int64
}

// rwRegister analyses an rw-register history: the anomalies that need no
// cycle, each key's version graph, and the ww, wr and rw edges it implies.
func (p *parsed) rwRegister(an *anomalies, o Options) (*versions, *edges) {
	vs := &versions{succ: map[kv][]int64{}}
	intermediate := p.writers(an, vs, mWrite, "duplicate-writes", "wrote", "written", "write")

	// Version graph sources, each kept apart so that one that makes a
	// key's versions cyclic can be dropped alone.
	type vedge struct {
		k    int32
		a, b int64
	}
	var initial, wfr, seq, lin []vedge
	es := &edges{}
	type lostKey struct {
		k int32
		v int64
	}
	lost := map[lostKey][]int32{}
	// External reads per transaction, for rw edges once the version graph
	// is known.
	var reads []observation
	var readKeys []int32
	perKey := map[int32][]observation{}
	for t := range p.txns {
		tx := &p.txns[t]
		ti := int32(t)
		if !tx.inGraph() {
			continue
		}
		known := map[int32]int64{} // the value this txn must see next
		wrote := map[int32]bool{}
		readFirst := map[int32]int64{}
		for i := range tx.mops {
			m := &tx.mops[i]
			if m.kind == mWrite {
				if v, ok := readFirst[m.key]; ok && !wrote[m.key] {
					wfr = append(wfr, vedge{m.key, v, lastWrite(tx, m.key)})
					if tx.typ == history.OK {
						lost[lostKey{m.key, v}] = append(lost[lostKey{m.key, v}], ti)
					}
				}
				known[m.key] = m.val
				wrote[m.key] = true
				continue
			}
			if !m.known || tx.typ != history.OK {
				continue
			}
			if want, ok := known[m.key]; ok {
				if m.val != want && writesLater(tx, i, m.key, m.val) {
					an.addf(p, "future-read", []int32{ti}, "%s read key %s = %s, a value %s writes only later in the same transaction",
						p.name(ti), p.in.showKey(m.key), p.in.showVal(m.val), p.name(ti))
				} else if m.val != want {
					an.addf(p, "internal", []int32{ti}, "%s read key %s = %s, but its own earlier read or write means it must have seen %s",
						p.name(ti), p.in.showKey(m.key), p.in.showVal(m.val), p.in.showVal(want))
					// Still a read of the database, as Elle takes every
					// read: of an aborted or intermediate write, or of
					// one that precedes this transaction.
					if w, ok := vs.writer.get(kv{m.key, m.val}); !ok || w != ti {
						p.checkRegisterRead(an, ti, m, vs, intermediate)
						if ok && !intermediate[kv{m.key, m.val}] {
							es.add(edge{w, ti, wr})
						}
					}
				}
				continue
			}
			if m.val != nilVal && writesLater(tx, i, m.key, m.val) {
				// A future read: the transaction saw the value it writes
				// only later. No version order can hold that read.
				an.addf(p, "future-read", []int32{ti}, "%s read key %s = %s, a value %s writes only later in the same transaction",
					p.name(ti), p.in.showKey(m.key), p.in.showVal(m.val), p.name(ti))
				known[m.key] = m.val
				continue
			}
			known[m.key] = m.val
			readFirst[m.key] = m.val
			reads = append(reads, observation{ti, m.val})
			readKeys = append(readKeys, m.key)
			p.checkRegisterRead(an, ti, m, vs, intermediate)
			if m.val != nilVal && !intermediate[kv{m.key, m.val}] {
				if w, ok := vs.writer.get(kv{m.key, m.val}); ok && w != ti {
					es.add(edge{w, ti, wr})
				}
			}
		}
		for k, v := range known {
			perKey[k] = append(perKey[k], observation{ti, v})
		}
	}
	// Only a transaction's last write of a key is a version of it: the
	// others were never installed (reading one is G1b, reported above).
	vs.writer.each(func(x kv, _ int32) {
		if !intermediate[x] {
			initial = append(initial, vedge{x.k, nilVal, x.v})
		}
	})
	if o.SequentialKeys || o.LinearizableKeys {
		for k, obs := range perKey {
			slices.SortFunc(obs, func(a, b observation) int { return int(p.txns[a.t].call - p.txns[b.t].call) })
			if o.SequentialKeys {
				last := map[history.Process]int64{}
				for _, ob := range obs {
					pr := p.txns[ob.t].process
					if v, ok := last[pr]; ok && v != ob.val {
						seq = append(seq, vedge{k, v, ob.val})
					}
					last[pr] = ob.val
				}
			}
			if o.LinearizableKeys {
				for i, a := range obs {
					ta := &p.txns[a.t]
					if ta.typ != history.OK {
						continue
					}
					for _, b := range obs[i+1:] {
						if ta.ret < p.txns[b.t].call && a.val != b.val {
							lin = append(lin, vedge{k, a.val, b.val})
						}
					}
				}
			}
		}
	}

	// Add the sources in order of trust; a source that closes a cycle in
	// some key's versions is reported and left out for that key.
	graphs := map[int32]map[int64][]int64{}
	addAll := func(name string, src []vedge) {
		byKey := map[int32][]vedge{}
		for _, e := range src {
			if e.a != e.b {
				byKey[e.k] = append(byKey[e.k], e)
			}
		}
		keys := make([]int32, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			g := graphs[k]
			trial := map[int64][]int64{}
			for v, ws := range g {
				trial[v] = slices.Clone(ws)
			}
			for _, e := range byKey[k] {
				trial[e.a] = append(trial[e.a], e.b)
			}
			if cyc := versionCycle(trial); cyc != nil {
				an.addf(p, "cyclic-versions", nil, "the versions of key %s, inferred from %s, form a cycle %s; that inference is dropped for this key",
					p.in.showKey(k), name, p.showList(cyc))
				continue
			}
			graphs[k] = trial
		}
	}
	addAll("the initial state", initial)
	addAll("writes that follow reads", wfr)
	addAll("process order (sequential keys)", seq)
	addAll("real-time order (linearizable keys)", lin)

	for k, g := range graphs {
		for a, bs := range g {
			slices.Sort(bs)
			bs = slices.Compact(bs)
			vs.succ[kv{k, a}] = bs
			wa, okA := vs.writer.get(kv{k, a})
			for _, b := range bs {
				wb, okB := vs.writer.get(kv{k, b})
				if okA && okB {
					es.add(edge{wa, wb, ww})
				}
			}
		}
	}
	for i, r := range reads {
		for _, b := range vs.succ[kv{readKeys[i], r.val}] {
			if w, ok := vs.writer.get(kv{readKeys[i], b}); ok {
				es.add(edge{r.t, w, rw})
			}
		}
	}
	lostKeys := make([]lostKey, 0, len(lost))
	for lk, txns := range lost {
		if len(txns) >= 2 {
			lostKeys = append(lostKeys, lk)
		}
	}
	slices.SortFunc(lostKeys, func(a, b lostKey) int {
		return cmp.Or(cmp.Compare(lost[a][0], lost[b][0]), cmp.Compare(a.k, b.k), cmp.Compare(a.v, b.v))
	})
	for _, lk := range lostKeys {
		txns := lost[lk]
		an.addf(p, "lost-update", txns, "%d transactions read key %s = %s and then wrote it: each update was made without seeing the others",
			len(txns), p.in.showKey(lk.k), p.in.showVal(lk.v))
	}
	return vs, es
}

// writesLater says whether tx writes v to key k after mop i.
func writesLater(tx *txn, i int, k int32, v int64) bool {
	for j := i + 1; j < len(tx.mops); j++ {
		if m := &tx.mops[j]; m.kind == mWrite && m.key == k && m.val == v {
			return true
		}
	}
	return false
}

// lastWrite returns the value a transaction last wrote to a key: the
// version it installs.
func lastWrite(tx *txn, k int32) int64 {
	v := int64(nilVal)
	for i := range tx.mops {
		if m := &tx.mops[i]; m.kind == mWrite && m.key == k {
			v = m.val
		}
	}
	return v
}

// checkRegisterRead reports a read of a value nobody wrote, of an aborted
// write, or of another transaction's intermediate write.
func (p *parsed) checkRegisterRead(an *anomalies, t int32, m *mop, vs *versions, intermediate map[kv]bool) {
	if m.val == nilVal {
		return
	}
	x := kv{m.key, m.val}
	k, v := p.in.showKey(m.key), p.in.showVal(m.val)
	w, ok := vs.writer.get(x)
	switch {
	case !ok:
		if f, failed := vs.failed.get(x); failed {
			an.addf(p, "G1a", []int32{t, f}, "%s read key %s = %s, written by %s which aborted", p.name(t), k, v, p.name(f))
		} else {
			an.addf(p, "garbage-read", []int32{t}, "%s read key %s = %s, but nobody wrote %s", p.name(t), k, v, v)
		}
	case intermediate[x] && w != t:
		an.addf(p, "G1b", []int32{t, w}, "%s read key %s = %s, which %s overwrote within the same transaction: an intermediate state", p.name(t), k, v, p.name(w))
	}
}

// versionCycle returns a cycle of a version graph, or nil.
func versionCycle(g map[int64][]int64) []int64 {
	const (
		white = iota
		grey
		black
	)
	color := map[int64]int{}
	parent := map[int64]int64{}
	nodes := make([]int64, 0, len(g))
	for v := range g {
		nodes = append(nodes, v)
	}
	slices.Sort(nodes)
	for _, v := range nodes {
		slices.Sort(g[v])
	}
	for _, root := range nodes {
		if color[root] != white {
			continue
		}
		type frame struct {
			v int64
			i int
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.i < len(g[f.v]) {
				w := g[f.v][f.i]
				f.i++
				switch color[w] {
				case white:
					color[w] = grey
					parent[w] = f.v
					stack = append(stack, frame{w, 0})
				case grey:
					cyc := []int64{w}
					for x := f.v; x != w; x = parent[x] {
						cyc = append(cyc, x)
					}
					slices.Reverse(cyc[1:])
					return cyc
				}
				continue
			}
			color[f.v] = black
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}

// explainRegisterEdge says why a precedes b by r, for rw-register.
func (p *parsed) explainRegisterEdge(a, b int32, r rel, vs *versions) string {
	ta, tb := &p.txns[a], &p.txns[b]
	switch r {
	case ww:
		for i := range ta.mops {
			m := &ta.mops[i]
			if m.kind != mWrite {
				continue
			}
			for _, w := range vs.succ[kv{m.key, m.val}] {
				if wb, ok := vs.writer.get(kv{m.key, w}); ok && wb == b {
					return fmt.Sprintf("%s wrote key %s = %s, a version after %s, written by %s", p.name(b), p.in.showKey(m.key), p.in.showVal(w), p.in.showVal(m.val), p.name(a))
				}
			}
		}
	case wr:
		for i := range tb.mops {
			m := &tb.mops[i]
			if m.kind == mRead && m.known {
				if w, ok := vs.writer.get(kv{m.key, m.val}); ok && w == a {
					return fmt.Sprintf("%s read key %s = %s, written by %s", p.name(b), p.in.showKey(m.key), p.in.showVal(m.val), p.name(a))
				}
			}
		}
	case rw:
		for i := range ta.mops {
			m := &ta.mops[i]
			if m.kind != mRead || !m.known {
				continue
			}
			for _, w := range vs.succ[kv{m.key, m.val}] {
				if wb, ok := vs.writer.get(kv{m.key, w}); ok && wb == b {
					return fmt.Sprintf("%s read key %s = %s, and %s wrote %s, a later version", p.name(a), p.in.showKey(m.key), p.in.showVal(m.val), p.name(b), p.in.showVal(w))
				}
			}
		}
	}
	return p.explainOrderEdge(a, b, r)
}
