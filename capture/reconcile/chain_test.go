package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/bus"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

var addr = netip.MustParseAddr("10.0.0.10")

// chain is one node, "a", alone in pool "web", with its bbolt file and a
// provider that outlives restarts of the node.
type chain struct {
	t       *testing.T
	path    string
	drained bool
	cloud   *memory.Provider
	now     time.Time
}

func newChain(t *testing.T) *chain {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &chain{t: t, path: filepath.Join(t.TempDir(), "node-a.db"), now: t0}
	c.cloud = memory.New(memory.Options{NICs: []string{"eni-a", "eni-b"}, Clock: func() time.Time { return c.now }})
	return c
}

func (c *chain) pools() []capture.Pool {
	return []capture.Pool{{
		Name: "web", Provider: "aws", Group: "g1", Addresses: []netip.Addr{addr},
		Members: []capture.Member{{Node: "a", Priority: 1, Target: "eni-a", Drained: c.drained}},
	}}
}

func (c *chain) key() capture.Key {
	return capture.Key{Pool: "web", Address: addr, Domain: capture.CloudDomain("aws", "g1", "a")}
}

// step opens the node's file, runs the real loop until it has made one
// pass, stops it and closes the file: every step is a restart.
func (c *chain) step(pol policy.Policy, execute bool, hooks reconcile.Hooks) (reconcile.Report, error) {
	c.t.Helper()
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer st.Close()
	passes := make(chan struct {
		rep reconcile.Report
		err error
	}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: c.pools, Policy: pol, Execute: execute,
		Providers: map[string]provider.Provider{"aws": c.cloud},
		Clock:     func() time.Time { return c.now }, Interval: time.Hour, Hooks: hooks,
		OnPass: func(r reconcile.Report, err error) {
			select {
			case passes <- struct {
				rep reconcile.Report
				err error
			}{r, err}:
			default:
			}
		},
	})
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	p := <-passes
	cancel()
	<-done
	c.now = c.now.Add(time.Second)
	return p.rep, p.err
}

// dump renders the node's state for failure messages: holder, epoch and
// every row.
func (c *chain) dump() string {
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		return err.Error()
	}
	defer st.Close()
	var b strings.Builder
	ep, _ := st.Epochs()
	rec := ep[c.key()]
	fmt.Fprintf(&b, "holder %q at epoch %d; provider puts %s on %q\n", rec.Holder, rec.Epoch, addr, c.cloud.Holder(addr))
	rows, _ := st.Rows(store.Filter{})
	for _, r := range rows {
		fmt.Fprintf(&b, "  row %d %s %s epoch %d holder %s: %s %s\n", r.Seq, r.Kind, r.Target, r.Epoch, r.Holder, r.State, r.Reason)
	}
	ms, _ := st.Markers()
	for _, m := range ms {
		fmt.Fprintf(&b, "  marker %s\n", m.IdempotencyKey)
	}
	return b.String()
}

// counts reads the journal and markers after a step.
type counts struct {
	rows    map[string]int // "<kind> <state>" → count
	markers int
	held    map[capture.Key]capture.Held
}

