//go:build !linux

package capturesuite

import (
	"context"
	"errors"

	"github.com/ipfence/ipfence/verify/harness"
)

// OnPremNemeses are the faults of the on-premises test.
var OnPremNemeses = []string{"partition", "pause", "kill"}

func runOnPrem(context.Context, Options) (*harness.Outcome, error) {
	return nil, errors.New("--provider onprem needs Linux: network namespaces, proxy-ARP, keepalived")
}
