package isolation

// kvMap maps (key, value) pairs to transaction numbers (or positions):
// an open-addressing table with linear probing. A history of a million
// transactions asks who wrote each of its millions of values several
// times over; Go's map hashes a struct key through the generic path,
// which took a third of the check's time.
type kvMap struct {
	keys []kv
	vals []int32 // the value + 1; 0 marks an empty slot
	n    int
	mask uint64
	bits uint8
}

func (m *kvMap) slot(x kv) uint64 {
	h := uint64(uint32(x.k))*0x9E3779B97F4A7C15 ^ uint64(x.v)*0xC2B2AE3D27D4EB4F
	h ^= h >> 31
	return (h * 0x94D049BB133111EB) >> (64 - m.bits)
}

// get returns the number stored for x.
func (m *kvMap) get(x kv) (int32, bool) {
	if m.n == 0 {
		return 0, false
	}
	for i := m.slot(x); ; i = (i + 1) & m.mask {
		v := m.vals[i]
		if v == 0 {
			return 0, false
		}
		if m.keys[i] == x {
			return v - 1, true
		}
	}
}

// has says whether x is stored.
func (m *kvMap) has(x kv) bool {
	_, ok := m.get(x)
	return ok
}

// put stores v for x, replacing what was stored.
func (m *kvMap) put(x kv, v int32) {
	if 2*(m.n+1) > len(m.vals) {
		m.grow()
	}
	for i := m.slot(x); ; i = (i + 1) & m.mask {
		switch {
		case m.vals[i] == 0:
			m.keys[i], m.vals[i] = x, v+1
			m.n++
			return
		case m.keys[i] == x:
			m.vals[i] = v + 1
			return
		}
	}
}

func (m *kvMap) grow() {
	keys, vals := m.keys, m.vals
	m.bits = max(m.bits+1, 4)
	m.keys, m.vals = make([]kv, 1<<m.bits), make([]int32, 1<<m.bits)
	m.mask, m.n = 1<<m.bits-1, 0
	for i, v := range vals {
		if v != 0 {
			m.put(keys[i], v-1)
		}
	}
}

// each calls f for every pair stored, in the table's order (fixed for a
// given history).
func (m *kvMap) each(f func(x kv, v int32)) {
	for i, v := range m.vals {
		if v != 0 {
			f(m.keys[i], v-1)
		}
	}
}
