package netfault

import (
	"slices"
	"strings"
)

// A Grudge says which directed links a partition cuts: g[a] lists the nodes
// that a cannot reach. A node absent from the map (as a key and in every
// list) is untouched. Symmetric shapes list both directions. Lists keep the
// order of the node list the shape was built from.
type Grudge map[string][]string

// Halves cuts the first ⌈n/2⌉ nodes off from the rest, so that the first
// half is the majority when n is odd. With fewer than two nodes nothing is
// cut.
func Halves(nodes []string) Grudge {
	k := (len(nodes) + 1) / 2
	return between(nodes[:k], nodes[k:])
}

// RandomHalves is Halves after a shuffle of the nodes by seed: the same seed
// and nodes give the same grudge, on every platform and Go version.
func RandomHalves(nodes []string, seed uint64) Grudge {
	shuffled := Shuffle(nodes, seed)
	k := (len(shuffled) + 1) / 2
	majority := shuffled[:k]
	// Lists follow the original order, which reads better than the shuffled
	// one in a history.
	var a, b []string
	for _, n := range nodes {
		if slices.Contains(majority, n) {
			a = append(a, n)
		} else {
			b = append(b, n)
		}
	}
	return between(a, b)
}

// Isolate cuts node off from every other node of nodes, both ways.
func Isolate(nodes []string, node string) Grudge {
	var rest []string
	for _, n := range nodes {
		if n != node {
			rest = append(rest, n)
		}
	}
	return between([]string{node}, rest)
}

// MajoritiesRing places the nodes on a ring in the order given and lets each
// node see itself and its k nearest neighbours on either side, with k the
// smallest number such that 2k ≥ ⌊n/2⌋: every node sees a majority, and
// for n ≥ 4 no two nodes see the same one, so no majority agrees on who is
// in it. It cuts everything else, both ways.
//
// The window is symmetric because a packet-level cut of one direction breaks
// TCP in both. It holds exactly ⌊n/2⌋ neighbours when ⌊n/2⌋ is even (n = 4,
// 5, 8, 9, ...) and one more when it is odd (n = 6, 7, ...), still short of
// the whole ring. For n = 4 each node loses only the node opposite it. For
// n ≤ 3 the window is the whole ring and the grudge is empty: three nodes
// cannot be given distinct majorities with symmetric links (use Bridge).
// Shuffle the nodes first for a random ring.
func MajoritiesRing(nodes []string) Grudge {
	n := len(nodes)
	k := (n/2 + 1) / 2
	g := Grudge{}
	for i, a := range nodes {
		for j, b := range nodes {
			d := (j - i + n) % n
			if d > k && d < n-k {
				g[a] = append(g[a], b)
			}
		}
	}
	return g
}

// Bridge splits the nodes into the first ⌊n/2⌋, a bridge node (the next one)
// and the rest: the two sides cannot reach each other, the bridge reaches
// both. With an odd n each side plus the bridge is a majority; with an even
// n only the first side plus the bridge is. With fewer than three nodes one
// side is empty and nothing is cut.
func Bridge(nodes []string) Grudge {
	if len(nodes) < 3 {
		return Grudge{}
	}
	k := len(nodes) / 2
	return between(nodes[:k], nodes[k+1:])
}

// between cuts every node of a off from every node of b, both ways.
func between(a, b []string) Grudge {
	g := Grudge{}
	if len(a) == 0 || len(b) == 0 {
		return g
	}
	for _, x := range a {
		g[x] = slices.Clone(b)
	}
	for _, y := range b {
		g[y] = slices.Clone(a)
	}
	return g
}

// Shuffle returns a copy of nodes in an order drawn from seed. It uses its
// own generator (SplitMix64) and Fisher–Yates, so the order never changes
// with the Go version: a run's seed must replay the same partitions.
func Shuffle(nodes []string, seed uint64) []string {
	out := slices.Clone(nodes)
	state := seed
	next := func() uint64 {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	for i := len(out) - 1; i > 0; i-- {
		// The modulo bias is below 2^-50 for any realistic cluster size.
		j := int(next() % uint64(i+1))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Links returns the grudge's cut links as (from, to) pairs, sorted, without
// duplicates or self-links.
func (g Grudge) Links() [][2]string {
	var links [][2]string
	for from, tos := range g {
		for _, to := range tos {
			if to != from {
				links = append(links, [2]string{from, to})
			}
		}
	}
	slices.SortFunc(links, func(x, y [2]string) int {
		if c := strings.Compare(x[0], y[0]); c != 0 {
			return c
		}
		return strings.Compare(x[1], y[1])
	})
	return slices.Compact(links)
}

// Cuts reports whether the grudge cuts the link from → to.
func (g Grudge) Cuts(from, to string) bool {
	return from != to && slices.Contains(g[from], to)
}

// Nodes returns every node the grudge names, sorted.
func (g Grudge) Nodes() []string {
	var nodes []string
	for from, tos := range g {
		nodes = append(nodes, from)
		nodes = append(nodes, tos...)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// String describes the grudge for a nemesis operation in a history. When the
// nodes it names fall into groups that reach each other fully and nothing
// outside (halves, an isolated node), it lists the groups:
// "n1,n2,n3 | n4,n5". Otherwise it lists each node's cuts:
// "n1 -/-> n3,n4; n2 -/-> n4,n5". An empty grudge is "none".
func (g Grudge) String() string {
	links := g.Links()
	if len(links) == 0 {
		return "none"
	}
	if groups, ok := g.components(); ok {
		parts := make([]string, len(groups))
		for i, grp := range groups {
			parts[i] = strings.Join(grp, ",")
		}
		return strings.Join(parts, " | ")
	}
	var b strings.Builder
	for i, l := range links {
		switch {
		case i == 0:
			b.WriteString(l[0] + " -/-> " + l[1])
		case l[0] != links[i-1][0]:
			b.WriteString("; " + l[0] + " -/-> " + l[1])
		default:
			b.WriteString("," + l[1])
		}
	}
	return b.String()
}

// components splits the grudge's nodes into groups when "reaches" is an
// equivalence on them: within a group every node reaches every other, across
// groups none does. Groups and their members are sorted.
func (g Grudge) components() ([][]string, bool) {
	nodes := g.Nodes()
	var groups [][]string
	seen := map[string]bool{}
	for _, a := range nodes {
		if seen[a] {
			continue
		}
		var grp []string
		for _, b := range nodes {
			if a == b || !g.Cuts(a, b) {
				grp = append(grp, b)
			}
		}
		for _, x := range grp {
			if seen[x] {
				return nil, false
			}
			seen[x] = true
		}
		groups = append(groups, grp)
	}
	// Every node of a group must reach exactly its group, both ways.
	for _, grp := range groups {
		for _, x := range grp {
			for _, y := range nodes {
				if x == y {
					continue
				}
				same := slices.Contains(grp, y)
				if g.Cuts(x, y) == same || g.Cuts(y, x) == same {
					return nil, false
				}
			}
		}
	}
	return groups, true
}
