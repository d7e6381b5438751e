package oci_test

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
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	ctx := t.Context()
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	if err := e.drv.Assign(ctx, provider.Request{NIC: "vnic-a", Address: a("10.0.0.70"), Epoch: 1, IdempotencyKey: "k70", LineRevision: 77}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(ctx, provider.Request{NIC: "vnic-a", Address: a("10.0.0.71"), Epoch: 1, IdempotencyKey: "k71"}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.SetForwarding(ctx, provider.Request{NIC: "vnic-a", Address: a("10.0.0.70"), Epoch: 1, LineRevision: 78}, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"assign-secondary-ip 10.0.0.70": 77, "assign-secondary-ip 10.0.0.71": 0, "ensure-forwarding-enabled 10.0.0.70": 78}
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
