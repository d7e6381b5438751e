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
	// id is a put's state id, interned when the op is added.
	id linear.State
}

// kvSpec is one key; its state is an interned string.
type kvSpec struct {
	key  history.Value
	ops  []kvOp
	strs []string
	ids  map[string]linear.State
	// memo caches append results by state and op: appending makes new
	// strings, and the search applies the same append to the same state
	// many times.
	memo map[uint64]linear.State
	// bytes estimates the memory of strs, ids and memo (linear.Growing).
	bytes int64
}

// memoCost is the memory of one memo entry: a uint64 key and a State in
// a map slot, twice for the table's doubling.
const memoCost = 2 * 2 * 8

// Bytes is the memory of the interned strings and the memo
// (linear.Growing).
func (s *kvSpec) Bytes() int64 { return s.bytes }

// add appends an operation to the key's list.
func (s *kvSpec) add(o kvOp) {
	if o.kind == kvPut {
		o.id = s.intern(o.val)
	}
	s.ops = append(s.ops, o)
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
	// The string is held once (the map's key and the list share it).
	s.bytes += linear.InternCost(len(v)) - int64(len(v)+len(v)/8+16)
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
		return o.id, true
	default:
		k := st<<32 | uint64(i)
		if n, ok := s.memo[k]; ok {
			return n, true
		}
		n := s.intern(s.strs[st] + o.val)
		if s.memo == nil {
			s.memo = map[uint64]linear.State{}
		}
		s.memo[k] = n
		s.bytes += memoCost
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
	// One spec per key, in order of first appearance; with Unpartitioned
	// they become the parts of one whole-map spec.
	var specs []*kvSpec
	var parts []linear.Partition
	strKeys := map[string]int{}
	otherKeys := map[string]int{}
	whole := &kvWholeSpec{vecs: newVectors()}
	var wholeOps []linear.Op
	for id := range ops {
		o := &ops[id]
		if o.Type == history.Fail {
			continue
		}
		key, arg, ok := pair(o.Input)
		if !ok {
			return nil, opErr(o, "kv value must be [key value], found %s", history.Show(o.Input))
		}
		ko, err := kvOpOf(o, m.Name(), arg, opt)
		if err != nil {
			return nil, err
		}
		index, ks := otherKeys, ""
		if k, isStr := key.(string); isStr {
			index, ks = strKeys, k
		} else {
			ks = history.Key(key)
		}
		ki, seen := index[ks]
		if !seen {
			ki = len(specs)
			index[ks] = ki
			specs = append(specs, newKVSpec(key))
			if !opt.Unpartitioned {
				parts = append(parts, linear.Partition{Label: "key " + history.Show(key), Spec: specs[ki]})
			}
		}
		if opt.Unpartitioned {
			whole.ops = append(whole.ops, kvWholeOp{key: ki, op: len(specs[ki].ops)})
			wholeOps = append(wholeOps, interval(o, id))
		} else {
			parts[ki].Ops = append(parts[ki].Ops, interval(o, id))
		}
		specs[ki].add(ko)
	}
	if opt.Unpartitioned {
		whole.keys = specs
		return []linear.Partition{{Ops: wholeOps, Spec: whole}}, nil
	}
	return parts, nil
}

// kvOpOf reads one operation's function, argument and result.
func kvOpOf(o *history.Op, model string, arg history.Value, opt Options) (kvOp, error) {
	switch o.F {
	case "get":
		var res history.Value
		if o.Type == history.OK {
			var ok bool
			if _, res, ok = pair(o.Output); !ok {
				return kvOp{}, opErr(o, "get result must be [key value], found %s", history.Show(o.Output))
			}
		}
		switch r := res.(type) {
		case nil:
			if o.Type == history.OK && !opt.NilReadsAny {
				return kvOp{}, opErr(o, "get returned nil; the kv model reads a missing key as \"\"")
			}
			return kvOp{kind: kvGetAny}, nil
		case string:
			return kvOp{kind: kvGet, val: r}, nil
		}
		return kvOp{}, opErr(o, "get result must be a string, found %s", history.Show(res))
	case "put", "append":
		s, isStr := arg.(string)
		if !isStr {
			return kvOp{}, opErr(o, "%s value must be a string, found %s", o.F, history.Show(arg))
		}
		if o.F == "append" {
			return kvOp{kind: kvAppend, val: s}, nil
		}
		return kvOp{kind: kvPut, val: s}, nil
	}
	return kvOp{}, unknownF(o, model, "get", "put", "append")
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
	// keyBytes is the sum of the keys' memory, once summed.
	keyBytes int64
	summed   bool
}

type kvWholeOp struct{ key, op int }

func (s *kvWholeSpec) Init() linear.State { return s.vecs.id(make([]uint32, len(s.keys))) }

// Bytes is the memory of the interned maps and of every key's strings
// (linear.Growing).
func (s *kvWholeSpec) Bytes() int64 {
	if !s.summed {
		// Once: Step keeps the sum from then on.
		s.summed = true
		for _, k := range s.keys {
			s.keyBytes += k.bytes
		}
	}
	return s.vecs.bytes + s.keyBytes
}

func (s *kvWholeSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := s.ops[i]
	cur := s.vecs.get(st)
	k := s.keys[o.key]
	before := k.bytes
	next, ok := k.Step(linear.State(cur[o.key]), o.op)
	if s.summed {
		s.keyBytes += k.bytes - before
	}
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
