package reconcile_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

// A node that is not ready (the daemon: out of contact with a majority, or
// paused past the window) plans and approves but calls no provider; a
// readiness lost between claim and call returns the row, uncalled, to
// approved, and the next pass runs it.
func TestReadyGatesExecution(t *testing.T) {
	c := newChain(t)
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol := policy.Policy{Auto: true, Providers: []string{"*"}, Kinds: []capture.Kind{"*"}, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, MaxPerRun: 10}
	var checks int
	var answer func(n int) error
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: c.pools, Policy: pol, Execute: true,
		Providers: map[string]provider.Provider{"aws": c.cloud},
		Clock:     func() time.Time { return c.now },
		Ready: func() func() error {
			checks = 0
			return func() error { checks++; return answer(checks) }
		},
	})
	notReady := errors.New("out of contact")

	answer = func(int) error { return notReady }
	rep, err := loop.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exec.Deferred != 2 || rep.Exec.Claimed != 0 || c.cloud.Holder(addr) != "" || len(rep.Approved) != 2 {
		t.Fatalf("not ready: %+v, approved %v, holder %q", rep.Exec, rep.Approved, c.cloud.Holder(addr))
	}

	// Ready at the first claim, not at its call: that row fails without a
	// call, and the next is deferred.
	answer = func(n int) error {
		if n >= 2 {
			return notReady
		}
		return nil
	}
	c.now = c.now.Add(time.Second)
	rep, err = loop.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exec.Claimed != 1 || rep.Exec.Failed != 1 || rep.Exec.Deferred != 1 || c.cloud.Holder(addr) != "" || len(c.cloud.Mutations()) != 0 {
		t.Fatalf("lost between claim and call: %+v, holder %q, mutations %v", rep.Exec, c.cloud.Holder(addr), c.cloud.Mutations())
	}
	rows, err := st.Rows(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// The row that was never called went back to approved, saying why.
	if len(rows) != 2 || rows[0].Kind != capture.Assign || rows[0].State != capture.Approved || !strings.Contains(rows[0].Reason, "not called: out of contact") || rows[1].State != capture.Approved {
		t.Fatalf("rows %+v", rows)
	}

	// Ready: the very next pass, a second later (well within the store's
	// RetryAfter of 10 s, which is for calls that failed), claims both
	// rows again and acquires.
	answer = func(int) error { return nil }
	c.now = c.now.Add(time.Second)
	rep, err = loop.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.cloud.Holder(addr) != "eni-a" || rep.Exec.Succeeded != 2 {
		t.Fatalf("ready, yet not acquired at once: %+v, %s", rep.Exec, c.dump())
	}
}

// Kinds exempt from Ready run while the node is not ready, and the others
// wait: the daemon exempts on-premises releases, which a node that lost its
// VRRP authority must make even when cut off from its peers.
func TestReadyExemptKindsRun(t *testing.T) {
	c := newChain(t)
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol := policy.Policy{Auto: true, Providers: []string{"*"}, Kinds: []capture.Kind{"*"}, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, MaxPerRun: 10}
	var asked []string
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: c.pools, Policy: pol, Execute: true,
		Providers: map[string]provider.Provider{"aws": c.cloud},
		Clock:     func() time.Time { return c.now },
		Ready: func() func() error {
			return func() error { asked = append(asked, "ready"); return errors.New("out of contact") }
		},
		ReadyExempt: func(k capture.Kind) bool { return k == capture.EnableForwarding },
	})
	rep, err := loop.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exec.Deferred != 1 || rep.Exec.Claimed != 1 || rep.Exec.Succeeded != 1 || len(asked) != 1 {
		t.Fatalf("%+v, ready asked %d times", rep.Exec, len(asked))
	}
	rows, err := st.Rows(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		want := capture.Approved
		if r.Kind == capture.EnableForwarding {
			want = capture.Succeeded
		}
		if r.State != want {
			t.Errorf("%s: %s, want %s", r.Kind, r.State, want)
		}
	}
	if ms := c.cloud.Mutations(); len(ms) != 1 || ms[0].Call != capture.EnableForwarding {
		t.Fatalf("mutations %+v", ms)
	}
}
