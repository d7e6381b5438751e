package netfault

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Mesh puts a Proxy on every ordered pair of nodes, so that every
// node-to-node link can be cut on its own. A Mesh is safe for concurrent
// use.
type Mesh struct {
	nodes   []string
	proxies map[[2]string]*Proxy
}

// NewMesh builds the proxies for targets, which maps each node to the real
// host:port it listens on for its peers.
func NewMesh(targets map[string]string) (*Mesh, error) {
	m := &Mesh{
		nodes:   slices.Sorted(maps.Keys(targets)),
		proxies: map[[2]string]*Proxy{},
	}
	for _, from := range m.nodes {
		for _, to := range m.nodes {
			if from == to {
				continue
			}
			p, err := NewProxy(targets[to])
			if err != nil {
				_ = m.Close()
				return nil, fmt.Errorf("netfault: mesh link %s -> %s: %w", from, to, err)
			}
			m.proxies[[2]string{from, to}] = p
		}
	}
	return m, nil
}

// Nodes returns the mesh's nodes, sorted.
func (m *Mesh) Nodes() []string { return slices.Clone(m.nodes) }

// Link returns the proxy that carries from's connections to to. It panics
// when either node is not in the mesh: the caller built its node list from
// something else, a bug no run should go on with.
func (m *Mesh) Link(from, to string) *Proxy {
	p, ok := m.proxies[[2]string{from, to}]
	if !ok {
		panic(fmt.Sprintf("netfault: mesh has no link %s -> %s (nodes %v)", from, to, m.nodes))
	}
	return p
}

// Addr returns the address that from must dial to reach to. It panics
// like Link.
func (m *Mesh) Addr(from, to string) string { return m.Link(from, to).Addr() }

// Apply cuts exactly the grudge's links with mode and heals all others. It
// panics, before touching any link, when the grudge names a node the mesh
// does not have: a partition that silently cut less than it says would
// make the history lie.
func (m *Mesh) Apply(g Grudge, mode Mode) {
	for _, n := range g.Nodes() {
		if !slices.Contains(m.nodes, n) {
			panic(fmt.Sprintf("netfault: grudge %s names node %q, not in the mesh %v", g, n, m.nodes))
		}
	}
	// Heal first, so that for a moment the mesh is less cut, never more
	// cut, than both the old grudge and the new one.
	for pair, p := range m.proxies {
		if !g.Cuts(pair[0], pair[1]) {
			p.Heal()
		}
	}
	for pair, p := range m.proxies {
		if g.Cuts(pair[0], pair[1]) {
			p.Cut(mode)
		}
	}
}

// Heal heals every link.
func (m *Mesh) Heal() {
	for _, p := range m.proxies {
		p.Heal()
	}
}

// SetDelay sets the added latency of every link (see Proxy.SetDelay).
func (m *Mesh) SetDelay(d time.Duration) {
	for _, p := range m.proxies {
		p.SetDelay(d)
	}
}

// Close closes every proxy.
func (m *Mesh) Close() error {
	var errs []error
	for _, p := range m.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
