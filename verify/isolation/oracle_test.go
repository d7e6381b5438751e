package isolation

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// This file holds a brute-force oracle for small transactional histories
// and property tests that hold the checker to it. The oracle decides the
// models from their definitions, by trying every explanation, so that it
// shares no inference with the checker (no version order is inferred from
// reads, no dependency graph is built):
//
//   - serializable: some subset S of the indeterminate (info) transactions
//     and some total order of the committed transactions and S, run one
//     after another from empty keys, gives every committed read the value
//     it returned (Adya's PL-3 as Elle checks it: conflict serializability
//     over the observed values, failed transactions never taking effect);
//   - strict serializable: the same, with the order extending real time: a
//     transaction that completed (ok) before another was invoked comes first
//     (an info transaction never completes, so nothing must follow it);
//   - strong session serializable: the same, with each process's
//     transactions in the order the process ran them;
//   - snapshot isolation: some S, some commit order of the committed
//     transactions and S, and for each a snapshot, a prefix of the commit
//     order ending before its own commit, such that each transaction's reads
//     return its snapshot's state overlaid with its own earlier writes, and
//     first-committer-wins holds: no two transactions that write the same key
//     overlap (one commits before the other's snapshot is taken). Any such
//     choice is a run of start and commit points (put each start just after
//     the commit that ends its snapshot), and every run gives such a choice;
//   - read committed (Adya's PL-2) and read atomic (Cerone, Bernardi and
//     Gotsman's RA): see readCommitted and readAtomic.
//
// Histories are small (at most six transactions over two or three keys)
// so trying every order is cheap.

// gMop is a micro-operation of a generated transaction: a write (an
// append, for list-append) of val, or a read that returned list (list-
// append) or reg (rw-register; 0 is nil).
type gMop struct {
	read bool
	key  int
	val  int
	list []int
	reg  int
}

// gTxn is a generated transaction: its process, how it completed, and
// the positions of its invoke and completion events (ret -1: none).
type gTxn struct {
	proc      int
	typ       history.Type
	mops      []gMop
	call, ret int
}

// gHist is a generated history.
type gHist struct {
	list bool // list-append, else rw-register
	keys int
	txns []gTxn
}

// state is every key's value: lists for list-append, registers (0 nil)
// for rw-register.
type state struct {
	lists [][]int
	regs  []int
}

func (h *gHist) empty() state {
	if h.list {
		return state{lists: make([][]int, h.keys)}
	}
	return state{regs: make([]int, h.keys)}
}

// apply runs t's writes on s (copying what it changes) and returns the new
// state; when check is set it also returns whether every read returned
// what it would see on s, with t's own earlier writes.
func (h *gHist) apply(s state, t *gTxn, check bool) (state, bool) {
	out := state{lists: slices.Clone(s.lists), regs: slices.Clone(s.regs)}
	for _, m := range t.mops {
		if m.read {
			if check && !h.sees(out, m) {
				return out, false
			}
			continue
		}
		if h.list {
			l := out.lists[m.key]
			out.lists[m.key] = append(l[:len(l):len(l)], m.val)
		} else {
			out.regs[m.key] = m.val
		}
	}
	return out, true
}

// sees says whether read m returns its key's value in s.
func (h *gHist) sees(s state, m gMop) bool {
	if h.list {
		return slices.Equal(s.lists[m.key], m.list)
	}
	return s.regs[m.key] == m.reg
}

// reads says whether t's reads match snapshot s overlaid with t's own
// earlier writes.
func (h *gHist) reads(s state, t *gTxn) bool {
	_, ok := h.apply(s, t, true)
	return ok
}

// precedes holds, for the order constraints of a model, before[b] as the
// set (bit mask) of transactions that must precede b if they take effect.
type precedes []uint64

func (h *gHist) constraints(realtime, process bool) precedes {
	before := make(precedes, len(h.txns))
	for a := range h.txns {
		for b := range h.txns {
			ta, tb := &h.txns[a], &h.txns[b]
			if a == b || ta.typ == history.Fail || tb.typ == history.Fail {
				continue
			}
			if realtime && ta.typ == history.OK && ta.ret >= 0 && ta.ret < tb.call {
				before[b] |= 1 << a
			}
			if process && ta.proc == tb.proc && ta.call < tb.call {
				before[b] |= 1 << a
			}
		}
	}
	return before
}

