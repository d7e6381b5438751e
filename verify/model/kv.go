package model

import (
	"fmt"

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
	var parts []linear.Partition
	index := map[string]int{}
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
		k := history.Key(key)
		pi, seen := index[k]
		if !seen {
			pi = len(parts)
			index[k] = pi
			parts = append(parts, linear.Partition{Label: "key " + history.Show(key), Spec: newKVSpec(key)})
		}
		spec := parts[pi].Spec.(*kvSpec)
		spec.ops = append(spec.ops, ko)
		parts[pi].Ops = append(parts[pi].Ops, interval(o, id))
	}
	return parts, nil
}
