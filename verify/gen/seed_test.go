package gen

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// seeded builds, for a seed, a generator whose ops depend on it.
var seeded = map[string]func(seed uint64) Generator{
	"Mix": func(seed uint64) Generator {
		return Mix(seed, Repeat(F("a", nil)), Repeat(F("b", nil)), Repeat(F("c", nil)))
	},
	"Stagger": func(seed uint64) Generator {
		return Stagger(seed, 10*ms, Repeat(F("r", nil)))
	},
	"Fn": func(seed uint64) Generator {
		return Fn(seed, func(_ Context, r *Rand) Op { return F("w", r.IntN(1000)) })
	},
}

func TestSameSeedSameEvents(t *testing.T) {
	for name, mk := range seeded {
		a := Simulate(mk(42), 3, fixed(3*ms), time.Second)
		b := Simulate(mk(42), 3, fixed(3*ms), time.Second)
		if len(a) < 100 {
			t.Fatalf("%s: only %d events", name, len(a))
		}
		if !slices.Equal(a, b) {
			t.Errorf("%s: two runs with seed 42 differ", name)
		}
		if c := Simulate(mk(43), 3, fixed(3*ms), time.Second); slices.Equal(a, c) {
			t.Errorf("%s: seeds 42 and 43 give the same events", name)
		}
	}
}

func TestSameSeedWhateverTheTiming(t *testing.T) {
	// The ops Mix and Fn choose are the same in the same order whatever the
	// latencies and the number of threads: they draw only when they hand
	// out.
	for _, name := range []string{"Mix", "Fn"} {
		seq := func(threads int, lat time.Duration) []string {
			var out []string
			for _, e := range invokes(Simulate(Limit(200, seeded[name](9)), threads, fixed(lat), time.Hour), "") {
				out = append(out, fmt.Sprint(e.F, ":", e.Value))
			}
			return out
		}
		a, b := seq(1, ms), seq(5, 7*ms)
		if len(a) != 200 || !slices.Equal(a, b) {
			t.Errorf("%s: %d ops on 1 thread, %d on 5, or a different order", name, len(a), len(b))
		}
	}
}

func TestMixFrequencies(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		n := map[string]int{}
		for _, e := range invokes(Simulate(Limit(10000, seeded["Mix"](seed)), 4, fixed(ms), time.Hour), "") {
			n[e.F]++
		}
		for _, f := range []string{"a", "b", "c"} {
			if n[f] < 3000 || n[f] > 3700 {
				t.Errorf("seed %d: %s chosen %d times of 10000, want 3000..3700", seed, f, n[f])
			}
		}
		if n["a"]+n["b"]+n["c"] != 10000 {
			t.Errorf("seed %d: %v", seed, n)
		}
	}
}

func TestStaggerMeanDelay(t *testing.T) {
	const dt = 10 * ms
	inv := invokes(Simulate(Limit(10001, seeded["Stagger"](5)), 4, fixed(ms), time.Hour), "r")
	if len(inv) != 10001 {
		t.Fatalf("%d ops, want 10001", len(inv))
	}
	var sum, sq float64
	for i := 1; i < len(inv); i++ {
		gap := inv[i].Time - inv[i-1].Time
		if gap < 0 || gap >= 2*dt {
			t.Fatalf("gap %v outside [0, 2·dt)", gap)
		}
		sum += float64(gap)
		sq += float64(gap) * float64(gap)
	}
	n := float64(len(inv) - 1)
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	// Uniform on [0, 2dt): mean dt, standard deviation 2dt/√12 ≈ 0.577dt;
	// the mean of 10,000 is within 0.6% of dt at one sigma.
	if mean < 0.97*float64(dt) || mean > 1.03*float64(dt) {
		t.Errorf("mean delay %v, want within 3%% of %v", time.Duration(mean), dt)
	}
	if sd < 0.54*float64(dt) || sd > 0.61*float64(dt) {
		t.Errorf("delays' standard deviation %v, want about %v", time.Duration(sd), time.Duration(0.577*float64(dt)))
	}
}

// The run's seed reaches generators built without it: one stream number
// in the code, and Context.Seed alone makes runs differ or repeat. With
// seed 0 a generator's sequence is its stream's, as before there was a
// run seed.
func TestRunSeedFeedsEveryGenerator(t *testing.T) {
	for name, mk := range seeded {
		a := SimulateSeed(7, mk(1), 3, fixed(3*ms), time.Second)
		b := SimulateSeed(7, mk(1), 3, fixed(3*ms), time.Second)
		c := SimulateSeed(8, mk(1), 3, fixed(3*ms), time.Second)
		if len(a) < 100 {
			t.Fatalf("%s: only %d events", name, len(a))
		}
		if !slices.Equal(a, b) {
			t.Errorf("%s: two runs with run seed 7 differ", name)
		}
		if slices.Equal(a, c) {
			t.Errorf("%s: run seeds 7 and 8 give the same events", name)
		}
		if z, old := SimulateSeed(0, mk(1), 3, fixed(3*ms), time.Second), Simulate(mk(1), 3, fixed(3*ms), time.Second); !slices.Equal(z, old) {
			t.Errorf("%s: run seed 0 changed the stream's sequence", name)
		}
	}
	// Two streams of one run draw different sequences.
	ctx := Context{Seed: 7}
	r1, r2 := ctx.Rand(1), ctx.Rand(2)
	if r1.Uint64() == r2.Uint64() {
		t.Error("streams 1 and 2 of run 7 start alike")
	}
	if r0 := (Context{}).Rand(5); r0 != NewRand(5) {
		t.Errorf("run seed 0: stream 5's source is %v, want NewRand(5)", r0)
	}
}
