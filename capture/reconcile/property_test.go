package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/placement"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

// cluster is three nodes sharing one pool, one provider, and one epoch
// line: every pass adopts the others' records first, as federation would.
type cluster struct {
	t      *rapid.T
	dir    string
	now    time.Time
	nodes  []string
	stores map[string]*store.Store
	pool   capture.Pool
	cloud  *memory.Provider
	// maxEpoch is the highest epoch each node has recorded per key: it
	// must never go down.
	maxEpoch map[string]map[capture.Key]capture.Epoch
}

func newCluster(t *rapid.T, dir string) *cluster {
	c := &cluster{t: t, dir: dir, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		nodes: []string{"a", "b", "c"}, stores: map[string]*store.Store{}, maxEpoch: map[string]map[capture.Key]capture.Epoch{}}
	c.pool = capture.Pool{Name: "web", Provider: "aws", Group: "g1",
		Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")}}
	for i, n := range c.nodes {
		c.pool.Members = append(c.pool.Members, capture.Member{Node: n, Priority: i + 1, Target: "eni-" + n})
		c.open(n)
		c.maxEpoch[n] = map[capture.Key]capture.Epoch{}
	}
	c.cloud = memory.New(memory.Options{NICs: []string{"eni-a", "eni-b", "eni-c"}, Clock: func() time.Time { return c.now }})
	return c
}

func (c *cluster) open(n string) {
	st, err := store.Open(filepath.Join(c.dir, n+".db"), store.Options{NoSync: true, RetryAfter: time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.stores[n] = st
}

func (c *cluster) close() {
	for _, st := range c.stores {
		st.Close()
	}
}

func (c *cluster) pools() []capture.Pool {
	p := c.pool
	p.Members = append([]capture.Member(nil), c.pool.Members...)
	return []capture.Pool{p}
}

func (c *cluster) seen(self string) map[capture.Key]capture.EpochRecord {
	out := map[capture.Key]capture.EpochRecord{}
	for _, n := range c.nodes {
		if n == self {
			continue
		}
		ep, err := c.stores[n].Epochs()
		if err != nil {
			c.t.Fatal(err)
		}
		for k, r := range ep {
			if r.Epoch > out[k].Epoch {
				out[k] = r
			}
		}
	}
	return out
}

func (c *cluster) pass(n string, approve, execute bool, hooks reconcile.Hooks) {
	pol := policy.Policy{}
	if approve {
		pol = policy.AllowAll(100)
	}
	loop := reconcile.New(reconcile.Config{
		Node: n, Store: c.stores[n], Pools: c.pools, Seen: func() map[capture.Key]capture.EpochRecord { return c.seen(n) },
		Providers: map[string]provider.Provider{"aws": c.cloud}, Policy: pol, Execute: execute,
		RunningTimeout: time.Minute, Hooks: hooks,
	})
	if _, err := loop.PassAt(context.Background(), c.now); err != nil && !errors.Is(err, errCrash) {
		c.t.Fatalf("pass on %s: %v", n, err)
	}
	c.now = c.now.Add(time.Second)
	c.checkEpochs(n)
}

// checkEpochs: no epoch went down on node n.
func (c *cluster) checkEpochs(n string) {
	ep, err := c.stores[n].Epochs()
	if err != nil {
		c.t.Fatal(err)
	}
	for k, r := range ep {
		if r.Epoch < c.maxEpoch[n][k] {
			c.t.Fatalf("node %s: epoch of %s went down from %d to %d", n, k, c.maxEpoch[n][k], r.Epoch)
		}
		c.maxEpoch[n][k] = r.Epoch
	}
}

// checkFence: no provider mutation carries an epoch lower than one already
// applied for its capture key.
func (c *cluster) checkFence() {
	high := map[netip.Addr]capture.Epoch{}
	for i, m := range c.cloud.Mutations() {
		if m.Epoch < high[m.Address] {
			c.t.Fatalf("mutation %d (%s %s on %s) carries epoch %d after epoch %d was applied", i, m.Call, m.Address, m.NIC, m.Epoch, high[m.Address])
		}
		high[m.Address] = m.Epoch
	}
}

func (c *cluster) member(n string) *capture.Member {
	for i := range c.pool.Members {
		if c.pool.Members[i].Node == n {
			return &c.pool.Members[i]
		}
	}
	return nil
}

// Random desire changes, drains, restarts, crashes and executions on three
// nodes: once the loops settle, each address is on its desired holder's NIC
// only, and no action ever executed with an epoch lower than one executed
// before it for the same key.
func TestPropertySettlesOnDesiredHolderAndNeverExecutesStale(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newCluster(t, tempDir(t))
		defer c.close()
		node := rapid.SampledFrom(c.nodes)
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 7).Draw(t, "op"); op {
			case 0:
				m := c.member(node.Draw(t, "drain"))
				m.Drained = !m.Drained
			case 1:
				m := c.member(node.Draw(t, "liveness"))
				m.Stale = !m.Stale
			case 2, 3, 4:
				c.pass(node.Draw(t, "pass"), rapid.Bool().Draw(t, "approve"), rapid.Bool().Draw(t, "execute"), reconcile.Hooks{})
			case 5:
				n := node.Draw(t, "restart")
				c.stores[n].Close()
				c.open(n)
			case 6:
				crash := func(capture.Row) error { return errCrash }
				hooks := []reconcile.Hooks{
					{AfterMarkers: func() error { return errCrash }},
					{AfterClaim: crash},
					{AfterCall: crash},
				}[rapid.IntRange(0, 2).Draw(t, "crash point")]
				n := node.Draw(t, "crash")
				c.pass(n, true, true, hooks)
				c.stores[n].Close()
				c.open(n)
			case 7:
				c.now = c.now.Add(time.Duration(rapid.IntRange(1, 120).Draw(t, "tick")) * time.Second)
			}
			c.checkFence()
		}

		// Settle: every node passes with approval and execution, with time
		// moving past the running timeout, until nothing is left to do.
		for round := range 6 {
			for _, n := range c.nodes {
				c.pass(n, true, true, reconcile.Hooks{})
			}
			c.now = c.now.Add(2 * time.Minute)
			_ = round
		}
		c.checkFence()
		want := ""
		if h := placement.Active(&c.pool); h != "" {
			want = c.member(h).Target
		}
		for _, a := range c.pool.Addresses {
			if got := c.cloud.Holder(a); got != want {
				t.Fatalf("after settling %s is on %q, want %q (members %+v)", a, got, want, c.pool.Members)
			}
		}
		for _, n := range c.nodes {
			for _, st := range []capture.State{capture.Pending, capture.Approved, capture.Running} {
				rows, _ := c.stores[n].Rows(store.Filter{State: st})
				if len(rows) > 0 {
					t.Fatalf("after settling node %s has %d %s rows: %+v", n, len(rows), st, rows[0])
				}
			}
		}
	})
}

// tempDir makes a folder that rapid's T can use (it has no TempDir).
func tempDir(t *rapid.T) string {
	dir, err := osMkdirTemp()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { osRemoveAll(dir) })
	return dir
}

var _ = fmt.Sprint

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "ipfence-property-") }
func osRemoveAll(dir string)       { os.RemoveAll(dir) }
