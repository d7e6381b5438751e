package capturesuite

import (
	"strings"
	"testing"
)

// TestSimArgsLatency: a run's simulator answers at once unless the run
// asks for the realistic profile (cloudsim's own default is realistic,
// so the test capture must say none), and a realistic run's simulator
// takes the run's seed for its jitter; on every cloud.
func TestSimArgsLatency(t *testing.T) {
	for _, cloud := range Clouds {
		c := &cluster{cloud: cloud, nodes: []string{"n1", "n2"}}
		if cloud == "oci" {
			c.ociNodes, c.ociHarness = ociKey{user: "u1", fingerprint: "f1", pubFile: "p1"}, ociKey{user: "u2", fingerprint: "f2", pubFile: "p2"}
		}
		args := strings.Join(c.simArgs("127.0.0.1:0"), " ")
		if !strings.Contains(args, " --latency none") || strings.Contains(args, "--seed") {
			t.Errorf("%s, latency unset: %s; want --latency none and cloudsim's default seed", cloud, args)
		}
		c.latency, c.seed = "realistic", 42
		args = strings.Join(c.simArgs("127.0.0.1:0"), " ")
		if !strings.Contains(args, " --latency realistic --seed 42") {
			t.Errorf("%s, realistic: %s; want --latency realistic --seed 42", cloud, args)
		}
	}
}

// TestCloudLatencyOption: Options default to none, refuse unknown
// profiles naming the flag, and refuse a profile for onprem, which has no
// cloud simulator.
func TestCloudLatencyOption(t *testing.T) {
	o := Options{Binary: "ipfence", Store: t.TempDir()}
	if err := o.defaults(); err != nil || o.CloudLatency != "none" {
		t.Fatalf("defaults: %q, %v; want none", o.CloudLatency, err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Binary: "ipfence", Store: t.TempDir(), CloudLatency: "fast"}, `--cloud-latency: "fast" is not one of none, realistic`},
		{Options{Binary: "ipfence", Store: t.TempDir(), CloudLatency: "realistic", Provider: "onprem"}, "--cloud-latency realistic: --provider onprem has no cloud simulator to pace"},
	} {
		if err := tc.o.defaults(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.o.CloudLatency, err, tc.want)
		}
	}
}
