package azure_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// A driver on the simulator, served over TLS as ARM is: a move of a
// secondary address from one NIC to another is two conditional PUTs, and
// the simulator's record shows both steps with the action's epoch.
func Example() {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewTLSServer(sim)
	defer srv.Close()
	drv, err := azure.New(azure.Options{
		SubscriptionID: sim.SubscriptionID(), ResourceGroup: sim.ResourceGroup(),
		Credential: &fakeToken{}, Endpoint: srv.URL, Transport: srv.Client(),
		PollFrequency: 10 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	a := netip.MustParseAddr("10.0.0.50")
	if err := drv.Assign(ctx, provider.Request{NIC: "nic-a", Address: a, Epoch: 1, IdempotencyKey: "k1"}, false); err != nil {
		panic(err)
	}
	if err := drv.Assign(ctx, provider.Request{NIC: "nic-b", Address: a, Epoch: 2, IdempotencyKey: "k2"}, true); err != nil {
		panic(err)
	}
	obs, err := drv.Describe(ctx, a)
	if err != nil {
		panic(err)
	}
	fmt.Println("on", obs.NIC)
	for _, m := range sim.Mutations() {
		fmt.Println(m.Call, m.NIC, m.Address, "epoch", m.Epoch)
	}
	// Output:
	// on nic-b
	// assign-secondary-ip nic-a 10.0.0.50 epoch 1
	// unassign-secondary-ip nic-a 10.0.0.50 epoch 2
	// assign-secondary-ip nic-b 10.0.0.50 epoch 2
}
