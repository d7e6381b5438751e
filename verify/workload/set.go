package workload

import (
	"cmp"
	"math"
	"slices"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// setRead is an ok read and the numbers of the elements it returned, in the
// order returned (repeats kept). The numbers are 32-bit because the reads of
// a set-full history hold most of its elements each: they are the bulk of
// the check's memory.
type setRead struct {
	op  *history.Op
	ids []int32
}

// setElem is what the adds say of one element.
type setElem struct {
	added bool
	// attempted is the position of the first invoke of an add of the
	// element that did not fail, -1 when there is none: a read that
	// completed before it cannot have seen the element.
	attempted int
	// acked is the completion position of the first ok add, -1 when none.
	acked int
}

// setInput reads the adds and ok reads of a set or set-full history. Any
// value can be an element; elements are compared as history values, so an
// independent [key element] tuple is one opaque element.
func (c *run) setInput() (in *interner, es []setElem, reads []setRead, err error) {
	in = newInterner()
	get := func(v history.Value) int {
		id, isNew := in.id(v)
		if isNew {
			es = append(es, setElem{attempted: -1, acked: -1})
		}
		return id
	}
	for i := range c.ops {
		op := &c.ops[i]
		switch op.F {
		case "add":
			v := value(op)
			if v == nil {
				return nil, nil, nil, c.opErr(op, "an add must carry the element it adds, found nil")
			}
			e := &es[get(v)]
			e.added = true
			if op.Type != history.Fail && (e.attempted < 0 || op.Call < e.attempted) {
				e.attempted = op.Call
			}
			if op.Type == history.OK && (e.acked < 0 || op.Return < e.acked) {
				e.acked = op.Return
			}
		case "read":
			if op.Type != history.OK {
				continue // a read that failed or crashed saw nothing we can use
			}
			vals, err := c.elements(op, "a list or set of elements")
			if err != nil {
				return nil, nil, nil, err
			}
			if len(es)+len(vals) > math.MaxInt32 {
				return nil, nil, nil, c.opErr(op, "too many distinct elements to check (more than %d)", math.MaxInt32)
			}
			ids := make([]int32, len(vals))
			for j, v := range vals {
				ids[j] = int32(get(v))
			}
			reads = append(reads, setRead{op, ids})
		default:
			return nil, nil, nil, c.unknownF(op, "add or read")
		}
	}
	// Completion order: "the last read" is the one that completed last.
	slices.SortFunc(reads, func(a, b setRead) int { return cmp.Compare(a.op.Return, b.op.Return) })
	return in, es, reads, nil
}

// possible reports whether a read completing at position ret can have seen
// the element: an add that did not fail was invoked before it completed.
func (e *setElem) possible(ret int) bool { return e.attempted >= 0 && e.attempted < ret }

// checkSet implements Set.
func checkSet(c *run) error {
	in, es, reads, err := c.setInput()
	if err != nil {
		return err
	}
	f := c.r.Fields
	attempts, acks, lastAck := 0, 0, -1
	for i := range es {
		if es[i].added {
			attempts++
		}
		if es[i].acked >= 0 {
			acks++
			lastAck = max(lastAck, es[i].acked)
		}
	}
	f["attempt_count"], f["acknowledged_count"], f["read_count"] = attempts, acks, len(reads)
	if len(reads) == 0 {
		c.r.Valid, c.r.Reason = linear.Unknown, "the set was never read: no read completed ok"
		return nil
	}

	var final []setRead
	for _, r := range reads {
		if r.op.Call > lastAck {
			final = append(final, r)
		}
	}
	if len(final) == 0 {
		final = reads[len(reads)-1:]
	}

	firstUnexpected := -1 // index in reads of the first read showing one
	unexpected := map[int32]bool{}
	for ri, r := range reads {
		for _, id := range r.ids {
			if !es[id].possible(r.op.Return) && !unexpected[id] {
				unexpected[id] = true
				if firstUnexpected < 0 {
					firstUnexpected = ri
				}
			}
		}
	}

	lost, recovered, ok := map[int32]bool{}, map[int32]bool{}, map[int32]bool{}
	var lostFrom *history.Op
	stamp := make([]int, len(es))
	for ri, r := range final {
		mark := ri + 1
		for _, id := range r.ids {
			stamp[id] = mark
			if es[id].possible(r.op.Return) {
				ok[id] = true
				if es[id].acked < 0 {
					recovered[id] = true
				}
			}
		}
		for id := range int32(len(es)) {
			if e := &es[id]; e.acked >= 0 && e.acked < r.op.Call && stamp[id] != mark && !lost[id] {
				lost[id] = true
				if lostFrom == nil {
					lostFrom = r.op
				}
			}
		}
	}

	refs := make([]OpRef, len(final))
	for i, r := range final {
		refs[i] = c.ref(r.op, false)
	}
	lostVals, unexpectedVals, recoveredVals := idValues(in, lost), idValues(in, unexpected), idValues(in, recovered)
	f["final_reads"] = refs
	f["ok_count"] = len(ok)
	f["lost"], f["lost_count"] = lostVals, len(lostVals)
	f["unexpected"], f["unexpected_count"] = unexpectedVals, len(unexpectedVals)
	f["recovered"], f["recovered_count"] = recoveredVals, len(recoveredVals)

	if len(lostVals) > 0 {
		c.note("%s lost (%s): acknowledged, then missing from the final read completed at index %d",
			plural(len(lostVals), "element", "elements"), showSome(lostVals), c.ref(lostFrom, false).Index)
	}
	if len(unexpectedVals) > 0 {
		c.note("%s unexpected (%s): returned by the read completed at index %d and others, but never added before the read",
			plural(len(unexpectedVals), "element", "elements"), showSome(unexpectedVals), c.ref(reads[firstUnexpected].op, false).Index)
	}
	if len(lostVals) > 0 || len(unexpectedVals) > 0 {
		c.r.Valid = linear.False
		return nil
	}
	c.r.Valid = linear.True
	c.note("%s, all present in %s; %d recovered from crashed adds",
		plural(acks, "acknowledged element", "acknowledged elements"), plural(len(final), "final read", "final reads"), len(recoveredVals))
	return nil
}

// idValues returns the values numbered in ids, sorted.
func idValues(in *interner, ids map[int32]bool) []history.Value {
	out := make([]history.Value, 0, len(ids))
	for id := range ids {
		out = append(out, in.vals[id])
	}
	return sortValues(out)
}

// LostElement is the evidence that a set-full element was lost.
type LostElement struct {
	Element history.Value `json:"element"`
	// Known is the operation that first showed the element exists: its
	// ok add, or a read that returned it.
	Known OpRef `json:"known"`
	// LastSeen is the last-invoked read that returned it; nil when no
	// read did.
	LastSeen *OpRef `json:"last_seen"`
	// Missing is the last-invoked read that did not return it, which
	// began after Known completed.
	Missing OpRef `json:"missing"`
}

// StaleElement is a set-full element a read missed although it began after
// the element was known, before later reads saw it for good.
type StaleElement struct {
	Element history.Value `json:"element"`
	Known   OpRef         `json:"known"`
	// Missing is the last-invoked read that did not return it.
	Missing OpRef `json:"missing"`
	// LatencyNS is the time from Known's completion to Missing's invoke
	// (Jepsen's stable latency, a lower bound on how long the element
	// stayed invisible); 0 when the history recorded no times.
	LatencyNS int64 `json:"latency_ns"`
}

// Duplicate is an element a single read returned more than once.
type Duplicate struct {
	Element history.Value `json:"element"`
	// Copies is the most times one read returned it; Read is the first
	// read that did.
	Copies int   `json:"copies"`
	Read   OpRef `json:"read"`
}

// fullElem is what set-full learns of one element. Positions are indexes
// into the events; reads are indexes into the reads slice, -1 for none.
type fullElem struct {
	known        int // earliest completion that proved the element exists
	knownOp      *history.Op
	lastPresent  int // the latest-invoked read that returned it
	lastAbsent   int // the latest-invoked read that could have seen it and did not
	copies       int
	copiesRead   int
	unexpectedAt int // the first read that returned it though it could not
}

// checkSetFull implements SetFull.
func checkSetFull(c *run) error {
	in, es, reads, err := c.setInput()
	if err != nil {
		return err
	}
	fs := make([]fullElem, len(es))
	for i := range fs {
		fs[i] = fullElem{known: es[i].acked, lastPresent: -1, lastAbsent: -1, copiesRead: -1, unexpectedAt: -1}
	}
	for i := range c.ops {
		if op := &c.ops[i]; op.F == "add" && op.Type == history.OK {
			if fe := &fs[c.elemID(in, op)]; fe.known == op.Return {
				fe.knownOp = op
			}
		}
	}

	// Presence, duplicates and the unexpected, read by read.
	stamp := make([]int, len(es))
	mult := make([]int, len(es))
	for ri, r := range reads {
		mark := ri + 1
		for _, id := range r.ids {
			if stamp[id] != mark {
				stamp[id], mult[id] = mark, 0
			}
			mult[id]++
			fe := &fs[id]
			if mult[id] > 1 && mult[id] > fe.copies {
				fe.copies, fe.copiesRead = mult[id], ri
			}
			if mult[id] > 1 {
				continue
			}
			if !es[id].possible(r.op.Return) {
				if fe.unexpectedAt < 0 {
					fe.unexpectedAt = ri
				}
				continue
			}
			if fe.lastPresent < 0 || r.op.Call > reads[fe.lastPresent].op.Call {
				fe.lastPresent = ri
			}
			if fe.known < 0 || r.op.Return < fe.known {
				fe.known, fe.knownOp = r.op.Return, r.op
			}
		}
	}
	c.lastAbsent(es, fs, reads)

	f := c.r.Fields
	var lost, neverRead, stale, unexpected []history.Value
	var lostDetail []LostElement
	var staleDetail []StaleElement
	var dups []Duplicate
	attempts, stable := 0, 0
	callOf := func(ri int) int {
		if ri < 0 {
			return -1
		}
		return reads[ri].op.Call
	}
	for id := range es {
		e, fe, v := &es[id], &fs[id], in.vals[id]
		if fe.unexpectedAt >= 0 {
			unexpected = append(unexpected, v)
		}
		if fe.copies > 1 {
			dups = append(dups, Duplicate{Element: v, Copies: fe.copies, Read: c.ref(reads[fe.copiesRead].op, false)})
		}
		if !e.added {
			continue
		}
		attempts++
		present, absent := callOf(fe.lastPresent), callOf(fe.lastAbsent)
		switch {
		case present >= 0 && absent < present:
			stable++
			if absent >= 0 && fe.known < absent {
				stale = append(stale, v)
				staleDetail = append(staleDetail, StaleElement{
					Element: v, Known: c.ref(fe.knownOp, false), Missing: c.ref(reads[fe.lastAbsent].op, false),
					LatencyNS: max(0, c.events[absent].Time-c.events[fe.known].Time),
				})
			}
		case fe.known >= 0 && absent >= 0 && present < absent && fe.known < absent:
			lost = append(lost, v)
			d := LostElement{Element: v, Known: c.ref(fe.knownOp, false), Missing: c.ref(reads[fe.lastAbsent].op, false)}
			if fe.lastPresent >= 0 {
				seen := c.ref(reads[fe.lastPresent].op, false)
				d.LastSeen = &seen
			}
			lostDetail = append(lostDetail, d)
		default:
			neverRead = append(neverRead, v)
		}
	}
	for _, l := range [][]history.Value{lost, neverRead, stale, unexpected} {
		sortValues(l)
	}
	slices.SortFunc(lostDetail, func(a, b LostElement) int { return compareValues(a.Element, b.Element) })
	slices.SortFunc(dups, func(a, b Duplicate) int { return compareValues(a.Element, b.Element) })
	slices.SortStableFunc(staleDetail, func(a, b StaleElement) int {
		if c := cmp.Compare(b.LatencyNS, a.LatencyNS); c != 0 {
			return c
		}
		return compareValues(a.Element, b.Element)
	})
	staleDetail = staleDetail[:min(len(staleDetail), 8)]

	f["attempt_count"], f["read_count"], f["stable_count"] = attempts, len(reads), stable
	f["lost"], f["lost_count"], f["lost_detail"] = nonNil(lost), len(lost), nonNilSlice(lostDetail)
	f["never_read"], f["never_read_count"] = nonNil(neverRead), len(neverRead)
	f["stale"], f["stale_count"], f["worst_stale"] = nonNil(stale), len(stale), nonNilSlice(staleDetail)
	f["duplicated"], f["duplicated_count"] = nonNilSlice(dups), len(dups)
	f["unexpected"], f["unexpected_count"] = nonNil(unexpected), len(unexpected)
	f["linearizable"] = c.o.SetFullLinearizable

	if len(lost) > 0 {
		d := lostDetail[0]
		c.note("%s lost (%s): known, then missing from every read that began later; %s was known at index %d and missing from the read invoked at index %d",
			plural(len(lost), "element", "elements"), showSome(lost), history.Show(d.Element), d.Known.Index, d.Missing.InvokeIndex)
	}
	if len(dups) > 0 {
		d := dups[0]
		c.note("%s duplicated: the read completed at index %d returned %s %d times",
			plural(len(dups), "element", "elements"), d.Read.Index, history.Show(d.Element), d.Copies)
	}
	if len(unexpected) > 0 {
		c.note("%s unexpected (%s): returned by reads though never added before them", plural(len(unexpected), "element", "elements"), showSome(unexpected))
	}
	if c.o.SetFullLinearizable && len(stale) > 0 {
		d := staleDetail[0]
		c.note("%s stale (%s): the read invoked at index %d missed %s, known since index %d",
			plural(len(stale), "element", "elements"), showSome(stale), d.Missing.InvokeIndex, history.Show(d.Element), d.Known.Index)
	}
	switch {
	case len(c.r.notes) > 0:
		c.r.Valid = linear.False
	case stable == 0:
		c.r.Valid = linear.Unknown
		c.r.Reason = "no element is stable: no read shows any added element staying in the set"
		c.note("%s, %s never read", plural(attempts, "element added", "elements added"), plural(len(neverRead), "element", "elements"))
	default:
		c.r.Valid = linear.True
		c.note("%d of %s stable, %d stale, %d never read", stable, plural(attempts, "element", "elements"), len(stale), len(neverRead))
	}
	return nil
}

// elemID returns the number of an add's element, which setInput assigned.
func (c *run) elemID(in *interner, op *history.Op) int { return in.lookup(value(op)) }

// lastAbsent sets, for every element, the latest-invoked read that could
// have seen it (it completed after the element's first add that did not
// fail was invoked) and did not return it.
//
// Testing every element against every read costs elements × reads. Instead
// the reads are taken latest-invoked first, against the elements not yet
// settled, kept in a list ordered by when they could first be seen. A read
// walks only the front of the list it could have seen; an element it
// missed is settled and leaves the list, one it returned is one of its own
// results. So the work is the total size of the reads plus the elements.
func (c *run) lastAbsent(es []setElem, fs []fullElem, reads []setRead) {
	var order []int
	for id := range es {
		if es[id].attempted >= 0 {
			order = append(order, id)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(es[a].attempted, es[b].attempted) })
	// A doubly linked list over order; node len(order) is the sentinel.
	n := len(order)
	next, prev := make([]int, n+1), make([]int, n+1)
	for i := range n + 1 {
		next[i], prev[i] = (i+1)%(n+1), (i+n)%(n+1)
	}
	byCall := make([]int, len(reads))
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortFunc(byCall, func(a, b int) int { return cmp.Compare(reads[b].op.Call, reads[a].op.Call) })
	stamp := make([]int, len(es))
	for mark, ri := range byCall {
		r := reads[ri]
		for _, id := range r.ids {
			stamp[id] = mark + 1
		}
		for node := next[n]; node != n && es[order[node]].attempted < r.op.Return; node = next[node] {
			id := order[node]
			if stamp[id] == mark+1 {
				continue
			}
			fs[id].lastAbsent = ri
			next[prev[node]], prev[next[node]] = next[node], prev[node]
		}
	}
}

// nonNil makes an empty list marshal as [] rather than null.
func nonNil(v []history.Value) []history.Value {
	if v == nil {
		return []history.Value{}
	}
	return v
}

func nonNilSlice[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
