package simfault

import (
	"encoding/json"
	"testing"
	"time"
)

// TestProfileWaits: an operation waits its own figure or Other, spread by
// Jitter within Range, one draw per wait with a figure; without jitter
// the figure exactly; a zero figure waits nothing and draws nothing.
func TestProfileWaits(t *testing.T) {
	p := Profile{Name: "t", Operations: map[string]time.Duration{"Put": time.Second}, Other: 100 * time.Millisecond, Settle: 4 * time.Second, Jitter: 0.5}
	rng, replay := NewJitter(3), NewJitter(3)
	lo, hi := p.Range(time.Second)
	if lo != 500*time.Millisecond || hi != 1500*time.Millisecond {
		t.Fatalf("Range(1s) = %v, %v", lo, hi)
	}
	seen := map[time.Duration]bool{}
	for range 100 {
		d := p.Wait("Put", rng)
		if d < lo || d > hi {
			t.Fatalf("Put waits %v, outside %v to %v", d, lo, hi)
		}
		if want := time.Duration(float64(time.Second) * (1 + 0.5*(2*replay.Float64()-1))); d != want {
			t.Fatalf("Put waits %v, want %v", d, want)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 waits took %d values: no jitter", len(seen))
	}
	if d := p.Wait("Get", rng); d < 50*time.Millisecond || d > 150*time.Millisecond {
		t.Fatalf("Get waits %v, want Other's 100ms ±50%%", d)
	}
	if d := p.SettleWait(rng); d < 2*time.Second || d > 6*time.Second {
		t.Fatalf("settling takes %v, want 4s ±50%%", d)
	}
	p.Jitter = 0
	if d := p.Wait("Put", rng); d != time.Second {
		t.Fatalf("without jitter Put waits %v", d)
	}
	before := NewJitter(3)
	zero := Profile{}
	a := NewJitter(3)
	if d := zero.Wait("Put", a); d != 0 || a.Float64() != before.Float64() {
		t.Fatalf("the zero profile waits %v or drew a number", d)
	}
}

func TestProfileValidate(t *testing.T) {
	ops := []string{"Get", "Put"}
	for _, tc := range []struct {
		p    Profile
		want string
	}{
		{Profile{Name: "x", Operations: map[string]time.Duration{"Nope": 1}}, `latency profile "x": "Nope" is not one of [Get Put]`},
		{Profile{Name: "x", Operations: map[string]time.Duration{"Get": -1}}, `latency profile "x": Get: negative`},
		{Profile{Name: "x", Settle: -1}, `latency profile "x": other 0s, settle -1ns: negative`},
		{Profile{Name: "x", Jitter: 1.5}, `latency profile "x": jitter 1.5 is not between 0 and 1`},
	} {
		if err := tc.p.Validate(ops); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	if err := (Profile{Operations: map[string]time.Duration{"Get": time.Second}, Jitter: 1}).Validate(ops); err != nil {
		t.Fatal(err)
	}
	if err := CheckLatencyName("realistic"); err != nil {
		t.Fatal(err)
	}
	if err := CheckLatencyName("fast"); err == nil || err.Error() != `"fast" is not one of none, realistic` {
		t.Fatalf("CheckLatencyName(fast) = %v", err)
	}
}

func TestProfileJSON(t *testing.T) {
	b, err := json.Marshal(Profile{Name: "r", Operations: map[string]time.Duration{"Put": 1500 * time.Millisecond}, Settle: 6 * time.Second, Jitter: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"r","operations":{"Put":"1.5s"},"other":"0s","settle":"6s","jitter":0.5}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}
