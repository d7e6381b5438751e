package ocisim

import (
	"cmp"
	"fmt"
	"github.com/ipfence/ipfence/internal/simfault"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"
)

// Error codes the simulator injects, as OCI sends them.
const (
	CodeTooManyRequests     = "TooManyRequests"     // HTTP 429
	CodeInternalServerError = "InternalServerError" // HTTP 500
	CodeServiceUnavailable  = "ServiceUnavailable"  // HTTP 503
)

// AnyOperation is the key of Faults.Errors that applies to every operation
// without an entry of its own.
const AnyOperation = "*"

// injectedStatus is the HTTP status OCI sends with each injectable code.
var injectedStatus = map[string]int{
	CodeTooManyRequests:     http.StatusTooManyRequests,
	CodeInternalServerError: http.StatusInternalServerError,
	CodeServiceUnavailable:  http.StatusServiceUnavailable,
}

// Faults are what the simulator does wrong on purpose, with the knobs of
// the EC2 dialect (capture/provider/aws/ec2sim) and a token bucket besides. The zero
// value injects nothing.
type Faults struct {
	// Latency delays every API call before it is served (and before any
	// change it makes).
	Latency Duration `json:"latency"`
	// OperationLatency replaces Latency for the operations it names
	// (GetPrivateIp, UpdatePrivateIp, …).
	OperationLatency map[string]Duration `json:"operationLatency,omitempty"`
	// Errors makes calls of an operation (or of any operation without an
	// entry, under AnyOperation) fail with an injected error at the given
	// rates. A call that fails this way changes nothing.
	Errors map[string][]ErrorRate `json:"errors,omitempty"`
	// RemapDelay makes the placement changes acknowledged from now on
	// visible to reads only this much later (late visibility). The
	// control plane (ETags, conflicts) sees them at once.
	RemapDelay Duration `json:"remapDelay"`
	// Throttle, when its Rate is positive, answers 429 TooManyRequests to
	// calls beyond a token bucket of Burst calls refilled at Rate a
	// second, as OCI throttles a tenancy.
	Throttle Throttle `json:"throttle"`
}

// Throttle is a token bucket over every API call.
type Throttle struct {
	Burst int     `json:"burst"`
	Rate  float64 `json:"rate"`
}

// ErrorRate is the probability, from 0 to 1, that a call fails with Code:
// CodeTooManyRequests, CodeInternalServerError or CodeServiceUnavailable.
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

// validate rejects faults the simulator cannot carry out, naming the field.
func (f Faults) validate() error {
	if f.Latency < 0 {
		return fmt.Errorf("latency: %s is negative", time.Duration(f.Latency))
	}
	if f.RemapDelay < 0 {
		return fmt.Errorf("remapDelay: %s is negative", time.Duration(f.RemapDelay))
	}
	if f.Throttle.Burst < 0 || math.IsNaN(f.Throttle.Rate) || math.IsInf(f.Throttle.Rate, 0) || f.Throttle.Rate < 0 {
		return fmt.Errorf("throttle: burst %d and rate %v must not be negative", f.Throttle.Burst, f.Throttle.Rate)
	}
	if f.Throttle.Rate > 0 && f.Throttle.Burst < 1 {
		return fmt.Errorf("throttle: burst %d: a bucket with a rate needs room for one call at least", f.Throttle.Burst)
	}
	for _, op := range sortedKeys(f.OperationLatency) {
		if !slices.Contains(operations, op) {
			return fmt.Errorf("operationLatency: %q is not an operation the simulator serves (%v)", op, operations)
		}
		if d := f.OperationLatency[op]; d < 0 {
			return fmt.Errorf("operationLatency[%s]: %s is negative", op, time.Duration(d))
		}
	}
	for _, op := range sortedKeys(f.Errors) {
		if op != AnyOperation && !slices.Contains(operations, op) {
			return fmt.Errorf("errors: %q is neither %q nor an operation the simulator serves (%v)", op, AnyOperation, operations)
		}
		if err := simfault.CheckRates(op, f.Errors[op], []string{CodeTooManyRequests, CodeInternalServerError, CodeServiceUnavailable}); err != nil {
			return err
		}
	}
	return nil
}

// latency is how long a call of op waits before it is served.
func (f Faults) latency(op string) time.Duration {
	if d, ok := f.OperationLatency[op]; ok {
		return time.Duration(d)
	}
	return time.Duration(f.Latency)
}

// draw decides whether a call of op fails, and with which code ("" for
// none). It draws one number for each call of an operation that has rates
// and none for the others, so which calls fail is a function of the seed,
// the faults and the order of calls.
func (f Faults) draw(op string, rng interface{ Float64() float64 }) string {
	return simfault.Draw(f.Errors, op, AnyOperation, rng)
}

// clone copies the maps and slices, so that a caller's later change to its
// value does not reach the simulator's.
func (f Faults) clone() Faults {
	out := f
	if f.OperationLatency != nil {
		out.OperationLatency = maps.Clone(f.OperationLatency)
	}
	if f.Errors != nil {
		out.Errors = make(map[string][]ErrorRate, len(f.Errors))
		for k, v := range f.Errors {
			out.Errors[k] = slices.Clone(v)
		}
	}
	return out
}

// bucket is the throttle's state: tokens left at the time of the last
// take.
type bucket struct {
	tokens float64
	at     time.Time
}

// take spends one token at now, refilling first; false when the bucket is
// empty. A zero Throttle lets everything through.
func (b *bucket) take(t Throttle, now time.Time) bool {
	if t.Rate <= 0 {
		return true
	}
	if b.at.IsZero() {
		b.tokens = float64(t.Burst)
	} else if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(float64(t.Burst), b.tokens+dt*t.Rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
