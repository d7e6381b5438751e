package linear

// keyedState is the search's view of a Keyed spec: each operation's key,
// the linearized operations of each key as a bitset of their own, and the
// nogoods learned so far.
//
// A configuration is linearizable exactly when, for every key, the
// operations of that key left over are linearizable from the key's part of
// the state (linearizability is local, and stays local for the rest of a
// history after a valid prefix). So when the search proves that a key's
// leftover cannot be linearized, from the operations of that key already
// linearized and the key's part of the state, that pair is a nogood: every
// configuration that agrees with it on that key fails, whatever the other
// keys are doing. The search records nogoods, refuses configurations that
// hit one, and when a branch fails because of another key than the one it
// branched on, it fails the whole configuration at once (backjumping)
// instead of trying siblings that cannot help.
type keyedState struct {
	spec Keyed
	ids  []int   // dense key → the spec's key
	of   []int32 // local op → dense key
	loc  []int32 // local op → position among its key's operations
	off  []int   // dense key → offset of its bitset in bits
	n    []int   // dense key → number of words in its bitset
	bits []uint64
	hash []uint64 // dense key → xor of zobrist over its linearized ops

	nogoods map[uint64][]int32 // hash → indexes into ng
	ng      []nogood
	// blames[e] is the key blamed for the failure of visited entry e, or
	// -1 while it is on the search stack.
	blames []int32
	budget *budget
}

type nogood struct {
	key  int32
	part uint64
	bits []uint64
}

// newKeyed builds the keyed view of a search's operations; orig maps local
// operations to the partition's.
func newKeyed(spec Keyed, orig []int32, b *budget) *keyedState {
	k := &keyedState{spec: spec, budget: b, nogoods: map[uint64][]int32{}}
	dense := map[int]int32{}
	var counts []int32
	for _, oi := range orig {
		key := spec.Key(int(oi))
		d, ok := dense[key]
		if !ok {
			d = int32(len(k.ids))
			dense[key] = d
			k.ids = append(k.ids, key)
			counts = append(counts, 0)
		}
		k.of = append(k.of, d)
		k.loc = append(k.loc, counts[d])
		counts[d]++
	}
	total := 0
	for _, c := range counts {
		k.off = append(k.off, total)
		w := (int(c) + 63) / 64
		k.n = append(k.n, w)
		total += w
	}
	k.bits = make([]uint64, total)
	k.hash = make([]uint64, len(k.ids))
	return k
}

// flip adds or removes local operation i from its key's set.
func (k *keyedState) flip(i int32) {
	d := k.of[i]
	l := k.loc[i]
	k.bits[k.off[d]+int(l>>6)] ^= 1 << (l & 63)
	k.hash[d] ^= zobrist(i)
}

func (k *keyedState) keyBits(d int32) []uint64 {
	return k.bits[k.off[d] : k.off[d]+k.n[d]]
}

func (k *keyedState) ngHash(d int32, part uint64) uint64 {
	return mix(k.hash[d] ^ mix(part^uint64(d)<<40))
}

// dead reports whether key d's current set with the key's part of state s
// is a nogood.
func (k *keyedState) dead(d int32, s State) bool {
	part := k.spec.Part(s, k.ids[d])
	bits := k.keyBits(d)
	for _, i := range k.nogoods[k.ngHash(d, part)] {
		g := &k.ng[i]
		if g.key == d && g.part == part && equalWords(g.bits, bits) {
			return true
		}
	}
	return false
}

// record learns that key d cannot be completed from its current set and the
// key's part of state s. It returns false when the memory bound stops it.
func (k *keyedState) record(d int32, s State) bool {
	part := k.spec.Part(s, k.ids[d])
	bits := k.keyBits(d)
	if !k.budget.grow(int64(len(bits))*8 + 48) {
		return false
	}
	h := k.ngHash(d, part)
	k.nogoods[h] = append(k.nogoods[h], int32(len(k.ng)))
	k.ng = append(k.ng, nogood{key: d, part: part, bits: append([]uint64(nil), bits...)})
	return true
}

func equalWords(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
