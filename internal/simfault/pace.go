package simfault

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The names of the latency profiles every dialect has, as cloudsim's
// --latency and test capture's --cloud-latency take them.
const (
	// LatencyNone answers at once: the simulator's pace before there were
	// profiles, and the default of test capture.
	LatencyNone = "none"
	// LatencyRealistic waits what the cloud is published or observed to
	// take: the default of cloudsim.
	LatencyRealistic = "realistic"
)

// LatencyNames are the profile names, in the order usage lists them.
var LatencyNames = []string{LatencyNone, LatencyRealistic}

// CheckLatencyName says whether name is a profile's name, in an error
// naming the choices.
func CheckLatencyName(name string) error {
	if !slices.Contains(LatencyNames, name) {
		return fmt.Errorf("%q is not one of %s", name, strings.Join(LatencyNames, ", "))
	}
	return nil
}

// Profile is a simulated cloud's own pace: how long each operation takes
// before it is served and how long a change it acknowledged takes to
// settle (become visible; on ARM, its operation to succeed). Each wait is
// its figure spread by Jitter, drawn from a source of its own seeded by
// the simulator's seed, so that a run's waits are a function of the seed
// and the order of calls.
//
// A profile is the cloud, not something done to it: it stays in force
// when faults are replaced or reset, and the faults' latency and delays
// add to its waits.
type Profile struct {
	Name string `json:"name"`
	// Operations is each operation's latency, by the dialect's name of it.
	Operations map[string]time.Duration `json:"operations,omitempty"`
	// Other is the latency of operations Operations leaves out.
	Other time.Duration `json:"other"`
	// Settle is how long after a change is acknowledged it settles.
	Settle time.Duration `json:"settle"`
	// Jitter spreads every wait uniformly over its figure times 1±Jitter
	// (from 0 to 1).
	Jitter float64 `json:"jitter"`
}

// Latency is the figure of op's latency, before jitter.
func (p Profile) Latency(op string) time.Duration {
	if d, ok := p.Operations[op]; ok {
		return d
	}
	return p.Other
}

// Wait draws the latency of one call of op. It draws one number from rng
// for each call with a latency and none for the others.
func (p Profile) Wait(op string, rng *rand.Rand) time.Duration {
	return p.spread(p.Latency(op), rng)
}

// SettleWait draws how long one acknowledged change takes to settle.
func (p Profile) SettleWait(rng *rand.Rand) time.Duration { return p.spread(p.Settle, rng) }

// Range is the least and the most a wait of figure d can be.
func (p Profile) Range(d time.Duration) (lo, hi time.Duration) {
	return time.Duration(float64(d) * (1 - p.Jitter)), time.Duration(float64(d) * (1 + p.Jitter))
}

func (p Profile) spread(d time.Duration, rng *rand.Rand) time.Duration {
	if d <= 0 {
		return 0
	}
	if p.Jitter <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + p.Jitter*(2*rng.Float64()-1)))
}

// Clone copies the map, so that a caller's later change to its profile
// does not reach the simulator's.
func (p Profile) Clone() Profile {
	p.Operations = maps.Clone(p.Operations)
	return p
}

// Validate checks the profile against the dialect's operations.
func (p Profile) Validate(operations []string) error {
	if p.Other < 0 || p.Settle < 0 {
		return fmt.Errorf("latency profile %q: other %s, settle %s: negative", p.Name, p.Other, p.Settle)
	}
	if !(p.Jitter >= 0 && p.Jitter <= 1) {
		return fmt.Errorf("latency profile %q: jitter %v is not between 0 and 1", p.Name, p.Jitter)
	}
	for _, op := range slices.Sorted(maps.Keys(p.Operations)) {
		if !slices.Contains(operations, op) {
			return fmt.Errorf("latency profile %q: %q is not one of %v", p.Name, op, operations)
		}
		if p.Operations[op] < 0 {
			return fmt.Errorf("latency profile %q: %s: negative", p.Name, op)
		}
	}
	return nil
}

// NewJitter is the source of a simulator's profile waits: a stream of the
// seed apart from the injected errors' draws, so that a profile changes
// neither which calls fail nor when the errors' source starts again.
func NewJitter(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, jitterStream)) }

// jitterStream tells the jitter's stream from the errors' (stream 0).
const jitterStream = 0x6a697474

// MarshalJSON writes the durations as strings such as "150ms", as the
// admin APIs show every duration.
func (p Profile) MarshalJSON() ([]byte, error) {
	ops := make(map[string]string, len(p.Operations))
	for op, d := range p.Operations {
		ops[op] = d.String()
	}
	return json.Marshal(struct {
		Name       string            `json:"name"`
		Operations map[string]string `json:"operations"`
		Other      string            `json:"other"`
		Settle     string            `json:"settle"`
		Jitter     float64           `json:"jitter"`
	}{p.Name, ops, p.Other.String(), p.Settle.String(), p.Jitter})
}
