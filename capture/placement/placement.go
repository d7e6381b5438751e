// Package placement decides which member should hold an address: the first
// of its pool's members by (priority, node name) that is neither drained nor
// stale — unless the address's current holder is still eligible and nobody
// ahead of it may preempt it (see Desired). Every node computes it from the
// same inputs, so every node agrees once it has seen the same events.
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

// before orders members by priority, then by name.
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

// Preempt says whether member may take key from its current holder by
// priority alone. Without it (nil), the first eligible member always wins.
type Preempt func(key capture.Key, member string) bool

// Desired maps every capture key of the pools, as seen by node, to its
// desired holder. current is each key's epoch record: when its holder is
// still eligible, it keeps the address unless an eligible member ahead of
// it may preempt it. That is what keeps a node that failed, was replaced
// and came back from taking its addresses back by itself (the daemon lets
// a member preempt only after an operator's undrain that is newer than the
// move), while a nil preempt gives plain priority placement.
func Desired(pools []capture.Pool, node string, current map[capture.Key]capture.EpochRecord, preempt Preempt) map[capture.Key]string {
	out := map[capture.Key]string{}
	for i := range pools {
		p := &pools[i]
		best := Active(p)
		domain := p.Domain(node)
		for _, a := range p.Addresses {
			k := capture.Key{Pool: p.Name, Address: a, Domain: domain}
			out[k] = best
			if preempt == nil {
				continue
			}
			cur := current[k].Holder
			m, ok := p.Member(cur)
			if !ok || cur == best || m.Drained || m.Stale {
				continue
			}
			keep := true
			for _, o := range p.Members {
				if !o.Drained && !o.Stale && before(o, m) && preempt(k, o.Node) {
					keep = false
					break
				}
			}
			if keep {
				out[k] = cur
			}
		}
	}
	return out
}
