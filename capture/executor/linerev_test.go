package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/store"
)

// TestLineRevisionTravels: the 229 live acquires of the batch journal,
// every even-numbered key on the etcd line at revision 1000+i, the odd
// ones off it, and key 5 on the line at an epoch readiness did not
// confirm. The calls carry each row's revision (never mixing rows with
// and without one), the simulator records it, the journal rows keep it,
// and key 5's rows are not called: they go back to approved.
func TestLineRevisionTravels(t *testing.T) {
	e := newBatchEnv(t)
	idx := map[capture.Key]int{}
	for i, k := range e.keys {
		idx[k] = i
	}
	rev := func(k capture.Key, epoch capture.Epoch) (int64, bool) {
		i := idx[k]
		switch {
		case i == 5:
			return 0, true
		case i%2 == 0 && epoch == 1:
			return int64(1000 + i), true
		}
		return 0, false
	}
	ex := &executor.Executor{Store: e.st, Providers: map[string]provider.Provider{"aws": e.drv},
		Ready: func() error { return nil }, LineRevision: rev}
	res, err := ex.Run(context.Background(), e.now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed != 458 || res.Succeeded != 456 || res.Failed != 2 || res.Stale != 2 {
		t.Fatalf("result %+v", res)
	}
	// Two calls for the 115 rows with a token (100 + 15), two for the
	// 113 without (99 + 14: key 5's row left the first), one forwarding
	// call for each side.
	if got := e.cnt.n["AssignPrivateIpAddresses"]; got != 4 {
		t.Errorf("%d assign calls, want 4", got)
	}
	if got := e.cnt.n["ModifyNetworkInterfaceAttribute"]; got != 2 {
		t.Errorf("%d forwarding calls, want 2", got)
	}
	five := e.keys[5].Address
	assigns := 0
	for _, m := range e.sim.Mutations() {
		if m.Address == five {
			t.Fatalf("key 5 reached the provider: %+v", m)
		}
		if m.Call != capture.Assign {
			continue
		}
		assigns++
		want := int64(0)
		if i := idx[capture.Key{Pool: "web", Address: m.Address, Domain: "provider:aws:group:g"}]; i%2 == 0 {
			want = int64(1000 + i)
		}
		if m.LineRevision != want {
			t.Errorf("assign of %s carried revision %d, want %d", m.Address, m.LineRevision, want)
		}
	}
	if assigns != 228 {
		t.Errorf("%d assign mutations, want 228", assigns)
	}
	rows, err := e.st.Rows(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		i := idx[r.Key]
		switch {
		case i == 5:
			if r.State != capture.Approved || !strings.Contains(r.Reason, "the etcd epoch line does not confirm the row's epoch") || r.LineRevision != 0 {
				t.Errorf("key 5's %s row: %s %q, revision %d", r.Kind, r.State, r.Reason, r.LineRevision)
			}
		case r.State != capture.Succeeded:
		case r.Kind == capture.Assign && i%2 == 0 && r.LineRevision != int64(1000+i),
			r.Kind == capture.EnableForwarding && i%2 == 0 && r.LineRevision != 1000, // the one call's token
			i%2 == 1 && r.LineRevision != 0:
			t.Errorf("key %d's %s row keeps revision %d", i, r.Kind, r.LineRevision)
		}
	}
}
