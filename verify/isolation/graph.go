package isolation

import (
	"slices"
)

// rel is a set of dependency kinds between two transactions.
type rel uint8

// Dependency kinds. ww: the second overwrote (appended after) the first's
// write; wr: the second read the first's write; rw: the second overwrote
// the version the first read (an anti-dependency); process: the same
// process ran the second after the first; realtime: the first completed
// before the second was invoked.
const (
	ww rel = 1 << iota
	wr
	rw
	process
	realtime
)

var relNames = []struct {
	r    rel
	name string
}{{ww, "ww"}, {wr, "wr"}, {rw, "rw"}, {process, "process"}, {realtime, "realtime"}}

func (r rel) String() string {
	s := ""
	for _, n := range relNames {
		if r&n.r != 0 {
			if s != "" {
				s += "+"
			}
			s += n.name
		}
	}
	return s
}

// edge is an edge being collected.
type edge struct {
	from, to int32
	r        rel
}

// edges collects edges in chunks of a fixed size: a history of a million
// transactions has some ten million, and one slice grown by append would
// copy them over and over and, while it grows, hold them twice.
type edges struct {
	chunks [][]edge
	n      int
}

const edgeChunk = 1 << 16

func (es *edges) add(e edge) {
	if k := len(es.chunks); k == 0 || len(es.chunks[k-1]) == edgeChunk {
		es.chunks = append(es.chunks, make([]edge, 0, edgeChunk))
	}
	c := &es.chunks[len(es.chunks)-1]
	*c = append(*c, e)
	es.n++
}

// graph is the dependency graph in compressed sparse rows: the edges out
// of node v are to[off[v]:off[v+1]] with kinds rels[off[v]:off[v+1]].
// Nodes are transaction numbers; an edge's kinds are the union of every
// dependency found between the two.
type graph struct {
	n    int
	off  []int32
	to   []int32
	rels []rel
}

// build sorts and merges collected edges into a graph of n nodes. Self
// edges are dropped: a transaction does not depend on itself. The edges
// are placed by their source in one counting pass (a general sort of
// millions of edges cost more than the cycle searches), then each node's
// few edges are sorted by target and merged.
func build(n int, es *edges) *graph {
	g := &graph{n: n, off: make([]int32, n+1)}
	for _, c := range es.chunks {
		for _, e := range c {
			g.off[e.from+1]++
		}
	}
	for v := 1; v <= n; v++ {
		g.off[v] += g.off[v-1]
	}
	to := make([]int32, es.n)
	rels := make([]rel, es.n)
	next := slices.Clone(g.off[:n])
	for k, c := range es.chunks {
		for _, e := range c {
			i := next[e.from]
			next[e.from]++
			to[i], rels[i] = e.to, e.r
		}
		// The chunk is placed: let it go before the graph grows.
		es.chunks[k] = nil
	}
	next = nil
	// Merge in place: w is where the next kept edge goes.
	w := int32(0)
	for v := 0; v < n; v++ {
		lo, hi := g.off[v], g.off[v+1]
		g.off[v] = w
		sortEdges(to[lo:hi], rels[lo:hi])
		for i := lo; i < hi; i++ {
			if to[i] == int32(v) {
				continue
			}
			if w > g.off[v] && to[w-1] == to[i] {
				rels[w-1] |= rels[i]
				continue
			}
			to[w], rels[w] = to[i], rels[i]
			w++
		}
	}
	g.off[n] = w
	g.to, g.rels = slices.Clip(to[:w]), slices.Clip(rels[:w])
	return g
}

// sortEdges sorts one node's edges by target: by insertion, as most
// nodes have a handful, else by a general sort.
func sortEdges(to []int32, rels []rel) {
	if len(to) > 32 {
		idx := make([]int32, len(to))
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return int(to[a] - to[b]) })
		t2, r2 := make([]int32, len(to)), make([]rel, len(to))
		for i, j := range idx {
			t2[i], r2[i] = to[j], rels[j]
		}
		copy(to, t2)
		copy(rels, r2)
		return
	}
	for i := 1; i < len(to); i++ {
		t, r := to[i], rels[i]
		j := i
		for j > 0 && to[j-1] > t {
			to[j], rels[j] = to[j-1], rels[j-1]
			j--
		}
		to[j], rels[j] = t, r
	}
}

