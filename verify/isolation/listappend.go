package isolation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
)

// kv is a value of a key.
type kv struct {
	k int32
	v int64
}

// versions is what the analysis of a workload knows of each key's
// versions, which the explanations of edges consult.
type versions struct {
	// order is each key's inferred version order: for list-append the
	// elements of its longest read; for rw-register unused.
	order map[int32][]int64
	// pos is a value's position in its key's order.
	pos kvMap
	// writer is the transaction (ok or info) that appended or wrote a
	// value; failed the one that did and aborted.
	writer kvMap
	failed kvMap
	// orderWriter is, per key, the writer (ok or info) of each element
	// of its order, -1 for none; clean how many of its first elements
	// have one (list-append). A read equal to a prefix of its key's
	// order no longer than that needs no look-up of its elements.
	orderWriter map[int32][]int32
	clean       map[int32]int
	// unobserved lists, per key, the transactions whose appends no read
	// shows (list-append).
	unobserved map[int32][]int32
	// succ is, for rw-register, each version's direct successors in its
	// key's version graph.
	succ map[kv][]int64
}

func (p *parsed) showList(l []int64) string {
	parts := make([]string, len(l))
	for i, v := range l {
		parts[i] = p.in.showVal(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// listAppend analyses a list-append history: it finds the anomalies that
// need no cycle and collects the ww, wr and rw edges.
func (p *parsed) listAppend(an *anomalies) (*versions, *edges) {
	vs := &versions{order: map[int32][]int64{}, orderWriter: map[int32][]int32{}, clean: map[int32]int{}}
	intermediate := p.writers(an, vs, mAppend, "duplicate-appends", "appended", "appended", "append")

	// Each key's version order: its longest read, which every other read
	// must be a prefix of.
	longest := map[int32]*mop{}
	for t := range p.txns {
		tx := &p.txns[t]
		if tx.typ != history.OK {
			continue
		}
		for i := range tx.mops {
			m := &tx.mops[i]
			if m.kind == mRead && m.known {
				if l := longest[m.key]; l == nil || m.n > l.n {
					longest[m.key] = m
				}
			}
		}
	}
	for k, m := range longest {
		// A duplicated element is reported with its read; the order keeps
		// its first place.
		order := dedup(p.list(m))
		vs.order[k] = order
		ow := make([]int32, len(order))
		clean := -1
		for i, v := range order {
			vs.pos.put(kv{k, v}, int32(i))
			w, ok := vs.writer.get(kv{k, v})
			if !ok {
				w = -1
				if clean < 0 {
					clean = i
				}
			}
			ow[i] = w
		}
		if clean < 0 {
			clean = len(order)
		}
		vs.orderWriter[k], vs.clean[k] = ow, clean
	}
	// Appends no read shows still come after every element read: their
	// predecessor in the version order is the key's last observed element.
	vs.unobserved = map[int32][]int32{}
	vs.writer.each(func(x kv, w int32) {
		if !vs.pos.has(x) {
			vs.unobserved[x.k] = append(vs.unobserved[x.k], w)
		}
	})
	for k := range vs.unobserved {
		slices.Sort(vs.unobserved[k])
		vs.unobserved[k] = slices.Compact(vs.unobserved[k])
	}

	es := &edges{}
	// ww: consecutive versions of a key, and dirty updates: a committed
	// append after an aborted one in a key's history.
	keys := make([]int32, 0, len(vs.order))
	for k := range vs.order {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		order, ow := vs.order[k], vs.orderWriter[k]
		abortedAt := -1
		for i, v := range order {
			if ow[i] < 0 {
				if _, ok := vs.failed.get(kv{k, v}); ok && abortedAt < 0 {
					abortedAt = i
				}
				continue
			}
			if abortedAt >= 0 {
				f, _ := vs.failed.get(kv{k, order[abortedAt]})
				w := ow[i]
				an.addf(p, "dirty-update", []int32{f, w},
					"key %s's history %s holds %s, appended by %s which aborted, and after it %s, appended by %s which did not: a write built on an aborted one",
					p.in.showKey(k), p.showList(order), p.in.showVal(order[abortedAt]), p.name(f), p.in.showVal(v), p.name(w))
				abortedAt = -2 // one report per key
			}
			w1 := ow[i]
			if i+1 < len(order) {
				if w2 := ow[i+1]; w2 >= 0 {
					es.add(edge{w1, w2, ww})
				}
			} else {
				for _, w2 := range vs.unobserved[k] {
					es.add(edge{w1, w2, ww})
				}
			}
		}
	}

	type lostKey struct {
		k    int32
		last int64 // the read's last element, or nilVal for []
	}
	lost := map[lostKey][]int32{}
	// future marks (key, transaction) pairs with a future read, whose
	// misplaced own append ownOrder would only restate.
	future := map[kv]bool{}
	for t := range p.txns {
		tx := &p.txns[t]
		if tx.typ != history.OK {
			continue
		}
		ti := int32(t)
		// Per key: the list this transaction should now see (nil until
		// it read the key), its own appends since, and whether it read
		// the key before.
		type state struct {
			seen     bool
			expected []int64
			own      []int64
			readV    lostKey
			wrote    bool
			mine     []int64 // every append to the key so far
		}
		// Most transactions touch a few keys: their states are found by
		// a scan of a short list, a map only for long transactions.
		type keyState struct {
			k int32
			s *state
		}
		var fewBuf [4]keyState
		var stBuf [4]state
		few := fewBuf[:0]
		var st map[int32]*state
		if len(tx.mops) > 8 {
			st = map[int32]*state{}
		}
		// ownAt is where this transaction appends each of its values: a
		// read holding one appended only later is a future read. It is
		// made only for a transaction that appends after it reads.
		var ownAt map[kv]int
		ownAtMade := false
		get := func(k int32) *state {
			if st != nil {
				s := st[k]
				if s == nil {
					s = &state{}
					st[k] = s
				}
				return s
			}
			for _, f := range few {
				if f.k == k {
					return f.s
				}
			}
			var s *state
			if len(few) < len(stBuf) {
				s = &stBuf[len(few)]
			} else {
				s = &state{}
			}
			few = append(few, keyState{k, s})
			return s
		}
		for i := range tx.mops {
			m := &tx.mops[i]
			s := get(m.key)
			if m.kind == mAppend {
				s.mine = append(s.mine, m.val)
				if s.seen {
					s.expected = append(s.expected, m.val)
				} else {
					s.own = append(s.own, m.val)
				}
				if s.seen && !s.wrote {
					lost[s.readV] = append(lost[s.readV], ti)
				}
				s.wrote = true
				continue
			}
			if !m.known {
				continue
			}
			read := p.list(m)
			p.checkReadElements(an, ti, m, read, vs, intermediate)
			if !ownAtMade && appendsAfter(tx.mops, i, m.key) {
				ownAtMade = true
				ownAt = map[kv]int{}
				for j := range tx.mops {
					if a := &tx.mops[j]; a.kind == mAppend {
						ownAt[kv{a.key, a.val}] = j
					}
				}
			}
			if v, ok := futureElement(read, m.key, i, ownAt); ownAt != nil && ok {
				// Elle's future read: the transaction saw its own effect
				// before causing it. Its other checks of this read would
				// only restate that.
				an.addf(p, "future-read", []int32{ti},
					"%s read key %s as %s, which holds %s, an element %s appends only later in the same transaction",
					p.name(ti), p.in.showKey(m.key), p.showList(read), p.in.showVal(v), p.name(ti))
				future[kv{m.key, int64(ti)}] = true
				if !s.seen {
					ext := read
					s.seen, s.expected = true, slices.Clone(read)
					es = p.readEdges(es, ti, m.key, ext, vs)
				} else {
					s.expected = slices.Clone(read)
				}
				continue
			}
			if s.seen {
				if !slices.Equal(read, s.expected) {
					an.addf(p, "internal", []int32{ti},
						"%s read key %s as %s, but its own earlier read and appends mean it must have seen %s",
						p.name(ti), p.in.showKey(m.key), p.showList(read), p.showList(s.expected))
					// Still an observation of the key, as Elle takes
					// every read: what others wrote in it precedes this
					// transaction, and what it misses follows.
					es = p.readEdges(es, ti, m.key, stripOwn(read, s.mine), vs)
				}
				s.expected = slices.Clone(read)
				continue
			}
			// The first read of the key: what others wrote, followed by
			// this transaction's own appends so far.
			ext := read
			if n := len(s.own); n > 0 {
				if len(read) < n || !slices.Equal(read[len(read)-n:], s.own) {
					an.addf(p, "internal", []int32{ti},
						"%s appended %s to key %s, then read it as %s, which does not end with those appends",
						p.name(ti), p.showList(s.own), p.in.showKey(m.key), p.showList(read))
					s.seen, s.expected = true, slices.Clone(read)
					es = p.readEdges(es, ti, m.key, stripOwn(read, s.mine), vs)
					continue
				}
				ext = read[:len(read)-n]
			}
			s.seen, s.expected = true, slices.Clone(read)
			s.readV = lostKey{m.key, nilVal}
			if len(ext) > 0 {
				s.readV.last = ext[len(ext)-1]
			}
			es = p.readEdges(es, ti, m.key, ext, vs)
		}
	}
	p.ownOrder(an, vs, future)
	lostKeys := make([]lostKey, 0, len(lost))
	for lk, txns := range lost {
		if len(txns) >= 2 {
			lostKeys = append(lostKeys, lk)
		}
	}
	slices.SortFunc(lostKeys, func(a, b lostKey) int {
		return cmp.Or(cmp.Compare(lost[a][0], lost[b][0]), cmp.Compare(a.k, b.k), cmp.Compare(a.last, b.last))
	})
	for _, lk := range lostKeys {
		txns := lost[lk]
		names := make([]string, len(txns))
		for i, t := range txns {
			names[i] = p.name(t)
		}
		seen := "[]"
		if lk.last != nilVal {
			seen = "a version ending in " + p.in.showVal(lk.last)
		}
		an.addf(p, "lost-update", txns,
			"%s all read key %s as %s and then appended to it: each update was made without seeing the others",
			strings.Join(names, ", "), p.in.showKey(lk.k), seen)
	}
	return vs, es
}

// checkReadElements reports what is wrong with the elements of one read:
// duplicates, values nobody appended, values of aborted transactions, and
// intermediate values of another transaction.
func (p *parsed) checkReadElements(an *anomalies, t int32, m *mop, read []int64, vs *versions, intermediate map[kv]bool) {
	if order := vs.order[m.key]; len(read) <= vs.clean[m.key] && slices.Equal(read, order[:len(read)]) {
		// The common read: a prefix of the version order, every
		// element of it appended by a transaction that did not abort,
		// none twice. Only its last element may be intermediate.
		if n := len(read); n > 0 && len(intermediate) > 0 && intermediate[kv{m.key, read[n-1]}] {
			if w := vs.orderWriter[m.key][n-1]; w != t {
				an.addf(p, "G1b", []int32{t, w}, "%s read key %s as %s, ending in %s, which %s appended before appending again to the same key: an intermediate state",
					p.name(t), p.in.showKey(m.key), p.showList(read), p.in.showVal(read[n-1]), p.name(w))
			}
		}
		return
	}
	var dup, garbage, aborted []int64
	var abortedBy int32 = -1
	if len(read) > 1 {
		seen := make(map[int64]bool, len(read))
		for _, v := range read {
			if seen[v] {
				dup = append(dup, v)
			}
			seen[v] = true
		}
	}
	for _, v := range read {
		x := kv{m.key, v}
		if _, ok := vs.writer.get(x); ok {
			continue
		}
		if f, ok := vs.failed.get(x); ok {
			aborted = append(aborted, v)
			abortedBy = f
			continue
		}
		garbage = append(garbage, v)
	}
	k := p.in.showKey(m.key)
	if len(dup) > 0 {
		an.addf(p, "duplicate-elements", []int32{t}, "%s read key %s as %s, which holds %s more than once",
			p.name(t), k, p.showList(read), p.showList(dup))
	}
	if len(garbage) > 0 {
		an.addf(p, "garbage-read", []int32{t}, "%s read key %s as %s, but nobody appended %s",
			p.name(t), k, p.showList(read), p.showList(garbage))
	}
	if len(aborted) > 0 {
		an.addf(p, "G1a", []int32{t, abortedBy}, "%s read key %s as %s, which holds %s, appended by %s which aborted",
			p.name(t), k, p.showList(read), p.showList(aborted), p.name(abortedBy))
	}
	if n := len(read); n > 0 && intermediate[kv{m.key, read[n-1]}] {
		if w, ok := vs.writer.get(kv{m.key, read[n-1]}); ok && w != t {
			an.addf(p, "G1b", []int32{t, w}, "%s read key %s as %s, ending in %s, which %s appended before appending again to the same key: an intermediate state",
				p.name(t), k, p.showList(read), p.in.showVal(read[n-1]), p.name(w))
		}
	}
}

// readEdges adds the wr and rw edges of transaction t's external read ext
// of key k. A read that contradicts the key's version order (reported by
// versionConflicts) gets its wr edge only.
func (p *parsed) readEdges(es *edges, t int32, k int32, ext []int64, vs *versions) *edges {
	order := vs.order[k]
	if len(ext) <= len(order) && slices.Equal(ext, order[:len(ext)]) {
		// A prefix of the order (the common case, and free of
		// duplicates): the writers are known by position.
		ow := vs.orderWriter[k]
		if n := len(ext); n > 0 && ow[n-1] >= 0 {
			es.add(edge{ow[n-1], t, wr})
		}
		if len(ext) < len(order) {
			if w := ow[len(ext)]; w >= 0 {
				es.add(edge{t, w, rw})
			}
		} else {
			for _, w := range vs.unobserved[k] {
				es.add(edge{t, w, rw})
			}
		}
		return es
	}
	ext = dedup(ext)
	if len(ext) > len(order) || !slices.Equal(ext, order[:len(ext)]) {
		// Reported once per key by versionConflicts; no rw edge can be
		// placed on a version order this read contradicts.
		if len(ext) > 0 {
			if w, ok := vs.writer.get(kv{k, ext[len(ext)-1]}); ok {
				es.add(edge{w, t, wr})
			}
		}
		return es
	}
	if len(ext) > 0 {
		if w, ok := vs.writer.get(kv{k, ext[len(ext)-1]}); ok {
			es.add(edge{w, t, wr})
		}
	}
	if len(ext) < len(order) {
		if w, ok := vs.writer.get(kv{k, order[len(ext)]}); ok {
			es.add(edge{t, w, rw})
		}
	} else {
		// The read saw every element any read saw: each append no read
		// shows came after it.
		for _, w := range vs.unobserved[k] {
			es.add(edge{t, w, rw})
		}
	}
	return es
}

// ownOrder reports transactions whose appends to a key the version order
// holds out of the order they made them: a later append read before an
// earlier one, or read while the earlier one is not. Each is a write
// dependency of the transaction on itself, a one-step G0 cycle (the graph
// keeps no self edges, so no search would find it), as a future read is a
// one-step G1c.
func (p *parsed) ownOrder(an *anomalies, vs *versions, future map[kv]bool) {
	for t := range p.txns {
		tx := &p.txns[t]
		if !tx.inGraph() {
			continue
		}
		ti := int32(t)
		type seen struct {
			pos int32 // of the previous append; -1 when no read shows it
			val int64
		}
		prev := map[int32]seen{}
		reported := map[int32]bool{}
		for i := range tx.mops {
			m := &tx.mops[i]
			if m.kind != mAppend || reported[m.key] || future[kv{m.key, int64(ti)}] {
				continue
			}
			pos, ok := vs.pos.get(kv{m.key, m.val})
			if !ok {
				pos = -1
			}
			if pr, had := prev[m.key]; had && pos >= 0 && (pr.pos < 0 || pr.pos > pos) {
				reported[m.key] = true
				why := fmt.Sprintf("reads show key %s as %s, where %s appended %s before %s", p.in.showKey(m.key), p.showList(vs.order[m.key]), p.name(ti), p.in.showVal(pr.val), p.in.showVal(m.val))
				if pr.pos < 0 {
					why += ", which no read shows although they show " + p.in.showVal(m.val)
				} else {
					why += ", yet they show them the other way round"
				}
				r := p.ref(ti)
				an.add(Anomaly{Type: "G0", Ops: []OpRef{r}, Cycle: []Step{{From: r, To: r, Rel: "ww", Why: why}},
					Explanation: fmt.Sprintf("%s < %s because %s: a cycle of one write dependency, %s on itself.", p.name(ti), p.name(ti), why, p.name(ti))})
			}
			prev[m.key] = seen{pos, m.val}
		}
	}
}

// stripOwn drops a read's trailing elements that are the transaction's
// own appends (mine), leaving what others wrote in it.
func stripOwn(read, mine []int64) []int64 {
	n := len(read)
	for n > 0 && slices.Contains(mine, read[n-1]) {
		n--
	}
	return read[:n]
}

// appendsAfter says whether a transaction appends to key k after its
// micro-operation i.
func appendsAfter(mops []mop, i int, k int32) bool {
	for j := i + 1; j < len(mops); j++ {
		if mops[j].kind == mAppend && mops[j].key == k {
			return true
		}
	}
	return false
}

// futureElement returns an element of a read at mop index i of key k
// that the same transaction appends at a later mop (ownAt holds where it
// appends each value).
func futureElement(read []int64, k int32, i int, ownAt map[kv]int) (int64, bool) {
	for _, v := range read {
		if j, ok := ownAt[kv{k, v}]; ok && j > i {
			return v, true
		}
	}
	return 0, false
}

// dedup keeps the first occurrence of each element.
func dedup(l []int64) []int64 {
	for i := 1; i < len(l); i++ {
		if slices.Contains(l[:i], l[i]) {
			out := slices.Clone(l[:i])
			for _, v := range l[i:] {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return l
}

// versionConflicts reports, per key, reads that are not a prefix of the
// key's longest read: no single history of appends explains both.
func (p *parsed) versionConflicts(an *anomalies, vs *versions) {
	reported := map[int32]bool{}
	for t := range p.txns {
		tx := &p.txns[t]
		if tx.typ != history.OK {
			continue
		}
		for i := range tx.mops {
			m := &tx.mops[i]
			if m.kind != mRead || !m.known || reported[m.key] {
				continue
			}
			read, order := dedup(p.list(m)), vs.order[m.key]
			if len(read) <= len(order) && slices.Equal(read, order[:len(read)]) {
				continue
			}
			reported[m.key] = true
			// Find a read with the full order to name it.
			var other int32 = -1
			for u := range p.txns {
				for j := range p.txns[u].mops {
					o := &p.txns[u].mops[j]
					if o.kind == mRead && o.known && o.key == m.key && len(dedup(p.list(o))) == len(order) && p.txns[u].typ == history.OK {
						other = int32(u)
						break
					}
				}
				if other >= 0 {
					break
				}
			}
			an.addf(p, "incompatible-order", []int32{int32(t), other},
				"%s read key %s as %s and %s read it as %s: neither is a prefix of the other, so no single order of appends explains both",
				p.name(int32(t)), p.in.showKey(m.key), p.showList(read), p.name(other), p.showList(order))
		}
	}
}

// explainListEdge says why a precedes b by r, for list-append.
func (p *parsed) explainListEdge(a, b int32, r rel, vs *versions) string {
	ta, tb := &p.txns[a], &p.txns[b]
	switch r {
	case ww:
		for i := range ta.mops {
			m := &ta.mops[i]
			if m.kind != mAppend {
				continue
			}
			pi, ok := vs.pos.get(kv{m.key, m.val})
			order := vs.order[m.key]
			if !ok || int(pi)+1 >= len(order) {
				continue
			}
			next := order[pi+1]
			if w, ok := vs.writer.get(kv{m.key, next}); ok && w == b {
				return fmt.Sprintf("%s appended %s to key %s after %s appended %s", p.name(b), p.in.showVal(next), p.in.showKey(m.key), p.name(a), p.in.showVal(m.val))
			}
		}
		for i := range ta.mops {
			m := &ta.mops[i]
			if m.kind != mAppend {
				continue
			}
			order := vs.order[m.key]
			if len(order) == 0 || order[len(order)-1] != m.val || !slices.Contains(vs.unobserved[m.key], b) {
				continue
			}
			if v, ok := p.appendOf(b, m.key, vs); ok {
				return fmt.Sprintf("%s appended %s to key %s, which no read shows, so after %s, the last element any read shows, appended by %s",
					p.name(b), p.in.showVal(v), p.in.showKey(m.key), p.in.showVal(m.val), p.name(a))
			}
		}
	case wr:
		for i := range tb.mops {
			m := &tb.mops[i]
			if m.kind != mRead || !m.known {
				continue
			}
			read := p.list(m)
			for j := len(read) - 1; j >= 0; j-- {
				if w, ok := vs.writer.get(kv{m.key, read[j]}); ok && w == a {
					return fmt.Sprintf("%s read key %s as %s, which holds %s, appended by %s", p.name(b), p.in.showKey(m.key), p.showList(read), p.in.showVal(read[j]), p.name(a))
				}
			}
		}
	case rw:
		for i := range ta.mops {
			m := &ta.mops[i]
			if m.kind != mRead || !m.known {
				continue
			}
			read := dedup(p.list(m))
			order := vs.order[m.key]
			if len(read) >= len(order) && slices.Contains(vs.unobserved[m.key], b) {
				if v, ok := p.appendOf(b, m.key, vs); ok {
					return fmt.Sprintf("%s read key %s as %s, which does not hold %s, appended by %s (no read shows it, so it came after every element read)",
						p.name(a), p.in.showKey(m.key), p.showList(p.list(m)), p.in.showVal(v), p.name(b))
				}
			}
			for j := len(read); j < len(order); j++ {
				if w, ok := vs.writer.get(kv{m.key, order[j]}); ok && w == b {
					return fmt.Sprintf("%s read key %s as %s, which does not hold %s, appended by %s", p.name(a), p.in.showKey(m.key), p.showList(read), p.in.showVal(order[j]), p.name(b))
				}
				if w, ok := vs.writer.get(kv{m.key, order[j]}); ok && w != a {
					break
				}
			}
		}
	}
	return p.explainOrderEdge(a, b, r)
}

// appendOf returns a value t appended to key k that no read shows.
func (p *parsed) appendOf(t int32, k int32, vs *versions) (int64, bool) {
	for i := range p.txns[t].mops {
		m := &p.txns[t].mops[i]
		if m.kind == mAppend && m.key == k {
			if _, seen := vs.pos.get(kv{k, m.val}); !seen {
				return m.val, true
			}
		}
	}
	return 0, false
}

// explainOrderEdge explains process and real-time edges (and is the last
// resort for the others).
func (p *parsed) explainOrderEdge(a, b int32, r rel) string {
	switch r {
	case process:
		return fmt.Sprintf("process %s ran %s before %s", p.txns[a].process, p.name(a), p.name(b))
	case realtime:
		return fmt.Sprintf("%s completed before %s was invoked", p.name(a), p.name(b))
	}
	return fmt.Sprintf("%s precedes %s (%s)", p.name(a), p.name(b), r)
}

// writers records who wrote each value (kind: mAppend or mWrite) in
// vs.writer, and in vs.failed the writes of failed transactions; a value
// written twice is reported as the anomaly dup (verb, participle and noun
// name the writing in its explanation). It returns the writes a transaction overwrote itself: its
// intermediate versions, which no other transaction may read.
func (p *parsed) writers(an *anomalies, vs *versions, kind mopKind, dup, verb, participle, noun string) map[kv]bool {
	intermediate := map[kv]bool{}
	for t := range p.txns {
		tx := &p.txns[t]
		last := map[int32]int64{}
		for i := range tx.mops {
			m := &tx.mops[i]
			if m.kind != kind {
				continue
			}
			x := kv{m.key, m.val}
			if tx.typ == history.Fail {
				vs.failed.put(x, int32(t))
				continue
			}
			if prev, seen := vs.writer.get(x); seen {
				an.addf(p, dup, []int32{prev, int32(t)},
					"%s and %s both %s %s to key %s: %s values must be unique, or no read can tell whose %s it saw",
					p.name(prev), p.name(int32(t)), verb, p.in.showVal(m.val), p.in.showKey(m.key), participle, noun)
				continue
			}
			vs.writer.put(x, int32(t))
			if v, ok := last[m.key]; ok {
				intermediate[kv{m.key, v}] = true
			}
			last[m.key] = m.val
		}
	}
	return intermediate
}
