package armsim

import (
	"fmt"
	"github.com/ipfence/ipfence/internal/simfault"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
)

// Operations, as ARM's swagger names them; the keys of Faults'
// OperationLatency and Errors.
const (
	OpGet    = "NetworkInterfaces_Get"
	OpPut    = "NetworkInterfaces_CreateOrUpdate"
	OpList   = "NetworkInterfaces_List"
	OpStatus = "AsyncOperation_Get"
	// AnyOperation is the Errors key for every operation without its own.
	AnyOperation = "*"
)

var operations = []string{OpStatus, OpGet, OpPut, OpList}

// Error codes the simulator injects, with ARM's statuses.
const (
	CodeTooManyRequests    = "TooManyRequests"     // 429, Retry-After: 1
	CodeInternal           = "InternalServerError" // 500
	CodeServiceUnavailable = "ServiceUnavailable"  // 503
)

var injectedStatus = map[string]int{CodeTooManyRequests: 429, CodeInternal: 500, CodeServiceUnavailable: 503}

// Faults are what the simulator does wrong on purpose, as the EC2
// dialect's: latency, injected errors, late visibility. The zero value
// injects nothing.
type Faults struct {
	// Latency delays every ARM call before it is served.
	Latency ec2sim.Duration `json:"latency"`
	// OperationLatency replaces Latency for the operations it names.
	OperationLatency map[string]ec2sim.Duration `json:"operationLatency,omitempty"`
	// Errors fails calls of an operation (or of any, under AnyOperation)
	// at the given rates, before they change anything.
	Errors map[string][]ErrorRate `json:"errors,omitempty"`
	// Delay makes the changes of PUTs accepted from now on visible, and
	// their operations Succeeded, only this much later.
	Delay ec2sim.Duration `json:"delay"`
}

// ErrorRate is the probability, from 0 to 1, that a call fails with Code.
type ErrorRate = simfault.ErrorRate

func (f Faults) validate() error {
	if f.Latency < 0 || f.Delay < 0 {
		return fmt.Errorf("latency %s, delay %s: negative", time.Duration(f.Latency), time.Duration(f.Delay))
	}
	for _, op := range slices.Sorted(maps.Keys(f.OperationLatency)) {
		if !slices.Contains(operations, op) {
			return fmt.Errorf("operationLatency: %q is not one of %v", op, operations)
		}
		if f.OperationLatency[op] < 0 {
			return fmt.Errorf("operationLatency[%s]: negative", op)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(f.Errors)) {
		if op != AnyOperation && !slices.Contains(operations, op) {
			return fmt.Errorf("errors: %q is neither %q nor one of %v", op, AnyOperation, operations)
		}
		if err := simfault.CheckRates(op, f.Errors[op], []string{CodeTooManyRequests, CodeInternal, CodeServiceUnavailable}); err != nil {
			return err
		}
	}
	return nil
}

func (f Faults) latency(op string) time.Duration {
	if d, ok := f.OperationLatency[op]; ok {
		return time.Duration(d)
	}
	return time.Duration(f.Latency)
}

// draw decides whether a call of op fails and with which code; it draws
// one number per call of an operation that has rates.
func (f Faults) draw(op string, rng interface{ Float64() float64 }) string {
	return simfault.Draw(f.Errors, op, AnyOperation, rng)
}

func (f Faults) clone() Faults {
	out := f
	out.OperationLatency = maps.Clone(f.OperationLatency)
	if f.Errors != nil {
		out.Errors = make(map[string][]ErrorRate, len(f.Errors))
		for k, v := range f.Errors {
			out.Errors[k] = slices.Clone(v)
		}
	}
	return out
}

// Limits is ARM's throttle: a token bucket of reads and one of writes per
// subscription and principal. A GET (a poll too) takes a read token, a PUT
// a write token; a call finding its bucket empty is answered 429 with
// Retry-After and changes nothing.
type Limits struct {
	// Off disables throttling.
	Off bool
	// WriteBurst and WriteRate (tokens a second) are the write bucket;
	// zero means ARM's documented 200 and 10.
	WriteBurst int
	WriteRate  float64
	// ReadBurst and ReadRate are the read bucket; zero means 250 and 25.
	ReadBurst int
	ReadRate  float64
}

func (l Limits) validate() error {
	if l.WriteBurst < 0 || l.ReadBurst < 0 || l.WriteRate < 0 || l.ReadRate < 0 || math.IsNaN(l.WriteRate) || math.IsNaN(l.ReadRate) {
		return fmt.Errorf("%+v: negative", l)
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	if l.WriteBurst == 0 {
		l.WriteBurst = 200
	}
	if l.WriteRate == 0 {
		l.WriteRate = 10
	}
	if l.ReadBurst == 0 {
		l.ReadBurst = 250
	}
	if l.ReadRate == 0 {
		l.ReadRate = 25
	}
	return l
}

// bucket is one token bucket.
type bucket struct {
	tokens float64
	at     time.Time
}

// buckets are one principal's read and write buckets.
type buckets struct{ read, write bucket }

// take takes a token at now from a bucket of burst refilled at rate, or
// says how long until one is there.
func (b *bucket) take(now time.Time, burst int, rate float64) (bool, time.Duration) {
	if b.at.IsZero() {
		b.tokens, b.at = float64(burst), now
	}
	if now.After(b.at) {
		b.tokens = math.Min(float64(burst), b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// remaining is the whole tokens left, for ARM's x-ms-ratelimit headers.
func (b *bucket) remaining() int { return int(b.tokens) }
