package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// multiRegisterModel is a set of registers read and written together by
// transactions: f txn, value [[read k v] [write k v] ...]. Transactions that
// share no key are independent, so the history is partitioned by the
// connected components of the keys the transactions touch.
type multiRegisterModel struct{}

func (multiRegisterModel) Name() string { return "multi-register" }
func (multiRegisterModel) Doc() string {
	return "registers by key: txn [[read k v] [write k v] ...], partitioned by the keys transactions share"
}

type micro struct {
	write bool
	any   bool // a read of nil under Knossos semantics
	key   int  // index into the partition's keys
	val   uint32
}

type multiSpec struct {
	keys []history.Value
	ops  [][]micro
	init uint32
	vals *values
	vecs *vectors
	buf  []uint32
}

func (s *multiSpec) Init() linear.State {
	v := make([]uint32, len(s.keys))
	for i := range v {
		v[i] = s.init
	}
	return s.vecs.id(v)
}

// Bytes is the memory of the interned states (linear.Growing).
func (s *multiSpec) Bytes() int64 { return s.vecs.bytes }

func (s *multiSpec) Step(st linear.State, i int) (linear.State, bool) {
	cur := s.vecs.get(st)
	var next []uint32
	for _, m := range s.ops[i] {
		v := cur
		if next != nil {
			v = next
		}
		if !m.write {
			if !m.any && v[m.key] != m.val {
				return st, false
			}
			continue
		}
		if next == nil {
			next = append(s.buf[:0], cur...)
		}
		next[m.key] = m.val
	}
	if next == nil {
		return st, true
	}
	s.buf = next
	return s.vecs.id(next), true
}

func (s *multiSpec) Neutral(i int) bool {
	for _, m := range s.ops[i] {
		if m.write {
			return false
		}
	}
	return true
}

func (s *multiSpec) DescribeState(st linear.State) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range s.vecs.get(st) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", history.Show(s.keys[i]), s.vals.show(id))
	}
	b.WriteByte('}')
	return b.String()
}

func (s *multiSpec) DescribeOp(i int) string {
	var parts []string
	for _, m := range s.ops[i] {
		switch {
		case m.write:
			parts = append(parts, fmt.Sprintf("write %s %s", history.Show(s.keys[m.key]), s.vals.show(m.val)))
		case m.any:
			parts = append(parts, fmt.Sprintf("read %s (any)", history.Show(s.keys[m.key])))
		default:
			parts = append(parts, fmt.Sprintf("read %s → %s", history.Show(s.keys[m.key]), s.vals.show(m.val)))
		}
	}
	return "txn " + strings.Join(parts, ", ")
}

// rawMicro is a micro-op before keys are grouped.
type rawMicro struct {
	write bool
	any   bool
	key   string // history.Key of the key
	kval  history.Value
	val   history.Value
}

func (m multiRegisterModel) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	type txn struct {
		id     int
		micros []rawMicro
	}
	var txns []txn
	uf := newUnionFind()
	for id := range ops {
		o := &ops[id]
		if o.F != "txn" {
			return nil, unknownF(o, m.Name(), "txn")
		}
		if o.Type == history.Fail {
			continue
		}
		in, ok := o.Input.([]history.Value)
		if !ok {
			return nil, opErr(o, "txn value must be a list of [f key value], found %s", history.Show(o.Input))
		}
		// Reads take their values from the completion when it has them.
		out, _ := o.Output.([]history.Value)
		if o.Type == history.OK && o.Output != nil && len(out) != len(in) {
			return nil, opErr(o, "completion holds %d micro-ops, invoke %d", len(out), len(in))
		}
		t := txn{id: id}
		for j, mv := range in {
			src := mv
			if o.Type == history.OK && out != nil {
				src = out[j]
			}
			l, ok := src.([]history.Value)
			if !ok || len(l) != 3 {
				return nil, opErr(o, "micro-op %d must be [f key value], found %s", j, history.Show(src))
			}
			f, _ := l[0].(string)
			var rm rawMicro
			switch f {
			case "read", "r":
				rm.any = l[2] == nil && opt.NilReadsAny
				if o.Pending() {
					// The result of a read that may not have happened
					// constrains nothing.
					rm.any = true
				}
			case "write", "w":
				rm.write = true
			default:
				return nil, opErr(o, "micro-op %d has function %s (valid: read, write)", j, history.Show(l[0]))
			}
			rm.kval, rm.key, rm.val = l[1], history.Key(l[1]), l[2]
			uf.add(rm.key)
			t.micros = append(t.micros, rm)
		}
		for _, rm := range t.micros[min(1, len(t.micros)):] {
			uf.union(t.micros[0].key, rm.key)
		}
		if opt.Unpartitioned && len(t.micros) > 0 && len(txns) > 0 && len(txns[0].micros) > 0 {
			uf.union(txns[0].micros[0].key, t.micros[0].key)
		}
		txns = append(txns, t)
	}
	// One partition per component of keys, in order of first appearance.
	type building struct {
		part linear.Partition
		spec *multiSpec
		keys map[string]int
	}
	var parts []*building
	byRoot := map[string]*building{}
	for _, t := range txns {
		if len(t.micros) == 0 {
			continue // touches nothing: always linearizable
		}
		root := uf.find(t.micros[0].key)
		b := byRoot[root]
		if b == nil {
			spec := &multiSpec{vals: newValues(), vecs: newVectors()}
			spec.init = spec.vals.id(opt.Initial)
			b = &building{spec: spec, keys: map[string]int{}}
			b.part.Spec = spec
			byRoot[root] = b
			parts = append(parts, b)
		}
		var ms []micro
		for _, rm := range t.micros {
			k, ok := b.keys[rm.key]
			if !ok {
				k = len(b.spec.keys)
				b.keys[rm.key] = k
				b.spec.keys = append(b.spec.keys, rm.kval)
			}
			ms = append(ms, micro{write: rm.write, any: rm.any, key: k, val: b.spec.vals.id(rm.val)})
		}
		b.spec.ops = append(b.spec.ops, ms)
		b.part.Ops = append(b.part.Ops, interval(&ops[t.id], t.id))
	}
	out := make([]linear.Partition, len(parts))
	for i, b := range parts {
		shown := make([]string, len(b.spec.keys))
		for j, k := range b.spec.keys {
			shown[j] = history.Show(k)
		}
		slices.Sort(shown)
		b.part.Label = "keys " + strings.Join(shown, " ")
		out[i] = b.part
	}
	return out, nil
}

// unionFind groups keys that appear in one transaction.
type unionFind struct{ parent map[string]string }

func newUnionFind() *unionFind { return &unionFind{parent: map[string]string{}} }

func (u *unionFind) add(k string) {
	if _, ok := u.parent[k]; !ok {
		u.parent[k] = k
	}
}

func (u *unionFind) find(k string) string {
	for u.parent[k] != k {
		u.parent[k] = u.parent[u.parent[k]]
		k = u.parent[k]
	}
	return k
}

func (u *unionFind) union(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		u.parent[rb] = ra
	}
}
