package gen

import (
	"testing"
	"time"
)

func TestRandSequence(t *testing.T) {
	// SplitMix64's published outputs for seed 0 and seed 1234567: the
	// algorithm is part of what a --seed means.
	for _, c := range []struct {
		seed uint64
		want [3]uint64
	}{
		{0, [3]uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}},
		{1234567, [3]uint64{6457827717110365317, 3203168211198807973, 9817491932198370423}},
	} {
		r := NewRand(c.seed)
		for i, w := range c.want {
			if got := r.Uint64(); got != w {
				t.Errorf("seed %d, draw %d: %#x, want %#x", c.seed, i, got, w)
			}
		}
	}
}

func TestRandIsAValue(t *testing.T) {
	a := NewRand(3)
	b := a
	x, y := a.Uint64(), b.Uint64()
	if x != y {
		t.Errorf("a copy drew %d, the original %d", y, x)
	}
}

func TestRandRanges(t *testing.T) {
	r := NewRand(11)
	var seen [7]int
	for range 70000 {
		seen[r.IntN(7)]++
	}
	for i, n := range seen {
		if n < 9500 || n > 10500 {
			t.Errorf("IntN(7) gave %d %d times of 70000", i, n)
		}
	}
	for range 1000 {
		if f := r.Float64(); f < 0 || f >= 1 {
			t.Fatalf("Float64 %v", f)
		}
		if d := r.Duration(3 * time.Millisecond); d < 0 || d >= 3*time.Millisecond {
			t.Fatalf("Duration(3ms) %v", d)
		}
	}
	if d := r.Duration(0); d != 0 {
		t.Errorf("Duration(0) = %v", d)
	}
	// Without the rejection step, Uint64N(3<<62) is floor(3x/4) of a
	// uniform x: every multiple of 3 comes from two values of x, the rest
	// from one, so half the results are multiples of 3 instead of a third.
	n := uint64(3) << 62
	thirds := 0
	for range 10000 {
		if r.Uint64N(n)%3 == 0 {
			thirds++
		}
	}
	if thirds < 3100 || thirds > 3570 {
		t.Errorf("Uint64N(3<<62) gave a multiple of 3 %d times of 10000, want about 3333", thirds)
	}
}