// serial reports whether some subset of the info transactions and some
// order of them and the committed ones, respecting before, explains every
// committed read when run one after another.
func (h *gHist) serial(before precedes) bool {
	var okMask, candMask uint64
	for i, t := range h.txns {
		switch t.typ {
		case history.OK:
			okMask |= 1 << i
			candMask |= 1 << i
		case history.Info:
			candMask |= 1 << i
		}
	}
	var rec func(placed, excluded uint64, s state) bool
	rec = func(placed, excluded uint64, s state) bool {
		if placed&okMask == okMask {
			return true
		}
		for i := range h.txns {
			bit := uint64(1) << i
			if candMask&bit == 0 || (placed|excluded)&bit != 0 {
				continue
			}
			// Committed predecessors must be placed; info ones not
			// placed yet never will be.
			missing := before[i] &^ placed
			if missing&okMask != 0 {
				continue
			}
			t := &h.txns[i]
			next, ok := h.apply(s, t, t.typ == history.OK)
			if !ok {
				continue
			}
			if rec(placed|bit, excluded|missing, next) {
				return true
			}
		}
		return false
	}
	return rec(0, 0, h.empty())
}

// snapshotIsolation reports whether some subset of the info transactions,
// some commit order and some snapshot per transaction explain every
// committed read with first-committer-wins (see the file comment).
func (h *gHist) snapshotIsolation() bool {
	var okMask, candMask uint64
	writes := make([]uint64, len(h.txns)) // keys each transaction writes
	for i, t := range h.txns {
		switch t.typ {
		case history.OK:
			okMask |= 1 << i
			candMask |= 1 << i
		case history.Info:
			candMask |= 1 << i
		}
		for _, m := range t.mops {
			if !m.read {
				writes[i] |= 1 << m.key
			}
		}
	}
	order := make([]int, 0, len(h.txns))
	states := []state{h.empty()} // states[j]: after the first j commits
	var rec func(placed uint64) bool
	rec = func(placed uint64) bool {
		if placed&okMask == okMask {
			return true
		}
		for i := range h.txns {
			bit := uint64(1) << i
			if candMask&bit == 0 || placed&bit != 0 {
				continue
			}
			t := &h.txns[i]
			// Latest snapshot first; an earlier one may not skip a
			// commit that wrote a key t writes too.
			fits := t.typ != history.OK
			for s := len(order); s >= 0 && !fits; s-- {
				if s < len(order) && writes[order[s]]&writes[i] != 0 {
					break
				}
				fits = h.reads(states[s], t)
			}
			if !fits {
				continue
			}
			next, _ := h.apply(states[len(states)-1], t, false)
			order = append(order, i)
			states = append(states, next)
			found := rec(placed | bit)
			order = order[:len(order)-1]
			states = states[:len(states)-1]
			if found {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// readCommitted decides Adya's PL-2 as Elle checks it: for some subset S
// of the info transactions, every read by a committed transaction shows
// writes of the committed transactions and S only (no aborted or never-
// written value: G1a), never another transaction's intermediate state
// (G1b), never its own later write (a future read), and for list-append
// a prefix of one order of each key's appends in which each
// transaction's appends to the key sit together in the order it made
// them; and for some such orders the write-write edges (consecutive
// versions) and write-read edges (a read showing another's write) form no
// cycle (G0, G1c). Read committed asks nothing of a transaction's reads of
// its own writes (Elle's internal anomaly is allowed), and a read's
// version need not be the latest.
func (h *gHist) readCommitted() bool {
	var info []int
	for i, t := range h.txns {
		if t.typ == history.Info {
			info = append(info, i)
		}
	}
	for sub := 0; sub < 1<<len(info); sub++ {
		var in uint64
		for i, t := range h.txns {
			if t.typ == history.OK {
				in |= 1 << i
			}
		}
		for j, i := range info {
			if sub&(1<<j) != 0 {
				in |= 1 << i
			}
		}
		if h.readCommittedWith(in) {
			return true
		}
	}
	return false
}

// writes lists who wrote each (key, value), and where in its transaction.
type writeAt struct{ txn, mop int }

func (h *gHist) writers() map[[2]int]writeAt {
	w := map[[2]int]writeAt{}
	for i, t := range h.txns {
		for j, m := range t.mops {
			if !m.read {
				w[[2]int{m.key, m.val}] = writeAt{i, j}
			}
		}
	}
	return w
}

// final says whether mop j of t is its last write of its key.
func (t *gTxn) final(j int) bool {
	for _, m := range t.mops[j+1:] {
		if !m.read && m.key == t.mops[j].key {
			return false
		}
	}
	return true
}

func (h *gHist) readCommittedWith(in uint64) bool {
	writer := h.writers()
	n := len(h.txns)
	wr := make([]uint64, n) // wr[a]: transactions that read a's writes
	// seen checks one element or register value read by t at mop j.
	seen := func(t, j, key, v int, last bool) bool {
		w, ok := writer[[2]int{key, v}]
		if !ok || in&(1<<w.txn) == 0 {
			return false // never written, aborted, or not taken effect
		}
		if w.txn == t {
			return w.mop < j // else a future read
		}
		if last && !h.txns[w.txn].final(w.mop) {
			return false // an intermediate state
		}
		wr[w.txn] |= 1 << t
		return true
	}
	for t := range h.txns {
		if h.txns[t].typ != history.OK {
			continue
		}
		for j, m := range h.txns[t].mops {
			if !m.read {
				continue
			}
			if h.list {
				for e, v := range m.list {
					if !seen(t, j, m.key, v, e == len(m.list)-1) {
						return false
					}
				}
			} else if m.reg != 0 && !seen(t, j, m.key, m.reg, true) {
				return false
			}
		}
	}
	if !h.list {
		// Registers: any version order that follows a topological order
		// of wr adds no cycle, so only wr must be acyclic.
		return acyclic(wr)
	}
	// Per key, the orders of the appending transactions' blocks that make
	// every read a prefix; then some combination must be acyclic.
	var perKey [][][]int
	for k := range h.keys {
		var blocks []int
		for i, t := range h.txns {
			if in&(1<<i) == 0 {
				continue
			}
			for _, m := range t.mops {
				if !m.read && m.key == k {
					blocks = append(blocks, i)
					break
				}
			}
		}
		var fits [][]int
		permute(blocks, func(order []int) {
			var flat []int
			for _, i := range order {
				for _, m := range h.txns[i].mops {
					if !m.read && m.key == k {
						flat = append(flat, m.val)
					}
				}
			}
			for _, t := range h.txns {
				if t.typ != history.OK {
					continue
				}
				for _, m := range t.mops {
					if m.read && m.key == k && (len(m.list) > len(flat) || !slices.Equal(m.list, flat[:len(m.list)])) {
						return
					}
				}
			}
			fits = append(fits, slices.Clone(order))
		})
		if len(fits) == 0 {
			return false
		}
		perKey = append(perKey, fits)
	}
	var pick func(k int, g []uint64) bool
	pick = func(k int, g []uint64) bool {
		if k == len(perKey) {
			return acyclic(g)
		}
		for _, order := range perKey[k] {
			g2 := slices.Clone(g)
			for x := 1; x < len(order); x++ {
				g2[order[x-1]] |= 1 << order[x]
			}
			if pick(k+1, g2) {
				return true
			}
		}
		return false
	}
	return pick(0, wr)
}

// readAtomic decides read atomic (Cerone, Bernardi and Gotsman's RA, as
// Elle places it: it forbids Elle's internal, G1a and future-read, and
// implies read committed) in the world of Elle's workloads, where a key's
// versions form one timeline: for some subset S of the info transactions,
// some total order of the committed transactions and S (the arbitration,
// which is also every key's version order), and for each committed
// transaction some set of earlier transactions it sees, every read
// returns the writes of the transactions it sees in that order (all of a
// seen transaction's writes: atomic visibility), followed by its own
// writes made before the read; the transactions it sees that wrote a key
// are the first writers of that key (a read shows one state of the key's
// timeline, not a subsequence), and a list read after the transaction's
// own append shows the latest state with that append on top. Nothing asks the sets of different
// transactions to agree, so fractured reads across transactions, lost
// updates and every rw cycle are allowed.
func (h *gHist) readAtomic() bool {
	var okMask, candMask uint64
	for i, t := range h.txns {
		switch t.typ {
		case history.OK:
			okMask |= 1 << i
			candMask |= 1 << i
		case history.Info:
			candMask |= 1 << i
		}
	}
	order := make([]int, 0, len(h.txns))
	sees := func(t int) bool {
		tx := &h.txns[t]
		// A read after the transaction's own append to the key shows
		// that append on top of the key's state: the state must be the
		// latest, every earlier writer seen.
		latest := make([]bool, h.keys)
		appended := make([]bool, h.keys)
		for _, m := range tx.mops {
			if !m.read {
				appended[m.key] = true
			} else if appended[m.key] {
				latest[m.key] = true
			}
		}
		for v := uint64(0); v < 1<<len(order); v++ {
			s := h.empty()
			prefix := true
			wrote := make([]bool, h.keys) // a key some unseen writer wrote
			for j, u := range order {
				writesKey := make([]bool, h.keys)
				for _, m := range h.txns[u].mops {
					if !m.read {
						writesKey[m.key] = true
					}
				}
				if v&(1<<j) == 0 {
					for k, w := range writesKey {
						wrote[k] = wrote[k] || w
						if w && latest[k] && h.list {
							prefix = false
						}
					}
					continue
				}
				for k, w := range writesKey {
					if w && wrote[k] {
						prefix = false
					}
				}
				s, _ = h.apply(s, &h.txns[u], false)
			}
			if prefix && h.reads(s, tx) {
				return true
			}
		}
		return false
	}
	var rec func(placed uint64) bool
	rec = func(placed uint64) bool {
		if placed&okMask == okMask {
			return true
		}
		for i := range h.txns {
			bit := uint64(1) << i
			if candMask&bit == 0 || placed&bit != 0 {
				continue
			}
			if h.txns[i].typ == history.OK && !sees(i) {
				continue
			}
			order = append(order, i)
			found := rec(placed | bit)
			order = order[:len(order)-1]
			if found {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// permute calls f with every order of xs.
func permute(xs []int, f func([]int)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(xs) {
			f(xs)
			return
		}
		for i := k; i < len(xs); i++ {
			xs[k], xs[i] = xs[i], xs[k]
			rec(k + 1)
			xs[k], xs[i] = xs[i], xs[k]
		}
	}
	rec(0)
}

// acyclic says whether the graph of successor masks has no cycle (a self
// edge is one).
func acyclic(g []uint64) bool {
	n := len(g)
	state := make([]int8, n)
	var visit func(v int) bool
	visit = func(v int) bool {
		state[v] = 1
		for w := range n {
			if g[v]&(1<<w) == 0 {
				continue
			}
			if state[w] == 1 || (state[w] == 0 && !visit(w)) {
				return false
			}
		}
		state[v] = 2
		return true
	}
	for v := range n {
		if state[v] == 0 && !visit(v) {
			return false
		}
	}
	return true
}

// oracle decides a model the oracle knows.
func (h *gHist) oracle(model string) bool {
	switch model {
	case "serializable":
		return h.serial(h.constraints(false, false))
	case "strict-serializable":
		return h.serial(h.constraints(true, false))
	case "strong-session-serializable":
		return h.serial(h.constraints(false, true))
	case "snapshot-isolation":
		return h.snapshotIsolation()
	case "read-committed":
		return h.readCommitted()
	case "read-atomic":
		return h.readAtomic()
	}
	panic("oracle: no model " + model)
}

// events renders the history for the checker: invokes carry reads of nil,
// ok completions the values read, fail and info completions the invoke's
// value.
func (h *gHist) events() *history.History {
	type ev struct {
		pos    int
		t      int
		invoke bool
	}
	var evs []ev
	for i, t := range h.txns {
		evs = append(evs, ev{t.call, i, true})
		if t.ret >= 0 {
			evs = append(evs, ev{t.ret, i, false})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int { return a.pos - b.pos })
	out := &history.History{Format: history.JSONL}
	for _, e := range evs {
		t := &h.txns[e.t]
		typ := history.Invoke
		if !e.invoke {
			typ = t.typ
		}
		var mops []history.Value
		for _, m := range t.mops {
			k := int64(m.key)
			switch {
			case !m.read && h.list:
				mops = append(mops, []history.Value{"append", k, int64(m.val)})
			case !m.read:
				mops = append(mops, []history.Value{"w", k, int64(m.val)})
			case typ != history.OK:
				mops = append(mops, []history.Value{"r", k, nil})
			case h.list:
				l := make([]history.Value, len(m.list))
				for j, v := range m.list {
					l[j] = int64(v)
				}
				mops = append(mops, []history.Value{"r", k, l})
			case m.reg == 0:
				mops = append(mops, []history.Value{"r", k, nil})
			default:
				mops = append(mops, []history.Value{"r", k, int64(m.reg)})
			}
		}
		out.Events = append(out.Events, history.Event{Index: int64(len(out.Events)), Process: history.Process(t.proc), Type: typ, F: "txn", Value: mops})
	}
	return out
}

// String renders the history one event per line, for failure reports.
func (h *gHist) String() string {
	var b strings.Builder
	for _, e := range h.events().Events {
		fmt.Fprintf(&b, "%d %s %s\n", e.Process, e.Type, history.Show(e.Value))
	}
	return b.String()
}

// genHistory draws a small history. Reads return what a hidden run of the
// effective transactions (in a random commit order, each on a random
// snapshot, often the latest) would return, sometimes disturbed, so that
// the histories are valid and invalid under every model in useful
// proportions.
func genHistory(t *rapid.T, list bool) *gHist {
	h := &gHist{list: list, keys: rapid.IntRange(2, 3).Draw(t, "keys")}
	n := rapid.IntRange(1, 6).Draw(t, "txns")
	lanes := rapid.IntRange(1, 3).Draw(t, "processes")
	next := make([]int, h.keys) // the last value written per key
	laneOf := make([]int, n)
	for i := range n {
		tx := gTxn{}
		laneOf[i] = rapid.IntRange(0, lanes-1).Draw(t, "lane")
		for range rapid.IntRange(1, 3).Draw(t, "mops") {
			m := gMop{read: rapid.Bool().Draw(t, "read"), key: rapid.IntRange(0, h.keys-1).Draw(t, "key")}
			if !m.read {
				next[m.key]++
				m.val = next[m.key]
			}
			tx.mops = append(tx.mops, m)
		}
		switch rapid.IntRange(0, 9).Draw(t, "outcome") {
		case 0:
			tx.typ = history.Fail
		case 1, 2:
			tx.typ = history.Info
		default:
			tx.typ = history.OK
		}
		h.txns = append(h.txns, tx)
	}
	// The timeline: each lane runs its transactions one at a time; after
	// an info a lane continues as a new process, as Jepsen's do.
	queue := make([][]int, lanes)
	for i, l := range laneOf {
		queue[l] = append(queue[l], i)
	}
	open := make([]int, lanes)
	gen := make([]int, lanes)
	for l := range open {
		open[l] = -1
	}
	pos := 0
	for {
		var choices []int // lane*2 (+1 to complete)
		for l := range lanes {
			if open[l] >= 0 {
				choices = append(choices, 2*l+1)
			} else if len(queue[l]) > 0 {
				choices = append(choices, 2*l)
			}
		}
		if len(choices) == 0 {
			break
		}
		c := choices[rapid.IntRange(0, len(choices)-1).Draw(t, "event")]
		l := c / 2
		if c%2 == 0 {
			i := queue[l][0]
			queue[l] = queue[l][1:]
			open[l] = i
			h.txns[i].proc = l + 10*gen[l]
			h.txns[i].call = pos
			h.txns[i].ret = -1
			pos++
			continue
		}
		i := open[l]
		open[l] = -1
		tx := &h.txns[i]
		if tx.typ == history.Info {
			gen[l]++
			if rapid.Bool().Draw(t, "never completes") {
				continue
			}
		}
		tx.ret = pos
		pos++
	}

	// The hidden run: a commit order of the effective transactions.
	var eff []int
	for i := range h.txns {
		if h.txns[i].typ == history.OK || (h.txns[i].typ == history.Info && rapid.Bool().Draw(t, "info took effect")) {
			eff = append(eff, i)
		}
	}
	if rapid.IntRange(0, 2).Draw(t, "real-time order") == 0 {
		slices.SortStableFunc(eff, func(a, b int) int { return h.txns[a].call - h.txns[b].call })
	} else {
		for j := range eff {
			k := rapid.IntRange(j, len(eff)-1).Draw(t, "commit order")
			eff[j], eff[k] = eff[k], eff[j]
		}
	}
	states := []state{h.empty()}
	for _, i := range eff {
		s, _ := h.apply(states[len(states)-1], &h.txns[i], false)
		states = append(states, s)
	}
	for j, i := range eff {
		tx := &h.txns[i]
		if tx.typ != history.OK {
			continue
		}
		snap := j
		if rapid.IntRange(0, 2).Draw(t, "stale snapshot") == 0 {
			snap = rapid.IntRange(0, j).Draw(t, "snapshot")
		}
		s := states[snap]
		s = state{lists: slices.Clone(s.lists), regs: slices.Clone(s.regs)}
		for k := range tx.mops {
			m := &tx.mops[k]
			if !m.read {
				if h.list {
					l := s.lists[m.key]
					s.lists[m.key] = append(l[:len(l):len(l)], m.val)
				} else {
					s.regs[m.key] = m.val
				}
				continue
			}
			if h.list {
				m.list = slices.Clone(s.lists[m.key])
			} else {
				m.reg = s.regs[m.key]
			}
			if rapid.IntRange(0, 11).Draw(t, "disturb") == 0 {
				disturb(t, h, m, next[m.key])
			}
		}
	}
	return h
}

// disturb changes a read to something a faulty database might return.
func disturb(t *rapid.T, h *gHist, m *gMop, maxVal int) {
	if !h.list {
		m.reg = rapid.IntRange(0, maxVal).Draw(t, "register read")
		return
	}
	switch rapid.IntRange(0, 3).Draw(t, "list fault") {
	case 0: // lose the last element
		if len(m.list) > 0 {
			m.list = m.list[:len(m.list)-1]
		}
	case 1: // show some write of the key, maybe a failed or later one
		if maxVal > 0 {
			m.list = append(m.list, rapid.IntRange(1, maxVal).Draw(t, "element"))
		}
	case 2: // reorder
		if len(m.list) > 1 {
			m.list[0], m.list[len(m.list)-1] = m.list[len(m.list)-1], m.list[0]
		}
	case 3:
		m.list = nil
	}
}

// oracleChecks is the number of random histories per model and workload:
// at least 10,000 (-rapid.checks raises it).
const oracleChecks = 10_000

func setChecks(t *testing.T) {
	n := oracleChecks
	if testing.Short() {
		n *= 5 // rapid divides by five under -short
	}
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid registers no -rapid.checks flag")
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur >= n {
		return
	}
	if err := flag.Set("rapid.checks", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
}

// agree holds the checker to the oracle on one history and says what was
// decided, for the counts.
//
// Which direction must hold:
//
//   - Every workload, every model: a violation the checker reports is one
//     the oracle confirms (checker invalid ⇒ oracle invalid). This is the
//     soundness the toolkit promises; nothing may loosen it.
//   - list-append: the converse too (oracle invalid ⇒ checker invalid),
//     for every model here. Every read shows the whole order of appends
//     before it, so the checker's inferred version order is the one any
//     explanation must use for the elements read, and appends no read shows
//     are placed after every element read, which any explanation may do as
//     well; for the serializable family an acyclic graph then gives an
//     explanation by topological order, and for snapshot isolation the
//     absence of cycles with no two rw edges adjacent does (Cerone and
//     Gotsman's characterization).
//   - rw-register, read committed: both directions. Read committed needs
//     no version order beyond one that follows the reads: with every read
//     checked for aborted, intermediate and future values, the history is
//     read committed exactly when the write-read edges form no cycle, and
//     the checker's only version edges (write follows read) run beside
//     write-read edges it has anyway.
//   - rw-register, the other models: only the first direction. Without version information
//     the checker knows only that the initial state comes first and that a
//     transaction's write follows what it read, so a history whose every
//     explanation fails for want of a version order it cannot infer (two
//     blind writes read in opposite orders, say) passes as valid: Elle is
//     weaker here by design. The oracle still catches any false alarm.
//   - read atomic: only the first direction, on either workload. Elle
//     checks read atomic through the anomalies it names (internal, aborted
//     and future reads, and read committed's); a fractured read, which sees
//     one of a transaction's writes and misses another, shows only as an
//     rw cycle, which Elle's lattice leaves to stronger models (consistent
//     view forbids G-single). The oracle sees it; the checker, like Elle,
//     passes it.
//   - unknown: the checker may answer unknown only for an empty dependency
//     graph, and then the oracle must find the history valid: unknown never
//     hides a violation it could have proved.
func agree(t *rapid.T, h *gHist, model string) (oracleValid, weaker bool) {
	workload := RWRegister
	if h.list {
		workload = ListAppend
	}
	res, err := Check(context.Background(), h.events(), Options{Workload: workload, Consistency: model})
	if err != nil {
		t.Fatalf("checker: %v\n%s", err, h)
	}
	want := h.oracle(model)
	// The named searches are complete on histories this small: the
	// cycle-exists fallback may speak only when a search was cut short.
	for _, typ := range res.AnomalyTypes {
		if strings.HasSuffix(typ, "-cycle-exists") && !slices.Contains(res.AnomalyTypes, "cycle-search-timeout") {
			t.Fatalf("%s %s: %s without a named cycle: %v\n%s", workload, model, typ, res.AnomalyTypes, h)
		}
	}
	switch res.Valid {
	case linear.False:
		if want {
			t.Fatalf("%s %s: checker says invalid (%v: %v), oracle finds an explanation\n%s", workload, model, res.AnomalyTypes, firstExplanations(res), h)
		}
	case linear.True:
		if !want && (h.list || model == "read-committed") && model != "read-atomic" && (model != "snapshot-isolation" || h.ordersKnown()) {
			t.Fatalf("%s %s: checker says valid, oracle finds no explanation\n%s", workload, model, h)
		}
		weaker = !want
	default:
		if !slices.Equal(res.AnomalyTypes, []string{"empty-transaction-graph"}) || !want {
			t.Fatalf("%s %s: checker says unknown (%v), oracle says %v\n%s", workload, model, res.AnomalyTypes, want, h)
		}
	}
	return want, weaker
}

var oracleModels = []string{"serializable", "strict-serializable", "strong-session-serializable", "snapshot-isolation", "read-committed", "read-atomic"}

// ordersKnown says whether reads fix every key's order of appends as far
// as snapshot isolation can care: at most one transaction (ok or info)
// appended to the key without any ok read showing it. Two such appenders
// are in some order nobody observed, and Elle infers none: when each read
// the initial state of a key the other appended to, every order gives a
// G-single (and first-committer-wins forbids them both), but the checker,
// seeing only their two rw edges, reports write skew, which snapshot
// isolation allows.
func (h *gHist) ordersKnown() bool {
	shown := map[[2]int]bool{}
	for _, t := range h.txns {
		if t.typ != history.OK {
			continue
		}
		for _, m := range t.mops {
			if m.read {
				for _, v := range m.list {
					shown[[2]int{m.key, v}] = true
				}
			}
		}
	}
	hidden := make([]int, h.keys)
	for _, t := range h.txns {
		if t.typ == history.Fail {
			continue
		}
		counted := make([]bool, h.keys)
		for _, m := range t.mops {
			if !m.read && !shown[[2]int{m.key, m.val}] && !counted[m.key] {
				counted[m.key] = true
				hidden[m.key]++
			}
		}
	}
	for _, n := range hidden {
		if n > 1 {
			return false
		}
	}
	return true
}

// TestOracle runs the checker against the brute-force oracle on random
// histories: at least 10,000 per model and workload.
func TestOracle(t *testing.T) {
	setChecks(t)
	for _, list := range []bool{true, false} {
		workload := RWRegister
		if list {
			workload = ListAppend
		}
		for _, model := range oracleModels {
			t.Run(workload+"/"+model, func(t *testing.T) {
				var valid, invalid, weaker int
				rapid.Check(t, func(rt *rapid.T) {
					ok, weak := agree(rt, genHistory(rt, list), model)
					if ok {
						valid++
					} else {
						invalid++
					}
					if weak {
						weaker++
					}
				})
				t.Logf("%s %s: %d histories the oracle found valid, %d invalid; the checker passed %d of the invalid ones where it is weaker by design", workload, model, valid, invalid, weaker)
				// The generator must exercise both answers, or the
				// agreement says little.
				if valid < oracleChecks/50 || invalid < oracleChecks/50 {
					t.Fatalf("unbalanced generator: %d valid, %d invalid", valid, invalid)
				}
			})
		}
	}
}

// fromEvents reads a history the way events writes it, for the oracle:
// keys and values are small integers.
func fromEvents(t *testing.T, hist *history.History, list bool) *gHist {
	t.Helper()
	h := &gHist{list: list}
	open := map[history.Process]int{}
	num := func(v history.Value) int {
		n, ok := v.(int64)
		if !ok {
			t.Fatalf("value %s is not an integer", history.Show(v))
		}
		return int(n)
	}
	for pos, e := range hist.Events {
		mops, _ := e.Value.([]history.Value)
		if e.Type == history.Invoke {
			tx := gTxn{proc: int(e.Process), call: pos, ret: -1, typ: history.Info}
			for _, raw := range mops {
				m := raw.([]history.Value)
				g := gMop{read: m[0] == "r", key: num(m[1])}
				if !g.read {
					g.val = num(m[2])
				}
				h.keys = max(h.keys, g.key+1)
				tx.mops = append(tx.mops, g)
			}
			open[e.Process] = len(h.txns)
			h.txns = append(h.txns, tx)
			continue
		}
		i := open[e.Process]
		delete(open, e.Process)
		tx := &h.txns[i]
		tx.typ, tx.ret = e.Type, pos
		if e.Type != history.OK {
			continue
		}
		for j, raw := range mops {
			m := raw.([]history.Value)
			if m[0] != "r" {
				continue
			}
			switch v := m[2].(type) {
			case nil:
			case []history.Value:
				for _, x := range v {
					tx.mops[j].list = append(tx.mops[j].list, num(x))
				}
			default:
				tx.mops[j].reg = num(v)
			}
		}
	}
	return h
}

// The disagreements the property tests found, shrunk by rapid and kept:
// each file is checked by the checker and decided by the oracle again.
func TestOracleRegressions(t *testing.T) {
	cases := []struct {
		file, model string
		list        bool
		checker     linear.Verdict
		oracle      bool
		types       []string
	}{
		// A transaction appended 1 then 2 to key 1; a read shows
		// [2 1 3]. Reads fix the order of appends, and this one holds the
		// transaction's own two in reverse: a write dependency of the
		// transaction on itself. The checker saw no cycle (the graph keeps
		// no self edges) and called it serializable; it now reports the
		// one-step G0.
		{"own-appends-reversed.jsonl", "serializable", true, linear.False, false, []string{"G0"}},
		{"own-appends-reversed.jsonl", "read-uncommitted", true, linear.False, false, []string{"G0"}},
		// Two transactions append to key 0 unseen, and each read the
		// initial state of a key the other appended to. Under snapshot
		// isolation every order of their appends makes a G-single, and
		// first-committer-wins forbids them both; the checker, like Elle,
		// infers no order for appends no read shows and sees only write
		// skew. Kept as the documented limit (see ordersKnown); under
		// serializable the checker does catch it.
		{"si-unseen-co-writers.jsonl", "snapshot-isolation", true, linear.True, false, []string{}},
		{"si-unseen-co-writers.jsonl", "serializable", true, linear.False, false, []string{"G2-item"}},
		// A transaction appended 1 to key 0 and then read it as [1 2], 2
		// appended by an info transaction: that one built on the
		// uncommitted 1 and the reader saw it, a G1c. The checker set the
		// read aside as internally inconsistent (which read committed
		// allows) and drew no edge from it; like Elle it now takes every
		// read as an observation.
		{"rc-foreign-after-own-append.jsonl", "read-committed", true, linear.False, false, []string{"G1c"}},
		// A read after the transaction's own write returned a failed
		// transaction's value: the checker noted only the internal
		// inconsistency; it now checks such reads for aborted,
		// intermediate and never-written values too.
		{"rc-aborted-read-after-own-write.jsonl", "read-committed", false, linear.False, false, []string{"G1a", "empty-transaction-graph"}},
		// A read after the transaction's own write of 1 returned 2, which
		// it writes only afterwards: a future read, not just internal.
		{"future-read-after-own-write.jsonl", "read-committed", false, linear.False, false, []string{"empty-transaction-graph", "future-read"}},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.model, func(t *testing.T) {
			hist, err := history.ReadFile("testdata/oracle/"+c.file, "")
			if err != nil {
				t.Fatal(err)
			}
			workload := RWRegister
			if c.list {
				workload = ListAppend
			}
			res, err := Check(context.Background(), hist, Options{Workload: workload, Consistency: c.model})
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != c.checker || !slices.Equal(res.AnomalyTypes, c.types) {
				t.Fatalf("checker: %v %v, want %v %v: %v", res.Valid, res.AnomalyTypes, c.checker, c.types, firstExplanations(res))
			}
			h := fromEvents(t, hist, c.list)
			oracleModel := c.model
			if c.model == "read-uncommitted" {
				oracleModel = "serializable" // a serial run must explain it too
			}
			if got := h.oracle(oracleModel); got != c.oracle {
				t.Fatalf("oracle %v, want %v", got, c.oracle)
			}
		})
	}
}
