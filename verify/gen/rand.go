package gen

import (
	"math/bits"
	"time"
)

// Rand is a seeded pseudo-random source (SplitMix64) small enough to live
// inside a generator value: copying a Rand copies its whole state, so a
// generator that draws from a copy and keeps the copy in the generator it
// returns leaves the receiver's sequence untouched. math/rand/v2's sources
// are pointers behind an interface, which would break that.
//
// The sequence for a seed is fixed: a test's --seed must replay the same
// operations across builds, so the algorithm must not change.
type Rand struct {
	state uint64
}

// NewRand returns the source for seed.
func NewRand(seed uint64) Rand { return Rand{state: seed} }

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uint64N returns a uniform value in [0, n); n must be positive. It maps
// the 64 bits by multiplication and rejects the few values that would make
// small results likelier (Lemire's method), so choices are exactly uniform.
func (r *Rand) Uint64N(n uint64) uint64 {
	if n == 0 {
		panic("gen: Rand.Uint64N of 0")
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// IntN returns a uniform value in [0, n); n must be positive.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		panic("gen: Rand.IntN of a non-positive bound")
	}
	return int(r.Uint64N(uint64(n)))
}

// Float64 returns a uniform value in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// Duration returns a uniform duration in [0, d), or 0 when d <= 0.
func (r *Rand) Duration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Uint64N(uint64(d)))
}
