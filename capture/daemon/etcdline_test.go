package daemon_test

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// Issue 18: the epoch line in etcd. Three real nodes whose pool is on the
// etcd line: etcd holds each address's record at the epoch the provider
// last applied, for the holder that has it; a drain and a SIGKILL of the
// holder move the line in etcd and the addresses with it, fenced; while
// etcd is stopped no node moves anything, even when asked to; once it is
// back the move is made.
func TestClusterEtcdLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	url, signal := testenv.Etcd(t)
	c := startCluster(t, settings{nodes: 3, addresses: 3, etcd: url})
	c.waitAllOn("eni-n1", generous)
	line := &etcdline.Client{Endpoints: []string{url}, Prefix: "/test/", Node: "test"}
	// etcd's records: each address at the highest epoch the provider
	// applied for it, held by the node whose NIC has it.
	agree := func(holder string) bool {
		snap, err := line.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		high := map[string]capture.Epoch{}
		for _, m := range c.mutations() {
			high[m.Address.String()] = max(high[m.Address.String()], m.Epoch)
		}
		if len(snap.Records) != len(c.addrs) {
			return false
		}
		for k, r := range snap.Records {
			if r.Holder != holder || r.Epoch != high[k.Address.String()] {
				return false
			}
		}
		return true
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(generous); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				snap, _ := line.Snapshot(context.Background())
				t.Fatalf("%s: etcd holds %+v; provider %v", what, snap.Records, c.holders())
			}
		}
	}
	waitFor("etcd holds n1's records", func() bool { return agree("n1") })

	c.intent("n2", "drain", "n1")
	c.waitAllOn("eni-n2", generous)
	waitFor("etcd holds n2's records after the drain", func() bool { return agree("n2") })

	c.signal("n2", syscall.SIGKILL)
	c.waitAllOn("eni-n3", generous)
	waitFor("etcd holds n3's records after n2's death", func() bool { return agree("n3") })

	// etcd stopped: the undrain of n1, which prefers it, moves nothing.
	// Once n1's session has run out, it says so; the undrain then moves
	// nothing, over many passes.
	// n3's clean-ups and forwarding may still be on their way: the
	// provider's record must be still for a second first.
	for n, still := len(c.mutations()), time.Now(); time.Since(still) < time.Second; time.Sleep(50 * time.Millisecond) {
		if m := len(c.mutations()); m != n {
			n, still = m, time.Now()
		}
	}
	signal(syscall.SIGSTOP)
	before := len(c.mutations())
	waitFor("n1 with etcd stopped says why it waits", func() bool { return strings.Contains(c.status("n1").Passive, "etcd") })
	c.intent("n3", "undrain", "n1")
	time.Sleep(10 * reconcile)
	if ms := c.mutations(); len(ms) != before {
		t.Fatalf("with etcd stopped the provider saw %d new mutations: %+v", len(ms)-before, ms[before:])
	}
	signal(syscall.SIGCONT)
	c.waitAllOn("eni-n1", generous)
	waitFor("etcd holds n1's records once back", func() bool { return agree("n1") })
	checkFence(t, c.mutations())

	// Every call a node made carried, as its token, the revision at which
	// etcd wrote the record it acted at (for an acquire, naming the node
	// that made it), and n1's journal rows keep the revision.
	snap, err := line.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[netip.Addr]capture.Key{}
	for k := range snap.Records {
		keys[k.Address] = k
	}
	tokens := 0
	for i, m := range c.mutations() {
		if m.Epoch == 0 {
			continue
		}
		r, err := line.GetAt(context.Background(), keys[m.Address], m.LineRevision)
		acquire := m.Call == capture.Assign || m.Call == capture.EnableForwarding
		if m.LineRevision <= 0 || err != nil || r.Rev != m.LineRevision || r.Epoch != m.Epoch || (acquire && "eni-"+r.Holder != m.NIC) {
			t.Errorf("mutation %d %+v: etcd at its revision held %+v (%v)", i, m, r, err)
		}
		tokens++
	}
	var rows []capture.Row
	if code := c.api("n1", http.MethodGet, "/v1/actions?state=succeeded", nil, &rows); code != http.StatusOK || len(rows) == 0 {
		t.Fatalf("n1's succeeded actions: %d, %d rows", code, len(rows))
	}
	for _, r := range rows {
		if r.LineRevision <= 0 {
			t.Errorf("n1's journal row %s keeps no line revision", r.IdempotencyKey)
		}
	}
	t.Logf("%d node mutations carried a line revision etcd wrote; n1's %d succeeded rows keep theirs", tokens, len(rows))
}
