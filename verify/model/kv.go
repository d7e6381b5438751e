package model

import (
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// kvModel is a key-value store of strings: get, put and append on
// [key value] tuples (Jepsen's independent convention; a separate key field
// is folded into that shape by the readers). A missing key reads as the
// empty string, as in Porcupine's key-value model. Each key is a partition.
type kvModel struct{}

func (kvModel) Name() string { return "kv" }
func (kvModel) Doc() string {
	return "string values by key: get, put, append on [key value]; a missing key reads \"\"; partitioned by key"
}

type kvKind uint8

const (
	kvGet kvKind = iota
	kvGetAny
	kvPut
	kvAppend
)

type kvOp struct {
	kind kvKind
	val  string
}

// kvSpec is one key; its state is an interned string.
type kvSpec struct {
	key  history.Value
	ops  []kvOp
	strs []string
	ids  map[string]linear.State
	// memo caches append results: appending makes new strings, and the
	// search applies the same append to the same state many times.
	memo map[[2]uint64]linear.State
}

func newKVSpec(key history.Value) *kvSpec {
	return &kvSpec{key: key, strs: []string{""}, ids: map[string]linear.State{"": 0}}
}

func (s *kvSpec) intern(v string) linear.State {
	if id, ok := s.ids[v]; ok {
		return id
	}
	id := linear.State(len(s.strs))
	s.ids[v] = id
	s.strs = append(s.strs, v)
	return id
}

func (s *kvSpec) Init() linear.State { return 0 }

func (s *kvSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := &s.ops[i]
	switch o.kind {
	case kvGet:
		return st, s.strs[st] == o.val
	case kvGetAny:
		return st, true
	case kvPut:
		return s.intern(o.val), true
	default:
		k := [2]uint64{st, uint64(i)}
		if n, ok := s.memo[k]; ok {
			return n, true
		}
		n := s.intern(s.strs[st] + o.val)
		if s.memo == nil {
			s.memo = map[[2]uint64]linear.State{}
		}
		s.memo[k] = n
		return n, true
	}
}

func (s *kvSpec) Neutral(i int) bool { k := s.ops[i].kind; return k == kvGet || k == kvGetAny }

func (s *kvSpec) DescribeState(st linear.State) string { return fmt.Sprintf("%q", s.strs[st]) }

func (s *kvSpec) DescribeOp(i int) string {
	o := &s.ops[i]
	switch o.kind {
	case kvGet:
		return fmt.Sprintf("get → %q", o.val)
	case kvGetAny:
		return "get → nil (any value)"
	case kvPut:
		return fmt.Sprintf("put %q", o.val)
	}
	return fmt.Sprintf("append %q", o.val)
}

func (m kvModel) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	type keyed struct {
		key history.Value
		op  kvOp
		id  int
	}
	var all []keyed
	for id := range ops {
		o := &ops[id]
		if o.Type == history.Fail {
			continue
		}
		key, arg, ok := pair(o.Input)
		if !ok {
			return nil, opErr(o, "kv value must be [key value], found %s", history.Show(o.Input))
		}
		var ko kvOp
		switch o.F {
		case "get":
			ko.kind = kvGet
			var res history.Value
			if o.Type == history.OK {
				_, res, ok = pair(o.Output)
				if !ok {
					return nil, opErr(o, "get result must be [key value], found %s", history.Show(o.Output))
				}
			}
			switch r := res.(type) {
			case nil:
				if o.Type == history.OK && !opt.NilReadsAny {
					return nil, opErr(o, "get returned nil; the kv model reads a missing key as \"\"")
				}
				ko.kind = kvGetAny
			case string:
				ko.val = r
			default:
				return nil, opErr(o, "get result must be a string, found %s", history.Show(res))
			}
		case "put", "append":
			s, isStr := arg.(string)
			if !isStr {
				return nil, opErr(o, "%s value must be a string, found %s", o.F, history.Show(arg))
			}
			ko = kvOp{kind: kvPut, val: s}
			if o.F == "append" {
				ko.kind = kvAppend
			}
		default:
			return nil, unknownF(o, m.Name(), "get", "put", "append")
		}
		all = append(all, keyed{key, ko, id})
	}
	if opt.Unpartitioned {
		spec := &kvWholeSpec{vecs: newVectors()}
		var part []linear.Op
		index := map[string]int{}
		for _, k := range all {
			ks := history.Key(k.key)
			ki, seen := index[ks]
			if !seen {
				ki = len(spec.keys)
				index[ks] = ki
				spec.keys = append(spec.keys, newKVSpec(k.key))
			}
			spec.ops = append(spec.ops, kvWholeOp{key: ki, op: len(spec.keys[ki].ops)})
			spec.keys[ki].ops = append(spec.keys[ki].ops, k.op)
			part = append(part, interval(&ops[k.id], k.id))
		}
		return []linear.Partition{{Ops: part, Spec: spec}}, nil
	}
	var parts []linear.Partition
	index := map[string]int{}
	for _, k := range all {
		ks := history.Key(k.key)
		pi, seen := index[ks]
		if !seen {
			pi = len(parts)
			index[ks] = pi
			parts = append(parts, linear.Partition{Label: "key " + history.Show(k.key), Spec: newKVSpec(k.key)})
		}
		spec := parts[pi].Spec.(*kvSpec)
		spec.ops = append(spec.ops, k.op)
		parts[pi].Ops = append(parts[pi].Ops, interval(&ops[k.id], k.id))
	}
	return parts, nil
}

// kvWholeSpec is the key-value store as one object: its state is the whole
// map, the interned list of every key's string. It tells the checker which
// key each operation touches (linear.Keyed), so that the search can use
// their independence without splitting the history.
type kvWholeSpec struct {
	keys []*kvSpec // per key: its strings and its operations
	ops  []kvWholeOp
	vecs *vectors
	buf  []uint32
}

type kvWholeOp struct{ key, op int }

func (s *kvWholeSpec) Init() linear.State { return s.vecs.id(make([]uint32, len(s.keys))) }

func (s *kvWholeSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := s.ops[i]
	cur := s.vecs.get(st)
	next, ok := s.keys[o.key].Step(linear.State(cur[o.key]), o.op)
	if !ok || next == linear.State(cur[o.key]) {
		return st, ok
	}
	s.buf = append(s.buf[:0], cur...)
	s.buf[o.key] = uint32(next)
	return s.vecs.id(s.buf), true
}

func (s *kvWholeSpec) Neutral(i int) bool { o := s.ops[i]; return s.keys[o.key].Neutral(o.op) }

func (s *kvWholeSpec) Key(i int) int { return s.ops[i].key }

func (s *kvWholeSpec) Part(st linear.State, key int) uint64 { return uint64(s.vecs.get(st)[key]) }

func (s *kvWholeSpec) DescribeState(st linear.State) string {
	var b strings.Builder
	b.WriteByte('{')
	for k, id := range s.vecs.get(st) {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %q", history.Show(s.keys[k].key), s.keys[k].strs[id])
	}
	b.WriteByte('}')
	return b.String()
}

func (s *kvWholeSpec) DescribeOp(i int) string {
	o := s.ops[i]
	return history.Show(s.keys[o.key].key) + ": " + s.keys[o.key].DescribeOp(o.op)
}
