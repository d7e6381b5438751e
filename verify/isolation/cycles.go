package isolation

import (
	"context"
	"slices"
)

// A cycle class, as Elle classifies cycles by the kinds of their edges:
// only ww (G0); ww and wr with at least one wr (G1c); exactly one rw
// (G-single-item); several rw, no two adjacent (G-nonadjacent-item);
// several rw with two adjacent (G2-item). A variant adds process or
// real-time edges, at least one of which the cycle needs.
type class uint8

const (
	classG0 class = iota
	classG1c
	classGSingle
	classGNonadjacent
	classG2
)

var classNames = [...]string{"G0", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item"}

// spec is one search: a class and a variant (0, process or realtime).
type spec struct {
	class   class
	variant rel
}

func (s spec) name() string {
	n := classNames[s.class]
	switch s.variant {
	case process:
		n += "-process"
	case realtime:
		n += "-realtime"
	}
	return n
}

// mask is the edge kinds the search may use.
func (s spec) mask() rel {
	m := ww | s.variant
	if s.class != classG0 {
		m |= wr
	}
	if s.class >= classGSingle {
		m |= rw
	}
	return m
}

// minLen is the fewest edges a cycle of the class can have: two, or four
// for G-nonadjacent (rw, something else, rw, something else). A search
// that found a cycle this short can stop.
func (s spec) minLen() int {
	if s.class == classGNonadjacent {
		return 4
	}
	return 2
}

// allSpecs in the order they are searched: most severe first, data
// dependencies before process before real time.
var allSpecs = func() []spec {
	var out []spec
	for _, v := range []rel{0, process, realtime} {
		for c := classG0; c <= classG2; c++ {
			out = append(out, spec{c, v})
		}
	}
	return out
}()

// The search state packs what the constraints need to know of the path so
// far: whether it used a wr, how many rw (0, 1, 2 = two or more), whether
// the last and the first edge were rw, whether two rw were adjacent, and
// whether it used the variant's edge kind.
type sstate uint8

const (
	stWR sstate = 1 << iota
	stRW1
	stRW2
	stLastRW
	stFirstRW
	stAdj
	stVariant
)

const numStates = 1 << 7

func (st sstate) rwCount() int {
	switch {
	case st&stRW2 != 0:
		return 2
	case st&stRW1 != 0:
		return 1
	}
	return 0
}

// step returns the state after taking an edge used as kind k (one kind),
// and whether the class allows it.
func (s spec) step(st sstate, k rel, first bool) (sstate, bool) {
	if k == rw {
		switch s.class {
		case classG0, classG1c:
			return 0, false
		case classGSingle:
			if st.rwCount() > 0 {
				return 0, false
			}
		case classGNonadjacent:
			// No rw right after another. The first edge may be one (the
			// search starts on an rw edge, the rarest kind the class
			// needs); done then refuses a last edge that is rw too, which
			// would meet it.
			if st&stLastRW != 0 {
				return 0, false
			}
		}
		if st&stLastRW != 0 {
			st |= stAdj
		}
		switch st.rwCount() {
		case 0:
			st |= stRW1
		default:
			st |= stRW2
		}
		st |= stLastRW
		if first {
			st |= stFirstRW
		}
		return st, true
	}
	st &^= stLastRW
	if k == wr {
		st |= stWR
	}
	if k == s.variant && k != 0 {
		st |= stVariant
	}
	return st, true
}

// done reports whether a path back at its start in state st is a cycle
// of the class.
func (s spec) done(st sstate) bool {
	if s.variant != 0 && st&stVariant == 0 {
		return false
	}
	switch s.class {
	case classG1c:
		return st&stWR != 0
	case classGSingle:
		return st.rwCount() == 1
	case classGNonadjacent:
		return st.rwCount() == 2 && st&stAdj == 0 && (st&stLastRW == 0 || st&stFirstRW == 0)
	case classG2:
		return st.rwCount() == 2 && (st&stAdj != 0 || (st&stLastRW != 0 && st&stFirstRW != 0))
	}
	return true
}

// cycleStep is an edge of a found cycle, with the kind it was used as.
type cycleStep struct {
	from, to int32
	kind     rel
}

// searcher finds shortest cycles of a class inside one strongly
// connected component, by breadth-first search over (node, state) pairs.
type searcher struct {
	g     *graph
	local []int32 // node → its index in the component, or -1
	nodes []int32
	// visited holds, per (local node, state), the search generation that
	// reached it; parent the (local node × numStates + state) it came from
	// and the kind used.
	visited []uint32
	parent  []int32
	pkind   []rel
	gen     uint32
	queue   []int32
	// budget counts the (node, state) pairs a search may still visit:
	// searches are bounded by work, not time, so that a given history and
	// budget always give the same answer.
	budget int64
}

func newSearcher(g *graph, comp []int32, local []int32) *searcher {
	for i, v := range comp {
		local[v] = int32(i)
	}
	n := len(comp) * numStates
	return &searcher{g: g, local: local, nodes: comp, visited: make([]uint32, n), parent: make([]int32, n), pkind: make([]rel, n)}
}

// release forgets the component's local numbering.
func (s *searcher) release() {
	for _, v := range s.nodes {
		s.local[v] = -1
	}
}

// kinds lists the single kinds an edge of kinds r may be used as under
// mask, into buf (no allocation: this runs for every edge a search
// looks at).
func kinds(buf *[5]rel, r, mask rel) []rel {
	r &= mask
	out := buf[:0]
	for k := ww; k <= realtime && r != 0; k <<= 1 {
		if r&k != 0 {
			out = append(out, k)
			r &^= k
		}
	}
	return out
}

// shortest finds the shortest cycle of spec sp that starts with the edge
// from → to used as kind k (or, when k is 0, any cycle through from), no
// longer than maxLen edges. It returns nil when there is none or the
// budget ran out (out is then true).
func (s *searcher) shortest(sp spec, from, to int32, k rel, maxLen int) (cyc []cycleStep, out bool) {
	s.gen++
	if s.gen == 0 { // wrapped: clear
		clear(s.visited)
		s.gen = 1
	}
	mask := sp.mask()
	var kbuf [5]rel
	start := s.local[from]
	s.queue = s.queue[:0]
	push := func(node int32, st sstate, parentID int32, kind rel) {
		id := node*numStates + int32(st)
		if s.visited[id] == s.gen {
			return
		}
		s.visited[id] = s.gen
		s.parent[id] = parentID
		s.pkind[id] = kind
		s.queue = append(s.queue, id)
	}
	// The first edge.
	if k != 0 {
		st, ok := sp.step(0, k, true)
		if !ok || s.local[to] < 0 {
			return nil, false
		}
		push(s.local[to], st, -1-start, k)
	} else {
		lo, hi := s.g.off[from], s.g.off[from+1]
		for i := lo; i < hi; i++ {
			w := s.local[s.g.to[i]]
			if w < 0 {
				continue
			}
			for _, kk := range kinds(&kbuf, s.g.rels[i], mask) {
				if st, ok := sp.step(0, kk, true); ok {
					push(w, st, -1-start, kk)
				}
			}
		}
	}
	depth, levelEnd := 1, len(s.queue)
	for head := 0; head < len(s.queue); head++ {
		if head == levelEnd {
			depth++
			levelEnd = len(s.queue)
		}
		if depth >= maxLen {
			return nil, false
		}
		s.budget--
		if s.budget < 0 {
			return nil, true
		}
		id := s.queue[head]
		node, st := id/numStates, sstate(id%numStates)
		v := s.nodes[node]
		lo, hi := s.g.off[v], s.g.off[v+1]
		for i := lo; i < hi; i++ {
			w := s.local[s.g.to[i]]
			if w < 0 {
				continue
			}
			for _, kk := range kinds(&kbuf, s.g.rels[i], mask) {
				nst, ok := sp.step(st, kk, false)
				if !ok {
					continue
				}
				if w == start && sp.done(nst) {
					return s.path(id, v, from, kk), false
				}
				if w != start {
					push(w, nst, id, kk)
				}
			}
		}
	}
	return nil, false
}

// path walks the parents back from the last (node, state) id, which
// reached the start by an edge of kind last.
func (s *searcher) path(id int32, v, from int32, last rel) []cycleStep {
	steps := []cycleStep{{from: v, to: from, kind: last}}
	for {
		par := s.parent[id]
		node := s.nodes[id/numStates]
		kind := s.pkind[id]
		if par < 0 {
			steps = append(steps, cycleStep{from: s.nodes[-1-par], to: node, kind: kind})
			break
		}
		steps = append(steps, cycleStep{from: s.nodes[par/numStates], to: node, kind: kind})
		id = par
	}
	slices.Reverse(steps)
	return steps
}

// searchComponent finds the shortest cycle of sp in the component, trying
// every start (every edge of the rarest kind the class needs, else every
// node) until the budget runs out. It returns the best cycle found and
// whether the search was cut short.
func (s *searcher) searchComponent(ctx context.Context, sp spec) ([]cycleStep, bool) {
	var best []cycleStep
	maxLen := len(s.nodes) + 1
	need := rel(0)
	switch {
	case sp.class >= classGSingle:
		need = rw
	case sp.class == classG1c:
		need = wr
	case sp.variant != 0:
		need = sp.variant
	}
	try := func(from, to int32, k rel) bool {
		if ctx.Err() != nil {
			return false
		}
		c, out := s.shortest(sp, from, to, k, maxLen)
		if c != nil && (best == nil || len(c) < len(best)) {
			best = c
			// Only a shorter cycle is worth finding now.
			maxLen = len(c) - 1
		}
		if out || (best != nil && len(best) <= sp.minLen()) {
			return false
		}
		return true
	}
	cut := false
	for _, v := range s.nodes {
		if need == 0 {
			if !try(v, -1, 0) {
				cut = s.budget < 0 || ctx.Err() != nil
				break
			}
			continue
		}
		lo, hi := s.g.off[v], s.g.off[v+1]
		stop := false
		for i := lo; i < hi; i++ {
			if s.g.rels[i]&need == 0 || s.local[s.g.to[i]] < 0 {
				continue
			}
			if !try(v, s.g.to[i], need) {
				stop = true
				break
			}
		}
		if stop {
			cut = s.budget < 0 || ctx.Err() != nil
			break
		}
	}
	return best, cut && best == nil
}

// classify names a cycle by the kinds its steps were used as, as Elle's
// explainer does.
func classify(c []cycleStep) string {
	var n [32]int
	adj := false
	for i, st := range c {
		n[st.kind]++
		if st.kind == rw && c[(i+len(c)-1)%len(c)].kind == rw {
			adj = true
		}
	}
	var base string
	switch {
	case n[rw] == 1:
		base = "G-single-item"
	case n[rw] > 1 && adj:
		base = "G2-item"
	case n[rw] > 1:
		base = "G-nonadjacent-item"
	case n[wr] > 0:
		base = "G1c"
	default:
		base = "G0"
	}
	switch {
	case n[realtime] > 0:
		return base + "-realtime"
	case n[process] > 0:
		return base + "-process"
	}
	return base
}
