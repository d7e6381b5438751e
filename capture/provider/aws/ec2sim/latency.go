package ec2sim

import (
	"fmt"
	"time"

	"github.com/ipfence/ipfence/internal/simfault"
)

// Realistic is EC2's pace as published or observed: the latency of each
// action, and how long an acknowledged change takes to be visible to
// DescribeNetworkInterfaces. Figures without a source are assumptions,
// said so.
var Realistic = simfault.Profile{
	Name: simfault.LatencyRealistic,
	Operations: map[string]time.Duration{
		// Observed: one AssignPrivateIpAddresses took 510 ms in the
		// awscni_aws_api_latency_ms sample of
		// https://github.com/aws/amazon-vpc-cni-k8s/issues/3480.
		actAssign: 500 * time.Millisecond,
		// Assumed: the same as an assign, a write to the same ENI.
		actUnassign: 500 * time.Millisecond,
		actModify:   500 * time.Millisecond,
		// Assumed: a read answers in a fraction of a write's time; no
		// published figure found.
		actDescribe:     150 * time.Millisecond,
		actDescribeAttr: 150 * time.Millisecond,
	},
	Other: 150 * time.Millisecond,
	// "Remapping an IP address is an asynchronous operation" (EC2 API
	// reference, AssignPrivateIpAddresses,
	// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AssignPrivateIpAddresses.html;
	// also https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html),
	// with no figure: assumed 1 s, the provider nemesis's remap delay.
	Settle: time.Second,
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
