// Package simfault is what the cloud simulators' dialects (EC2, ARM, OCI)
// share of their injected errors: a per-operation list of error codes
// with the rate at which each is answered, checked the same way and drawn
// from a seeded source the same way, so that which calls fail is a
// function of the seed, the faults and the order of calls in every
// dialect; and their latency profiles (Profile), the pace of the cloud
// itself beneath the faults.
package simfault

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrorRate makes a share of an operation's calls fail with one code.
type ErrorRate struct {
	Code string  `json:"code"`
	Rate float64 `json:"rate"`
}

// CheckRates checks the list of operation op: every code is one of codes,
// every rate between 0 and 1, and the rates add up to 1 at most.
func CheckRates(op string, rates []ErrorRate, codes []string) error {
	sum := 0.0
	for i, e := range rates {
		if !slices.Contains(codes, e.Code) {
			return fmt.Errorf("errors[%s][%d].code: %q is not one of %s", op, i, e.Code, strings.Join(codes, ", "))
		}
		if math.IsNaN(e.Rate) || e.Rate < 0 || e.Rate > 1 {
			return fmt.Errorf("errors[%s][%d].rate: %v is not between 0 and 1", op, i, e.Rate)
		}
		sum += e.Rate
	}
	// A little slack for rates such as 0.1+0.2+0.7 that add up to 1 only
	// on paper.
	if sum > 1+1e-9 {
		return fmt.Errorf("errors[%s]: the rates add up to %v, more than 1", op, sum)
	}
	return nil
}

// Draw decides whether a call of op fails, and with which code ("" for
// none), from op's own list or else any's. It draws one number from rng
// for each call that has a list and none for the others.
func Draw(errors map[string][]ErrorRate, op, any string, rng interface{ Float64() float64 }) string {
	rates, ok := errors[op]
	if !ok {
		rates = errors[any]
	}
	if len(rates) == 0 {
		return ""
	}
	x := rng.Float64()
	for _, e := range rates {
		if x < e.Rate {
			return e.Code
		}
		x -= e.Rate
	}
	return ""
}
