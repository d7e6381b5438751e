package providertest

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ipfence/ipfence/capture/provider"
)

// LineRevisionsSent checks that a driver sends each request's etcd line
// revision with the call (one per address in a call carrying several,
// when the driver batches), and nothing for a request that carries none:
// mutations, the simulator's record after the calls, must show on each
// mutation the revision its request carried. nics are two NICs of the
// driver's simulator, empty.
func LineRevisionsSent(t *testing.T, p provider.Provider, nics [2]string, mutations func() []provider.Mutation) {
	t.Helper()
	ctx := t.Context()
	a := netip.MustParseAddr
	if err := p.Assign(ctx, provider.Request{NIC: nics[0], Address: a("10.0.0.70"), Epoch: 1, IdempotencyKey: "k70", LineRevision: 77}, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Assign(ctx, provider.Request{NIC: nics[0], Address: a("10.0.0.71"), Epoch: 1, IdempotencyKey: "k71"}, false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetForwarding(ctx, provider.Request{NIC: nics[0], Address: a("10.0.0.70"), Epoch: 1, LineRevision: 78}, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"assign-secondary-ip 10.0.0.70": 77, "assign-secondary-ip 10.0.0.71": 0, "ensure-forwarding-enabled 10.0.0.70": 78}
	type batcher interface {
		AssignMany(ctx context.Context, nic string, reqs []provider.Request, reassign bool) error
	}
	if b, ok := p.(batcher); ok {
		if err := b.AssignMany(ctx, nics[1], []provider.Request{
			{NIC: nics[1], Address: a("10.0.0.72"), Epoch: 2, IdempotencyKey: "k72", LineRevision: 80},
			{NIC: nics[1], Address: a("10.0.0.73"), Epoch: 3, IdempotencyKey: "k73", LineRevision: 81},
		}, false); err != nil {
			t.Fatal(err)
		}
		want["assign-secondary-ip 10.0.0.72"], want["assign-secondary-ip 10.0.0.73"] = 80, 81
	}
	got := map[string]int64{}
	for _, m := range mutations() {
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
