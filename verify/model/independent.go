package model

import (
	"runtime"
	"sync"
	"sync/atomic"

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
	byKey := map[string]int32{}
	// Two passes: each op's group, then every group's ops copied once
	// into one array, at their final places (appending ten million ops
	// group by group copied each of them about twice more).
	gid := make([]int32, len(ops))
	var sizes []int
	for id := range ops {
		o := &ops[id]
		key, _, ok := pair(o.Input)
		if !ok {
			return nil, opErr(o, "%s value must be [key value], found %s", m.Name(), history.Show(o.Input))
		}
		if o.Output != nil {
			k, _, ok := pair(o.Output)
			if !ok || !sameKey(k, key) {
				return nil, opErr(o, "%s result must be [key value] for key %s, found %s", m.Name(), history.Show(key), history.Show(o.Output))
			}
		}
		ks := history.Key(key)
		g, ok := byKey[ks]
		if !ok {
			g = int32(len(groups))
			byKey[ks] = g
			groups = append(groups, &group{key: key})
			sizes = append(sizes, 0)
		}
		gid[id] = g
		sizes[g]++
	}
	all := make([]history.Op, 0, len(ops))
	orig := make([]int, 0, len(ops))
	for g, n := range sizes {
		groups[g].ops, all = all[len(all):len(all):len(all)+n], all[:len(all)+n]
		groups[g].orig, orig = orig[len(orig):len(orig):len(orig)+n], orig[:len(orig)+n]
	}
	for id := range ops {
		g := groups[gid[id]]
		o := ops[id]
		_, o.Input, _ = pair(o.Input)
		if o.Output != nil {
			_, o.Output, _ = pair(o.Output)
		}
		g.ops = append(g.ops, o)
		g.orig = append(g.orig, id)
	}
	inner := opt
	inner.Unpartitioned = false
	// The keys compile apart, on every processor: they share nothing.
	type compiled struct {
		parts []linear.Partition
		err   error
	}
	out := make([]compiled, len(groups))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(groups)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(groups); k = int(next.Add(1) - 1) {
				g := groups[k]
				ps, err := m.inner.Compile(g.ops, inner)
				for _, p := range ps {
					for i := range p.Ops {
						p.Ops[i].ID = g.orig[p.Ops[i].ID]
					}
				}
				out[k] = compiled{ps, err}
			}
		})
	}
	wg.Wait()
	var parts []linear.Partition
	for k, g := range groups {
		if out[k].err != nil {
			// The first key's error, as one key after another would.
			return nil, out[k].err
		}
		for _, p := range out[k].parts {
			label := "key " + history.Show(g.key)
			if p.Label != "" {
				label += ", " + p.Label
			}
			p.Label = label
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// sameKey says whether two keys are one, as history.Key tells, without
// rendering the usual integers.
func sameKey(a, b history.Value) bool {
	x, ok1 := a.(int64)
	y, ok2 := b.(int64)
	if ok1 && ok2 {
		return x == y
	}
	return history.Key(a) == history.Key(b)
}
