package azure_test

import (
	"net/netip"
	"testing"

	"github.com/ipfence/ipfence/capture/provider"
)

// The driver sends a request's etcd line revision as
// X-Ipfence-Line-Revision (one per address in a call carrying several),
// and nothing when the request carries none: the simulator records each
// mutation with the revision the header carried, and refuses a zero.
func TestLineRevisionSent(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	ctx := t.Context()
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	if err := e.drv.Assign(ctx, provider.Request{NIC: "nic-a", Address: a("10.0.0.70"), Epoch: 1, IdempotencyKey: "k70", LineRevision: 77}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(ctx, provider.Request{NIC: "nic-a", Address: a("10.0.0.71"), Epoch: 1, IdempotencyKey: "k71"}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.SetForwarding(ctx, provider.Request{NIC: "nic-a", Address: a("10.0.0.70"), Epoch: 1, LineRevision: 78}, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"assign-secondary-ip 10.0.0.70": 77, "assign-secondary-ip 10.0.0.71": 0, "ensure-forwarding-enabled 10.0.0.70": 78}
	if err := e.drv.AssignMany(ctx, "nic-b", []provider.Request{
		{NIC: "nic-b", Address: a("10.0.0.72"), Epoch: 2, IdempotencyKey: "k72", LineRevision: 80},
		{NIC: "nic-b", Address: a("10.0.0.73"), Epoch: 3, IdempotencyKey: "k73", LineRevision: 81},
	}, false); err != nil {
		t.Fatal(err)
	}
	want["assign-secondary-ip 10.0.0.72"], want["assign-secondary-ip 10.0.0.73"] = 80, 81
	got := map[string]int64{}
	for _, m := range e.sim.Mutations() {
		got[string(m.Call)+" "+m.Address.String()] = m.LineRevision
	}
	if len(got) != len(want) {
		t.Fatalf("mutations %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: line revision %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
}
