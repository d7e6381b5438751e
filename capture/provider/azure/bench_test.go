package azure_test

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// BenchmarkMove moves one address back and forth between two NICs and
// reports the ARM calls a move takes (the list, two PUTs, their polls and
// final GETs) and the median move time against the simulator without
// injected latency: the driver's and the SDK's own cost.
func BenchmarkMove(b *testing.B) {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Limits: armsim.Limits{Off: true}})
	if err != nil {
		b.Fatal(err)
	}
	cnt := &counting{next: sim, calls: map[string]int{}}
	srv := httptest.NewTLSServer(cnt)
	defer srv.Close()
	drv, err := azure.New(azure.Options{SubscriptionID: sim.SubscriptionID(), ResourceGroup: sim.ResourceGroup(),
		Credential: &fakeToken{}, Endpoint: srv.URL, Transport: srv.Client(), PollFrequency: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := drv.Assign(b.Context(), req("nic-a", 1), false); err != nil {
		b.Fatal(err)
	}
	total := func() int {
		cnt.mu.Lock()
		defer cnt.mu.Unlock()
		n := 0
		for _, v := range cnt.calls {
			n += v
		}
		return n
	}
	start := total()
	nics := []string{"nic-b", "nic-a"}
	var times []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := drv.Assign(b.Context(), req(nics[i%2], uint64(i+2)), true); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
		i++
	}
	slices.Sort(times)
	b.ReportMetric(float64(total()-start)/float64(i), "calls/move")
	b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), "median-ms/move")
}
