package linear

import "sync/atomic"

// budget is a memory bound shared by the searches of one check.
type budget struct {
	limit int64 // bytes; <= 0 means none
	used  atomic.Int64
	over  atomic.Bool
}

// grow accounts n more bytes and reports whether the bound still holds.
func (b *budget) grow(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		b.over.Store(true)
		return false
	}
	return true
}

func (b *budget) release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// visited is the set of configurations (linearized bitset, state) seen by
// one search: an open-addressing table of 64-bit hashes whose entries live in
// fixed-size chunks, so that growing it never copies the entries and its
// memory is accounted exactly.
//
// An entry holds the state and the bitset's window only: the words from
// the first not all linearized to the last with an op linearized. The
// words before it are all ones and those after all zeros, so the window
// says which bitset it is. Ops linearize roughly in history order, so the
// window is about as wide as the history is concurrent, while the bitset
// grows with the partition: with 10,000 ops in a partition, whole bitsets
// made every configuration 1.3 KB and the search quadratic.
type visited struct {
	// hashes and index form the table; hash 0 marks an empty slot.
	hashes []uint64
	index  []uint32
	mask   uint64
	// chunks hold the entries, each [state, lo<<32|len, the window's
	// words]; offs[k] is entry k's chunk<<32|offset.
	chunks [][]uint64
	offs   []uint64
	used   int // words used in the last chunk
	n      int
	bytes  int64
	budget *budget
}

// chunkWords is the size of an entry chunk. The first chunk starts small and
// doubles up to this size, so that small searches allocate little.
const (
	chunkWords   = 1 << 20
	initialSlots = 64
	firstChunk   = 256
)

func newVisited(b *budget) *visited {
	v := &visited{budget: b}
	v.hashes = make([]uint64, initialSlots)
	v.index = make([]uint32, initialSlots)
	v.mask = initialSlots - 1
	v.bytes = initialSlots * 12
	b.grow(v.bytes)
	return v
}

func (v *visited) free() {
	v.budget.release(v.bytes)
	v.bytes = 0
}

// window returns the bounds [lo, hi) of bits's words that an entry keeps.
func window(bits []uint64) (lo, hi int) {
	for lo < len(bits) && bits[lo] == ^uint64(0) {
		lo++
	}
	hi = len(bits)
	for hi > lo && bits[hi-1] == 0 {
		hi--
	}
	return lo, hi
}

// insert adds (state, bits) with hash h and reports whether it was new, and
// its entry number (entries are numbered 0, 1, ... as they are added). It
// returns ok=false when the memory bound stops it from growing.
func (v *visited) insert(h uint64, state State, bits []uint64) (entry uint32, isNew, ok bool) {
	lo, hi := window(bits)
	return v.insertWindow(h, state, bits, lo, hi)
}

// insertWindow is insert given bits's window, as window computes it: the
// search keeps it as it goes, since finding it anew costs a pass over the
// bitset (a history of 100,000 operations has 1,563 words of it), and that
// pass took more than half of a long search's time.
func (v *visited) insertWindow(h uint64, state State, bits []uint64, lo, hi int) (entry uint32, isNew, ok bool) {
	h |= 1
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		switch v.hashes[i] {
		case 0:
			k := uint32(v.n)
			if !v.add(i, h, state, lo, bits[lo:hi]) {
				return 0, false, false
			}
			return k, true, true
		case h:
			if k := v.index[i]; v.equal(k, state, lo, bits[lo:hi]) {
				return k, false, true
			}
		}
	}
}

func (v *visited) entry(k uint32) []uint64 {
	o := v.offs[k]
	c := v.chunks[o>>32]
	off := int(uint32(o))
	return c[off : off+2+int(uint32(c[off+1]))]
}

func (v *visited) equal(k uint32, state State, lo int, win []uint64) bool {
	e := v.entry(k)
	if e[0] != state || e[1] != uint64(lo)<<32|uint64(len(win)) {
		return false
	}
	for i, w := range win {
		if e[2+i] != w {
			return false
		}
	}
	return true
}

func (v *visited) add(slot uint64, h uint64, state State, lo int, win []uint64) bool {
	need := 2 + len(win)
	if len(v.chunks) == 0 || v.used+need > len(v.chunks[len(v.chunks)-1]) {
		last := len(v.chunks) - 1
		switch {
		case last >= 0 && len(v.chunks[last]) < chunkWords && v.used+need <= chunkWords:
			// The first chunk doubles until it is full size.
			c := v.chunks[last]
			size := min(max(2*len(c), v.used+need), chunkWords)
			grown := int64(size-len(c)) * 8
			if !v.budget.grow(grown) {
				return false
			}
			v.bytes += grown
			v.chunks[last] = append(c, make([]uint64, size-len(c))...)
		default:
			// A new chunk: the first one small, later ones full size (or
			// as large as one entry that is larger).
			size := max(chunkWords, need)
			if last < 0 {
				size = max(firstChunk, need)
			}
			if !v.budget.grow(int64(size) * 8) {
				return false
			}
			v.bytes += int64(size) * 8
			v.chunks = append(v.chunks, make([]uint64, size))
			v.used = 0
		}
	}
	if len(v.offs) == cap(v.offs) {
		c := int64(cap(v.offs))
		offs := append(v.offs, 0)[:len(v.offs)]
		if !v.budget.grow((int64(cap(offs)) - c) * 8) {
			return false
		}
		v.bytes += (int64(cap(offs)) - c) * 8
		v.offs = offs
	}
	c := len(v.chunks) - 1
	e := v.chunks[c][v.used : v.used+need]
	e[0] = state
	e[1] = uint64(lo)<<32 | uint64(len(win))
	copy(e[2:], win)
	v.offs = append(v.offs, uint64(c)<<32|uint64(v.used))
	v.used += need
	v.n++
	v.hashes[slot] = h
	v.index[slot] = uint32(v.n - 1)
	if uint64(v.n)*2 > v.mask {
		return v.rehash()
	}
	return true
}

// rehash doubles the table.
func (v *visited) rehash() bool {
	size := len(v.hashes) * 2
	extra := int64(size-len(v.hashes)) * 12
	if !v.budget.grow(extra) {
		return false
	}
	v.bytes += extra
	hashes := make([]uint64, size)
	index := make([]uint32, size)
	mask := uint64(size - 1)
	for i, h := range v.hashes {
		if h == 0 {
			continue
		}
		j := h & mask
		for hashes[j] != 0 {
			j = (j + 1) & mask
		}
		hashes[j] = h
		index[j] = v.index[i]
	}
	v.hashes, v.index, v.mask = hashes, index, mask
	return true
}

// mix scrambles a state so that it can be xored into a bitset's hash.
func mix(x uint64) uint64 {
	x ^= 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
