package ocisim

import (
	"fmt"
	"time"

	"github.com/ipfence/ipfence/internal/simfault"
)

// Realistic is OCI Networking's pace for private IPs. No latency figure
// for these operations was found published or reported: every figure is
// an assumption, said so, of the same order as EC2's.
var Realistic = simfault.Profile{
	Name: simfault.LatencyRealistic,
	Operations: map[string]time.Duration{
		// Assumed: reads answer in a fraction of a second.
		OpGetPrivateIp:   150 * time.Millisecond,
		OpGetVnic:        150 * time.Millisecond,
		OpListPrivateIps: 200 * time.Millisecond,
		// Assumed: a write of one object, answered when done (below).
		OpUpdatePrivateIp: 400 * time.Millisecond,
		OpCreatePrivateIp: 400 * time.Millisecond,
		OpDeletePrivateIp: 400 * time.Millisecond,
		OpUpdateVnic:      400 * time.Millisecond,
	},
	Other: 150 * time.Millisecond,
	// UpdatePrivateIp is synchronous: its answer is the private IP on
	// its new VNIC, and no asynchrony is documented for the move (OCI
	// API reference, UpdatePrivateIp,
	// https://docs.oracle.com/en-us/iaas/api/#/en/iaas/20160918/PrivateIp/UpdatePrivateIp).
	Settle: 0,
	// Assumed: ±30 %.
	Jitter: 0.3,
}

// LatencyProfile is the profile of a name in simfault.LatencyNames: the
// zero profile for none, Realistic for realistic.
func LatencyProfile(name string) (simfault.Profile, error) {
	switch name {
	case simfault.LatencyNone:
		return simfault.Profile{Name: name}, nil
	case simfault.LatencyRealistic:
		return Realistic.Clone(), nil
	}
	return simfault.Profile{}, fmt.Errorf("latency: %w", simfault.CheckLatencyName(name))
}
