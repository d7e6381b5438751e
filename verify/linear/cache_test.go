package linear

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The visited set tells configurations apart by their state and the
// window of their bitset, not by their hash: with every hash alike, each
// bitset (all ones below the window, all zeros above, windows empty, full,
// one word, in every place) is new exactly once, as a map of the whole
// bitsets says, and entries keep their numbers across chunks.
func TestVisitedWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, words := range []int{1, 2, 3, 5, 40} {
		v := newVisited(&budget{})
		oracle := map[string]uint32{}
		for range 3000 {
			bits := make([]uint64, words)
			lo, hi := r.IntN(words+1), r.IntN(words+1)
			for i := range bits {
				switch {
				case i < lo:
					bits[i] = ^uint64(0)
				case i < hi:
					bits[i] = []uint64{0, 1, 1 << 63, ^uint64(0), r.Uint64()}[r.IntN(5)]
				}
			}
			state := State(r.IntN(3))
			key := fmt.Sprint(state, bits)
			entry, isNew, ok := v.insert(42, state, bits)
			if !ok {
				t.Fatal("out of room without a bound")
			}
			want, seen := oracle[key]
			switch {
			case seen && (isNew || entry != want):
				t.Fatalf("%d words: %v seen as entry %d, now new %v entry %d", words, key, want, isNew, entry)
			case !seen && !isNew:
				t.Fatalf("%d words: %v never seen, found as entry %d", words, key, entry)
			case !seen:
				oracle[key] = entry
			}
		}
		if v.n != len(oracle) || len(oracle) < 100 {
			t.Fatalf("%d words: %d entries, %d distinct configurations", words, v.n, len(oracle))
		}
		// Every entry holds what was put in it.
		for key, k := range oracle {
			e := v.entry(k)
			lo, n := int(e[1]>>32), int(uint32(e[1]))
			bits := make([]uint64, words)
			for i := range bits {
				switch {
				case i < lo:
					bits[i] = ^uint64(0)
				case i < lo+n:
					bits[i] = e[2+i-lo]
				}
			}
			if got := fmt.Sprint(e[0], bits); got != key {
				t.Fatalf("%d words: entry %d holds %s, want %s", words, k, got, key)
			}
		}
	}
}

// The entries' memory is charged to the budget, and a bound stops the
// set from growing.
func TestVisitedBudget(t *testing.T) {
	b := &budget{limit: 64 << 10}
	v := newVisited(b)
	bits := make([]uint64, 8)
	var k uint64
	for ; k < 100_000; k++ {
		bits[k%8] = k // distinct bitsets, window 8 words at most
		if _, _, ok := v.insert(k*0x9e3779b97f4a7c15, 0, bits); !ok {
			break
		}
	}
	if k == 100_000 || !b.over.Load() || b.used.Load() > 64<<10 || b.used.Load() != v.bytes {
		t.Fatalf("after %d inserts: used %d of %d, set holds %d bytes", k, b.used.Load(), b.limit, v.bytes)
	}
	v.free()
	if b.used.Load() != 0 {
		t.Fatalf("freed, the budget still holds %d", b.used.Load())
	}
}

// The search keeps its bitset's window as it pushes and pops, rather than
// finding it anew for each configuration: with checkWindows set, every
// push and pop compares it with window's, over searches of hundreds of
// operations (bitsets of several words) that backtrack, succeed, fail and
// run out of memory.
func TestSearchKeepsWindow(t *testing.T) {
	checkWindows = true
	defer func() { checkWindows = false }()
	r := rand.New(rand.NewPCG(3, 5))
	verdicts := map[Verdict]int{}
	for range 200 {
		n := 64 + r.IntN(300)
		ops := randomHistory(r, n)
		spec := randomSpec(r, n, 2+r.IntN(2))
		// Half the operations always possible, so that searches get deep.
		for i := range spec.table {
			if r.IntN(2) == 0 {
				for st := range spec.table[i] {
					if spec.table[i][st] < 0 {
						spec.table[i][st] = st
					}
				}
			}
		}
		res, err := Check(context.Background(), []Partition{{Ops: ops, Spec: spec}}, Options{MaxMemory: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		verdicts[res.Valid]++
	}
	if verdicts[True] == 0 || verdicts[False] == 0 {
		t.Fatalf("the searches did not both succeed and fail: %v", verdicts)
	}
	t.Logf("verdicts %v", verdicts)
}
