package isolation

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeepReadShares checks that reads showing a prefix of a key's list
// (or extending it) keep no elements of their own, and that a read which
// contradicts the list keeps its own, with every read's elements intact.
func TestKeepReadShares(t *testing.T) {
	data := []byte(`{"index":0,"type":"invoke","process":0,"f":"txn","value":[["r",1,null]]}
{"index":1,"type":"ok","process":0,"f":"txn","value":[["r",1,[1,2]]]}
{"index":2,"type":"invoke","process":0,"f":"txn","value":[["r",1,null],["r",1,null]]}
{"index":3,"type":"ok","process":0,"f":"txn","value":[["r",1,[1]],["r",1,[1,2,3]]]}
{"index":4,"type":"invoke","process":0,"f":"txn","value":[["r",1,null]]}
{"index":5,"type":"ok","process":0,"f":"txn","value":[["r",1,[2,1]]]}
`)
	b := newBuilder(ListAppend)
	for line := range bytes.SplitSeq(bytes.TrimSpace(data), []byte("\n")) {
		if !b.fastLine(line) {
			t.Fatalf("the fast reader refused %s", line)
		}
	}
	p := b.finish()
	var got [][]int64
	for i := range p.txns {
		for j := range p.txns[i].mops {
			got = append(got, slices.Clone(p.list(&p.txns[i].mops[j])))
		}
	}
	want := [][]int64{{1, 2}, {1}, {1, 2, 3}, {2, 1}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("reads %v, want %v", got, want)
	}
	if !slices.Equal(p.reads, []int64{2, 1}) {
		t.Fatalf("kept elements %v, want only the contradicting read's [2 1]", p.reads)
	}
	if !slices.Equal(p.keyLists[p.in.key(int64(1))], []int64{1, 2, 3}) {
		t.Fatalf("key 1's list %v, want [1 2 3]", p.keyLists[p.in.key(int64(1))])
	}
}

// TestKVMap holds kvMap to Go's map over random puts, replacements and
// look-ups.
func TestKVMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m kvMap
	ref := map[kv]int32{}
	for i := range 50_000 {
		x := kv{int32(r.IntN(300)), r.Int64N(400) - 200}
		m.put(x, int32(i))
		ref[x] = int32(i)
	}
	for range 50_000 {
		x := kv{int32(r.IntN(400)), r.Int64N(600) - 300}
		v, ok := m.get(x)
		rv, rok := ref[x]
		if ok != rok || v != rv {
			t.Fatalf("get(%v) = %d, %v; want %d, %v", x, v, ok, rv, rok)
		}
	}
	n := 0
	m.each(func(x kv, v int32) {
		n++
		if ref[x] != v {
			t.Fatalf("each gave %v → %d, want %d", x, v, ref[x])
		}
	})
	if n != len(ref) {
		t.Fatalf("each gave %d pairs, want %d", n, len(ref))
	}
}
