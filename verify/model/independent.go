package model

import (
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// independentModel checks another model once per key: every operation's
// value is a [key value] tuple (Jepsen's independent convention), the
// operations of one key form one history of the inner model, and keys never
// interact. Tests of real databases use it to keep each key's history
// short while the run is long: the search is exponential in concurrency,
// not in the number of keys.
type independentModel struct{ inner Model }

func (m independentModel) Name() string { return "independent-" + m.inner.Name() }

func (m independentModel) Doc() string {
	return m.inner.Name() + " per key: every value a [key value] tuple; partitioned by key"
}

// Compile splits the operations by key, unwraps their values and compiles
// each key's operations with the inner model. Operations keep their
// indexes, so reports point into the whole history. Options apply to every
// key; Unpartitioned has no meaning here, since the inner models know
// nothing of keys, and is ignored.
func (m independentModel) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	type group struct {
		key  history.Value
		ops  []history.Op
		orig []int // index in ops of each of the group's operations
	}
	var groups []*group
	byKey := map[string]*group{}
	for id := range ops {
		o := ops[id]
		key, in, ok := pair(o.Input)
		if !ok {
			return nil, opErr(&o, "%s value must be [key value], found %s", m.Name(), history.Show(o.Input))
		}
		if o.Output != nil {
			k, out, ok := pair(o.Output)
			if !ok || history.Key(k) != history.Key(key) {
				return nil, opErr(&o, "%s result must be [key value] for key %s, found %s", m.Name(), history.Show(key), history.Show(o.Output))
			}
			o.Output = out
		}
		o.Input = in
		ks := history.Key(key)
		g := byKey[ks]
		if g == nil {
			g = &group{key: key}
			byKey[ks] = g
			groups = append(groups, g)
		}
		g.ops = append(g.ops, o)
		g.orig = append(g.orig, id)
	}
	inner := opt
	inner.Unpartitioned = false
	var parts []linear.Partition
	for _, g := range groups {
		ps, err := m.inner.Compile(g.ops, inner)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			label := "key " + history.Show(g.key)
			if p.Label != "" {
				label += ", " + p.Label
			}
			p.Label = label
			remapped := make([]linear.Op, len(p.Ops))
			for i, lo := range p.Ops {
				lo.ID = g.orig[lo.ID]
				remapped[i] = lo
			}
			p.Ops = remapped
			parts = append(parts, p)
		}
	}
	return parts, nil
}