// sccs returns the strongly connected components of more than one node of
// the subgraph of edges with a kind in mask (Tarjan's algorithm, without
// recursion so that a long chain cannot overflow the stack). Components
// come with their nodes sorted.
func (g *graph) sccs(mask rel) [][]int32 { return g.sccsWithin(mask, nil) }

// sccsWithin is sccs restricted to the components of a subgraph of more
// kinds than mask: within numbers each node's component there, -1 for
// none (nil: no restriction). Every component of the smaller subgraph
// lies inside one of them, so only their nodes, and the edges inside
// each, are looked at: the components of a million-transaction history
// hold some thousands of transactions, and nine passes over all of them
// took a quarter of its check.
func (g *graph) sccsWithin(mask rel, within []int32) [][]int32 {
	const unvisited = -1
	index := make([]int32, g.n)
	low := make([]int32, g.n)
	onStack := make([]bool, g.n)
	for i := range index {
		index[i] = unvisited
	}
	var stack []int32
	type frame struct {
		v    int32
		next int32 // next edge position to look at
	}
	var call []frame
	var out [][]int32
	counter := int32(0)
	for root := int32(0); root < int32(g.n); root++ {
		if index[root] != unvisited || within != nil && within[root] < 0 {
			continue
		}
		call = append(call, frame{root, g.off[root]})
		index[root], low[root] = counter, counter
		counter++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.next < g.off[v+1] {
				i := f.next
				f.next++
				if g.rels[i]&mask == 0 {
					continue
				}
				w := g.to[i]
				if within != nil && within[w] != within[v] {
					continue
				}
				if index[w] == unvisited {
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, g.off[w]})
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				var comp []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				if len(comp) > 1 {
					slices.Sort(comp)
					out = append(out, comp)
				}
			}
		}
	}
	return out
}

// extensionSCCs returns the strongly connected components (of more than
// one transaction) of Elle's extension of the subgraph of kinds a by one
// step of kinds b: cycles that may use a edges freely and a b edge only
// right after an a edge. It searches a graph of two states per
// transaction (arrived by a, arrived by b), built only over the
// transactions of nontrivial components of a|b, where every such cycle
// lies.
func (g *graph) extensionSCCs(a, b rel) [][]int32 {
	outer := g.sccs(a | b)
	if len(outer) == 0 {
		return nil
	}
	// local numbers the transactions of the outer components; state 0 is
	// "arrived by b" (must leave by a), state 1 "arrived by a".
	local := make([]int32, g.n)
	for i := range local {
		local[i] = -1
	}
	var nodes []int32
	for _, c := range outer {
		for _, v := range c {
			local[v] = int32(len(nodes))
			nodes = append(nodes, v)
		}
	}
	es := &edges{}
	for i, v := range nodes {
		lv := int32(i)
		for j := g.off[v]; j < g.off[v+1]; j++ {
			lw := local[g.to[j]]
			if lw < 0 {
				continue
			}
			r := g.rels[j]
			if r&a != 0 {
				es.add(edge{2 * lv, 2*lw + 1, a})
				es.add(edge{2*lv + 1, 2*lw + 1, a})
			}
			if r&b != 0 {
				es.add(edge{2*lv + 1, 2 * lw, b})
			}
		}
	}
	h := build(2*len(nodes), es)
	var out [][]int32
	for _, c := range h.sccs(a | b) {
		var comp []int32
		for _, x := range c {
			comp = append(comp, nodes[x/2])
		}
		slices.Sort(comp)
		comp = slices.Compact(comp)
		if len(comp) > 1 {
			out = append(out, comp)
		}
	}
	return out
}