func (c *chain) counts() counts {
	c.t.Helper()
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Rows(store.Filter{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := counts{rows: map[string]int{}}
	for _, r := range rows {
		out.rows[string(r.Kind)+" "+string(r.State)]++
	}
	ms, err := st.Markers()
	if err != nil {
		c.t.Fatal(err)
	}
	out.markers = len(ms)
	out.held, err = st.Held()
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func kinds(as []capture.Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s@%d", a.Kind, a.Epoch))
	}
	return strings.Join(parts, ",")
}

func (c *chain) expect(what string, got, want any) {
	c.t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.t.Fatalf("%s: got %v, want %v\n%s", what, got, want, c.dump())
	}
}

// The flaky test of the seed ADR, made deterministic: an address that is
// drained and then desired again gets a new epoch; its pending unassign is
// skipped by the gate, nothing is cancelled.
func TestServeChainMobilityCancelsPendingDeprovisionWhenDesiredAgain(t *testing.T) {
	c := newChain(t)
	deny := policy.Policy{}

	// (1) Active: assign and forwarding-enable imported and succeeded.
	rep, err := c.step(policy.AllowAll(100), true, reconcile.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	c.expect("step 1 plan", kinds(rep.Plan.Acquires), "assign-secondary-ip@1,ensure-forwarding-enabled@1")
	n := c.counts()
	c.expect("step 1 rows", n.rows, map[string]int{"assign-secondary-ip succeeded": 1, "ensure-forwarding-enabled succeeded": 1})
	c.expect("step 1 provider", c.cloud.Holder(addr), "eni-a")

	// (2) Drained: the release projection, two markers, one pending unassign.
	c.drained = true
	rep, err = c.step(deny, false, reconcile.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	c.expect("step 2 acquires", len(rep.Plan.Acquires), 0)
	c.expect("step 2 releases", kinds(rep.Plan.Releases), "unassign-secondary-ip@2,ensure-forwarding-disabled@2")
	n = c.counts()
	c.expect("step 2 markers", n.markers, 2)
	c.expect("step 2 pending unassigns", n.rows["unassign-secondary-ip pending"], 1)
	c.expect("step 2 pending forwarding-disables", n.rows["ensure-forwarding-disabled pending"], 1)

	// (3) Desired again: a new epoch, no release, no marker, the pending
	// unassign skipped.
	c.drained = false
	rep, err = c.step(deny, false, reconcile.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	c.expect("step 3 acquires", kinds(rep.Plan.Acquires), "assign-secondary-ip@3,ensure-forwarding-enabled@3")
	c.expect("step 3 releases", len(rep.Plan.Releases), 0)
	n = c.counts()
	c.expect("step 3 markers", n.markers, 0)
	c.expect("step 3 pending unassigns", n.rows["unassign-secondary-ip pending"], 0)
	c.expect("step 3 skipped unassigns", n.rows["unassign-secondary-ip skipped"], 1)
	c.expect("step 3 skipped forwarding-disables", n.rows["ensure-forwarding-disabled skipped"], 1)
	c.expect("step 3 provider", c.cloud.Holder(addr), "eni-a")
}

var errCrash = errors.New("crash")

// A release intent persisted as a marker survives a crash before import,
// is re-emitted by every pass until it executes, and is gone after.
func TestServeChainMobilityReemitsMarkerBackedUnassignUntilExecuted(t *testing.T) {
	c := newChain(t)
	if _, err := c.step(policy.AllowAll(100), true, reconcile.Hooks{}); err != nil {
		t.Fatal(err)
	}
	c.expect("active", c.cloud.Holder(addr), "eni-a")

	// Drain, and crash once the intent is persisted, before import.
	c.drained = true
	_, err := c.step(policy.Policy{}, false, reconcile.Hooks{AfterMarkers: func() error { return errCrash }})
	if !errors.Is(err, errCrash) {
		t.Fatalf("the pass did not stop at the crash point: %v", err)
	}
	n := c.counts()
	c.expect("markers after crash", n.markers, 2)
	c.expect("unassign rows after crash", n.rows["unassign-secondary-ip pending"], 0)

	// Restarted, without approval: re-emitted on every pass, imported once.
	for pass := range 3 {
		rep, err := c.step(policy.Policy{}, false, reconcile.Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		c.expect(fmt.Sprintf("pass %d releases", pass), kinds(rep.Plan.Releases), "unassign-secondary-ip@2,ensure-forwarding-disabled@2")
		c.expect(fmt.Sprintf("pass %d new markers", pass), len(rep.Plan.Markers), 0)
		n = c.counts()
		c.expect(fmt.Sprintf("pass %d markers", pass), n.markers, 2)
		c.expect(fmt.Sprintf("pass %d pending unassigns", pass), n.rows["unassign-secondary-ip pending"], 1)
	}

	// Approved and executed by the running loop: poll (bounded) until the
	// unassign has run, then assert exact counts.
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{})
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: c.pools, Policy: policy.AllowAll(100), Execute: true,
		Providers: map[string]provider.Provider{"aws": c.cloud}, Interval: 10 * time.Millisecond, Wake: wake,
		Clock: func() time.Time { return c.now },
	})
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for (c.cloud.Holder(addr) != "" || c.cloud.Forwarding("eni-a")) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	st.Close()
	n = c.counts()
	c.expect("provider after execution", c.cloud.Holder(addr), "")
	c.expect("markers after execution", n.markers, 0)
	c.expect("succeeded unassigns", n.rows["unassign-secondary-ip succeeded"], 1)
	c.expect("succeeded forwarding-disables", n.rows["ensure-forwarding-disabled succeeded"], 1)
	c.expect("pending unassigns", n.rows["unassign-secondary-ip pending"], 0)
	c.expect("held after execution", len(n.held), 0)
}

// The loop runs a pass when the event bus says something changed, without
// waiting for its tick.
func TestRunPassesOnBusEvents(t *testing.T) {
	c := newChain(t)
	st, err := store.Open(c.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events := bus.New[struct{}]()
	sub := events.Subscribe(1)
	passes := make(chan reconcile.Report, 10)
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: c.pools, Policy: policy.AllowAll(10), Execute: true,
		Providers: map[string]provider.Provider{"aws": c.cloud}, Interval: time.Hour, Wake: sub.C(),
		Clock:  func() time.Time { return c.now },
		OnPass: func(r reconcile.Report, err error) { passes <- r },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	first := <-passes
	if len(first.Plan.Acquires) != 2 || c.cloud.Holder(addr) != "eni-a" {
		t.Fatalf("first pass: %+v, provider %q", first.Plan, c.cloud.Holder(addr))
	}
	c.drained = true
	events.Publish(struct{}{})
	second := <-passes
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if len(second.Plan.Releases) != 2 || c.cloud.Holder(addr) != "" {
		t.Fatalf("the bus event's pass: %+v, provider %q", second.Plan, c.cloud.Holder(addr))
	}
}
