package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

// Each cloud provider gets a budget (its api_budget, else its type's
// default) and none other does; the metrics show each budget's waits,
// throttled answers and retries by class.
func TestBudgetsAndTheirMetrics(t *testing.T) {
	own := callbudget.Limits{Read: callbudget.Limit{Burst: 1, Rate: 1}, Write: callbudget.Limit{Burst: 2, Rate: 3}}
	bs := budgets(&config.Node{Providers: map[string]config.Provider{
		"ec2": {Type: config.TypeAWS}, "sim": {Type: config.TypeCloudsim}, "az": {Type: config.TypeAzure},
		"oci": {Type: config.TypeOCI, Budget: &own}, "mem": {Type: config.TypeMemory}, "lan": {Type: config.TypeOnPrem},
	}})
	want := map[string]callbudget.Limits{"ec2": callbudget.EC2, "sim": callbudget.EC2, "az": callbudget.ARM, "oci": own}
	if len(bs) != len(want) {
		t.Fatalf("%d budgets, want %d (the cloud providers')", len(bs), len(want))
	}
	for name, l := range want {
		if bs[name] == nil || bs[name].Limits() != l {
			t.Fatalf("budget of %s: %+v, want %+v", name, bs[name], l)
		}
	}

	clock := handclock.New(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	b := callbudget.New(callbudget.Options{Limits: own, Clock: clock, Jitter: func(time.Duration) time.Duration { return 0 }})
	b.Throttled(callbudget.Write, 2*time.Second)
	call := callbudget.Call(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(call, callbudget.Write) }()
	deadline := time.Now().Add(30 * time.Second)
	for clock.Sleepers() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the write never waited")
		}
		time.Sleep(time.Millisecond)
	}
	clock.Advance(3 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(call, callbudget.Write); err != nil {
		t.Fatal(err)
	}
	// The pause of 2 s and a refill of 1/3 s: 2.333… s.
	expected := `
# HELP ipfence_api_budget_waits_total Cloud API calls that waited for a token of the node's budget or for a throttling pause to end.
# TYPE ipfence_api_budget_waits_total counter
ipfence_api_budget_waits_total{class="read",provider="oci"} 0
ipfence_api_budget_waits_total{class="write",provider="oci"} 1
# HELP ipfence_api_retries_total Cloud API calls sent again by the driver's retries (reads; writes are never retried blindly).
# TYPE ipfence_api_retries_total counter
ipfence_api_retries_total{class="read",provider="oci"} 0
ipfence_api_retries_total{class="write",provider="oci"} 1
# HELP ipfence_api_throttled_total Cloud API answers that said the account is throttled (429, RequestLimitExceeded).
# TYPE ipfence_api_throttled_total counter
ipfence_api_throttled_total{class="read",provider="oci"} 0
ipfence_api_throttled_total{class="write",provider="oci"} 1
`
	m := budgetMetrics{"oci": b}
	if err := testutil.CollectAndCompare(m, strings.NewReader(expected), "ipfence_api_budget_waits_total", "ipfence_api_retries_total", "ipfence_api_throttled_total"); err != nil {
		t.Fatal(err)
	}
	if got := b.Stats(callbudget.Write).Wait; got != 2*time.Second+time.Second/3 {
		t.Fatalf("waited %v, want 2.333 s", got)
	}
	if n := testutil.CollectAndCount(m, "ipfence_api_budget_wait_seconds_total"); n != 2 {
		t.Fatalf("%d wait-seconds series, want 2", n)
	}
}
