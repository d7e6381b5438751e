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
type visited struct {
	words  int // bitset words per entry
	stride int // words per entry: state, then the bitset
	// hashes and index form the table; hash 0 marks an empty slot.
	hashes []uint64
	index  []uint32
	mask   uint64
	chunks [][]uint64
	per    int // entries per chunk
	n      int
	bytes  int64
	budget *budget
}

// chunkWords is the size of an entry chunk. The first chunk starts small and
// doubles up to this size, so that small searches allocate little.
const (
	chunkWords   = 1 << 20
	initialSlots = 64
)

func newVisited(words int, b *budget) *visited {
	v := &visited{words: words, stride: words + 1, budget: b}
	v.per = max(1, chunkWords/v.stride)
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

// insert adds (state, bits) with hash h and reports whether it was new, and
// its entry number (entries are numbered 0, 1, ... as they are added). It
// returns ok=false when the memory bound stops it from growing.
func (v *visited) insert(h uint64, state State, bits []uint64) (entry uint32, isNew, ok bool) {
	h |= 1
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		switch v.hashes[i] {
		case 0:
			k := uint32(v.n)
			if !v.add(i, h, state, bits) {
				return 0, false, false
			}
			return k, true, true
		case h:
			if k := v.index[i]; v.equal(k, state, bits) {
				return k, false, true
			}
		}
	}
}

func (v *visited) entry(k uint32) []uint64 {
	c := int(k) / v.per
	off := (int(k) % v.per) * v.stride
	return v.chunks[c][off : off+v.stride]
}

func (v *visited) equal(k uint32, state State, bits []uint64) bool {
	e := v.entry(k)
	if e[0] != state {
		return false
	}
	for i, w := range bits {
		if e[1+i] != w {
			return false
		}
	}
	return true
}

func (v *visited) add(slot uint64, h uint64, state State, bits []uint64) bool {
	k := v.n
	if k%v.per == 0 && k/v.per == len(v.chunks) {
		// A new chunk: the first one small, later ones full size.
		size := v.per * v.stride
		if k == 0 {
			size = min(size, 32*v.stride)
		}
		if !v.budget.grow(int64(size) * 8) {
			return false
		}
		v.bytes += int64(size) * 8
		v.chunks = append(v.chunks, make([]uint64, size))
	} else if c := v.chunks[len(v.chunks)-1]; (k%v.per+1)*v.stride > len(c) {
		// The first chunk doubles until it is full size.
		size := min(2*len(c), v.per*v.stride)
		grown := int64(size-len(c)) * 8
		if !v.budget.grow(grown) {
			return false
		}
		v.bytes += grown
		v.chunks[len(v.chunks)-1] = append(c, make([]uint64, size-len(c))...)
	}
	e := v.entry(uint32(k))
	e[0] = state
	copy(e[1:], bits)
	v.n++
	v.hashes[slot] = h
	v.index[slot] = uint32(k)
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
