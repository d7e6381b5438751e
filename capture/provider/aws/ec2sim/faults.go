package ec2sim

import (
	"cmp"
	"fmt"
	"github.com/ipfence/ipfence/internal/simfault"
	"maps"
	"slices"
	"time"
)

// Error codes the simulator injects, as EC2 sends them.
const (
	CodeThrottled   = "RequestLimitExceeded" // HTTP 503
	CodeInternal    = "InternalError"        // HTTP 500
	CodeUnavailable = "Unavailable"          // HTTP 503
)

// AnyAction is the key of Faults.Errors that applies to every action
// without an entry of its own.
const AnyAction = "*"

// Faults are what the simulator does wrong on purpose. The zero value
// injects nothing.
type Faults struct {
	// Latency delays every Query API call before it is served (and
	// before any change it makes).
	Latency Duration `json:"latency"`
	// ActionLatency replaces Latency for the actions it names.
	ActionLatency map[string]Duration `json:"actionLatency,omitempty"`
	// Errors makes calls of an action (or of any action without an entry,
	// under AnyAction) fail with an injected error at the given rates. A
	// call that fails this way changes nothing.
	Errors map[string][]ErrorRate `json:"errors,omitempty"`
	// RemapDelay makes the changes of mutations acknowledged from now on
	// visible only this much later, as EC2 remaps asynchronously.
	RemapDelay Duration `json:"remapDelay"`
}

// ErrorRate is the probability, from 0 to 1, that a call fails with Code:
// CodeThrottled, CodeInternal or CodeUnavailable.
type ErrorRate = simfault.ErrorRate

// Duration is a time.Duration that reads and writes JSON as a string such
// as "150ms".
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a number with a unit, such as 150ms or 2s", b)
	}
	*d = Duration(v)
	return nil
}

// injectedStatus is the HTTP status EC2 sends with each injectable code.
var injectedStatus = map[string]int{CodeThrottled: 503, CodeInternal: 500, CodeUnavailable: 503}

// validate rejects faults the simulator cannot carry out, naming the field:
// unknown actions or codes, negative durations, rates outside 0 to 1 or
// adding up to more than 1 for one action.
func (f Faults) validate() error {
	if f.Latency < 0 {
		return fmt.Errorf("latency: %s is negative", time.Duration(f.Latency))
	}
	if f.RemapDelay < 0 {
		return fmt.Errorf("remapDelay: %s is negative", time.Duration(f.RemapDelay))
	}
	for _, a := range sortedKeys(f.ActionLatency) {
		if !knownAction(a) {
			return fmt.Errorf("actionLatency: %q is not an action the simulator serves (%v)", a, actionNames())
		}
		if d := f.ActionLatency[a]; d < 0 {
			return fmt.Errorf("actionLatency[%s]: %s is negative", a, time.Duration(d))
		}
	}
	for _, a := range sortedKeys(f.Errors) {
		if a != AnyAction && !knownAction(a) {
			return fmt.Errorf("errors: %q is neither %q nor an action the simulator serves (%v)", a, AnyAction, actionNames())
		}
		if err := simfault.CheckRates(a, f.Errors[a], []string{CodeThrottled, CodeInternal, CodeUnavailable}); err != nil {
			return err
		}
	}
	return nil
}

// latency is how long a call of action waits before it is served.
func (f Faults) latency(action string) time.Duration {
	if d, ok := f.ActionLatency[action]; ok {
		return time.Duration(d)
	}
	return time.Duration(f.Latency)
}

// draw decides whether a call of action fails, and with which code ("" for
// none). It draws one number from rng for each call of an action that has
// rates (its own or AnyAction's) and none for other calls, so the calls
// that fail are a function of the seed, the faults and the order of calls.
func (f Faults) draw(action string, rng interface{ Float64() float64 }) string {
	return simfault.Draw(f.Errors, action, AnyAction, rng)
}

// clone copies the maps and slices, so that a caller's later change to
// its value does not reach the simulator's.
func (f Faults) clone() Faults {
	out := f
	if f.ActionLatency != nil {
		out.ActionLatency = maps.Clone(f.ActionLatency)
	}
	if f.Errors != nil {
		out.Errors = make(map[string][]ErrorRate, len(f.Errors))
		for k, v := range f.Errors {
			out.Errors[k] = slices.Clone(v)
		}
	}
	return out
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
