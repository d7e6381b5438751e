package armsim

import (
	"fmt"
	"time"

	"github.com/ipfence/ipfence/internal/simfault"
)

// Realistic is ARM's pace for a NIC as published or observed: the
// latency of each operation, and how long a PUT's long-running operation
// takes to succeed (its change visible, its Azure-AsyncOperation status
// Succeeded). Figures without a source are assumptions, said so.
var Realistic = simfault.Profile{
	Name: simfault.LatencyRealistic,
	Operations: map[string]time.Duration{
		// Assumed: reads answer in a fraction of a second; no published
		// figure found.
		OpGet:    200 * time.Millisecond,
		OpList:   300 * time.Millisecond,
		OpStatus: 200 * time.Millisecond,
		// Assumed: ARM accepts a NIC PUT (200, provisioningState
		// Updating, Azure-AsyncOperation) within a second; the work is
		// in the operation, below.
		OpPut: time.Second,
	},
	Other: 200 * time.Millisecond,
	// Reported: removing an address from a NIC finished after 10 s and
	// adding one after about a minute
	// (https://github.com/Azure/azure-cli/issues/25253); a move of a
	// secondary ipConfiguration by begin_create_or_update took over a
	// minute (https://github.com/Azure/azure-sdk-for-python/issues/26695);
	// delete then create on another NIC left the address unreachable for
	// over 100 s (https://github.com/Azure/azure-cli/issues/23446). The
	// network resource provider answers a NIC PUT with Retry-After: 10
	// (https://github.com/Azure/azure-powershell/issues/14460), so the
	// 10 s of the first report is the tools' first poll: an operation
	// done within it. Taken: 6 s ±50 %, 3 to 9 s, the fast end of the
	// reports; each step of a two-step move waits it.
	Settle: 6 * time.Second,
	// Assumed: ±50 %, the reports' spread being wide.
	Jitter: 0.5,
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
