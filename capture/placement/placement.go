// Package placement decides which member should hold a pool's addresses:
// the first of its members by (priority, node name) that is neither drained
// nor stale. Every node computes it from the same inputs, so every node
// agrees once it has seen the same events.
package placement

import (
	"cmp"
	"slices"

	"github.com/ipfence/ipfence/capture"
)

// Active returns the node that should hold pool p's addresses, or "" when
// no member may.
func Active(p *capture.Pool) string {
	best := -1
	for i, m := range p.Members {
		if m.Drained || m.Stale {
			continue
		}
		if best < 0 || before(m, p.Members[best]) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return p.Members[best].Node
}

func before(a, b capture.Member) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.Node < b.Node
}

// Ordered returns the members in placement order: the order in which they
// take over when the ones before them drain or die.
func Ordered(p *capture.Pool) []capture.Member {
	out := slices.Clone(p.Members)
	slices.SortFunc(out, func(a, b capture.Member) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return out
}

// Desired maps every capture key of the pools, as seen by node, to its
// desired holder.
func Desired(pools []capture.Pool, node string) map[capture.Key]string {
	out := map[capture.Key]string{}
	for i := range pools {
		p := &pools[i]
		holder := Active(p)
		domain := p.Domain(node)
		for _, a := range p.Addresses {
			out[capture.Key{Pool: p.Name, Address: a, Domain: domain}] = holder
		}
	}
	return out
}
