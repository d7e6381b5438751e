package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/placement"
	"github.com/ipfence/ipfence/capture/plan"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
	"github.com/ipfence/ipfence/internal/testonly/scenario"
)

// world is a scenario's cluster: a config of pools shared by every node,
// one bbolt file per node, one provider outliving them all, and a clock
// that moves only when told.
type world struct {
	t     *testing.T
	dir   string
	now   time.Time
	pools []capture.Pool
	cloud *memory.Provider
	nodes map[string]*node
}

type node struct {
	name string
	st   *store.Store
	// kept is the plan of the last "plan" command, for a later "import".
	kept *plan.Plan
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, dir: t.TempDir(), now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), nodes: map[string]*node{}}
	w.cloud = memory.New(memory.Options{NICs: []string{"eni-a", "eni-b", "eni-c"}, Clock: func() time.Time { return w.now }})
	t.Cleanup(func() {
		for _, n := range w.nodes {
			n.st.Close()
		}
	})
	return w
}

func (w *world) node(name string) *node {
	if n, ok := w.nodes[name]; ok {
		return n
	}
	st, err := store.Open(filepath.Join(w.dir, name+".db"), store.Options{RetryAfter: 30 * time.Second})
	if err != nil {
		w.t.Fatal(err)
	}
	n := &node{name: name, st: st}
	w.nodes[name] = n
	return n
}

func (w *world) loop(n *node, c *scenario.Case, hooks reconcile.Hooks) *reconcile.Loop {
	pol := policy.Policy{}
	if c.Has("approve") {
		pol = policy.AllowAll(100)
	}
	// seen=(b,c) feeds the epochs of those nodes in, as federation does.
	var seen func() map[capture.Key]capture.EpochRecord
	if peers := c.Values("seen"); len(peers) > 0 {
		seen = func() map[capture.Key]capture.EpochRecord {
			out := map[capture.Key]capture.EpochRecord{}
			for _, p := range peers {
				ep, err := w.node(p).st.Epochs()
				if err != nil {
					w.t.Fatal(err)
				}
				for k, r := range ep {
					if r.Epoch > out[k].Epoch {
						out[k] = r
					}
				}
			}
			return out
		}
	}
	return reconcile.New(reconcile.Config{
		Node: n.name, Store: n.st, Pools: func() []capture.Pool { return w.pools }, Seen: seen,
		Providers: map[string]provider.Provider{"aws": w.cloud}, Policy: pol, Execute: c.Has("execute"),
		RunningTimeout: time.Minute, Clock: func() time.Time { return w.now }, Hooks: hooks,
	})
}

var errCrash2 = errors.New("crashed here")

func showAction(a capture.Action) string {
	return fmt.Sprintf("%s %s %s holder=%s epoch=%d", a.Kind, a.Address, a.Target, a.Holder, a.Epoch)
}

func showPlan(b *strings.Builder, p *plan.Plan) {
	for _, a := range p.Acquires {
		fmt.Fprintf(b, "plan acquire: %s\n", showAction(a))
	}
	for _, a := range p.Releases {
		fmt.Fprintf(b, "plan release: %s\n", showAction(a))
	}
	if len(p.Acquires)+len(p.Releases) == 0 {
		b.WriteString("plan: nothing\n")
	}
	if len(p.Markers) > 0 || len(p.Drop) > 0 {
		fmt.Fprintf(b, "markers: +%d -%d\n", len(p.Markers), len(p.Drop))
	}
}

func showImport(b *strings.Builder, r store.ImportResult) {
	fmt.Fprintf(b, "import: imported=%d existing=%d stale=%d rearmed=%d\n", r.Imported, r.Existing, r.Stale, r.Rearmed)
	keys := make([]string, 0, len(r.Reasons))
	for k := range r.Reasons {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "  fenced at import: %s: %s\n", k, r.Reasons[k])
	}
}

func showExec(b *strings.Builder, r executor.Result) {
	fmt.Fprintf(b, "execute: claimed=%d succeeded=%d failed=%d stale=%d\n", r.Claimed, r.Succeeded, r.Failed, r.Stale)
}

func (w *world) run(t *testing.T, c *scenario.Case) string {
	var b strings.Builder
	n := func() *node { return w.node(c.Get("node", "a")) }
	switch c.Cmd {
	case "pool":
		p := capture.Pool{Name: c.Get("name", "web"), Provider: c.Get("provider", "aws"), Group: c.Get("group", "")}
		for _, a := range c.Values("addresses") {
			p.Addresses = append(p.Addresses, netip.MustParseAddr(a))
		}
		for _, line := range scenario.Lines(c.Input) {
			f := strings.Fields(line)
			m := capture.Member{Node: f[0]}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "priority":
					m.Priority, _ = strconv.Atoi(v)
				case "target":
					m.Target = v
				}
			}
			p.Members = append(p.Members, m)
		}
		w.pools = append(w.pools, p)
		fmt.Fprintf(&b, "pool %s: active %q\n", p.Name, placement.Active(&p))
	case "drain", "undrain", "stale", "fresh":
		for _, name := range c.Values("node") {
			for i := range w.pools {
				for j := range w.pools[i].Members {
					m := &w.pools[i].Members[j]
					if m.Node == name {
						switch c.Cmd {
						case "drain", "undrain":
							m.Drained = c.Cmd == "drain"
						default:
							m.Stale = c.Cmd == "stale"
						}
					}
				}
			}
		}
		for i := range w.pools {
			fmt.Fprintf(&b, "pool %s: active %q\n", w.pools[i].Name, placement.Active(&w.pools[i]))
		}
	case "reconcile":
		hooks := reconcile.Hooks{}
		switch c.Get("crash", "") {
		case "after-markers":
			hooks.AfterMarkers = func() error { return errCrash2 }
		case "after-claim":
			hooks.AfterClaim = func(capture.Row) error { return errCrash2 }
		case "after-call":
			hooks.AfterCall = func(capture.Row) error { return errCrash2 }
		}
		rep, err := w.loop(n(), c, hooks).PassAt(context.Background(), w.now)
		for _, k := range rep.Changed {
			r := rep.Epochs[k]
			fmt.Fprintf(&b, "epoch: %s %s → %d holder=%q\n", k.Pool, k.Address, r.Epoch, r.Holder)
		}
		showPlan(&b, &rep.Plan)
		if err != nil {
			fmt.Fprintf(&b, "pass ended: %v\n", err)
			break
		}
		showImport(&b, rep.Import)
		if len(rep.Swept) > 0 {
			fmt.Fprintf(&b, "swept: %s\n", strings.Join(rep.Swept, " "))
		}
		if len(rep.Requeued) > 0 {
			fmt.Fprintf(&b, "requeued: %s\n", strings.Join(rep.Requeued, " "))
		}
		if len(rep.Approved) > 0 {
			fmt.Fprintf(&b, "approved: %d\n", len(rep.Approved))
		}
		if c.Has("execute") {
			showExec(&b, rep.Exec)
		}
	case "plan":
		// A plan computed now and imported later: what a node that stalls
		// between the two does.
		nd := n()
		held, _ := nd.st.Held()
		markers, _ := nd.st.Markers()
		epochs, _, err := nd.st.ReconcileEpochs(placement.Desired(w.pools, nd.name, nil, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := plan.Compute(plan.Input{Node: nd.name, Pools: w.pools, Epochs: epochs, Held: held, Markers: markers})
		nd.kept = &p
		showPlan(&b, &p)
	case "import":
		nd := n()
		r, err := nd.st.Import(nd.kept.Actions(), w.now)
		if err != nil {
			t.Fatal(err)
		}
		showImport(&b, r)
	case "approve":
		nd := n()
		rows, _ := nd.st.Rows(store.Filter{State: capture.Pending})
		for _, r := range rows {
			if err := nd.st.Approve(r.IdempotencyKey, "operator"); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "approved: %d\n", len(rows))
	case "execute":
		nd := n()
		ex := &executor.Executor{Store: nd.st, Providers: map[string]provider.Provider{"aws": w.cloud}}
		if c.Get("crash", "") == "after-claim" {
			ex.AfterClaim = func(capture.Row) error { return errCrash2 }
		}
		r, err := ex.Run(context.Background(), w.now, 0)
		showExec(&b, r)
		if err != nil {
			fmt.Fprintf(&b, "run ended: %v\n", err)
		}
	case "observe":
		nd := n()
		from := w.node(c.Get("from", ""))
		seen, _ := from.st.Epochs()
		changed, err := nd.st.ObserveEpochs(seen)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(changed, capture.Key.Compare)
		ep, _ := nd.st.Epochs()
		for _, k := range changed {
			fmt.Fprintf(&b, "adopted: %s %s epoch=%d holder=%q\n", k.Pool, k.Address, ep[k].Epoch, ep[k].Holder)
		}
		if len(changed) == 0 {
			b.WriteString("adopted: nothing\n")
		}
	case "rows":
		rows, err := n().st.Rows(store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			fmt.Fprintf(&b, "%d %s %s", r.Seq, showAction(r.Action), r.State)
			if r.Reason != "" {
				fmt.Fprintf(&b, " (%s)", r.Reason)
			}
			b.WriteString("\n")
		}
		if len(rows) == 0 {
			b.WriteString("no rows\n")
		}
	case "markers":
		ms, _ := n().st.Markers()
		for _, m := range ms {
			fmt.Fprintf(&b, "marker %s\n", m.IdempotencyKey)
		}
		if len(ms) == 0 {
			b.WriteString("no markers\n")
		}
	case "held":
		held, _ := n().st.Held()
		keys := make([]capture.Key, 0, len(held))
		for k := range held {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, capture.Key.Compare)
		for _, k := range keys {
			how := "held"
			if !held[k].Confirmed {
				how = "maybe held"
			}
			fmt.Fprintf(&b, "%s %s %s on %s since epoch %d\n", how, k.Pool, k.Address, held[k].Target, held[k].Epoch)
		}
		if len(keys) == 0 {
			b.WriteString("holds nothing\n")
		}
	case "restart":
		nd := n()
		if err := nd.st.Close(); err != nil {
			t.Fatal(err)
		}
		delete(w.nodes, nd.name)
		w.node(nd.name)
		b.WriteString("restarted\n")
	case "provider":
		for _, p := range w.pools {
			for _, a := range p.Addresses {
				fmt.Fprintf(&b, "%s on %q\n", a, w.cloud.Holder(a))
			}
		}
		for _, nic := range []string{"eni-a", "eni-b", "eni-c"} {
			fmt.Fprintf(&b, "%s forwarding %v\n", nic, w.cloud.Forwarding(nic))
		}
	case "mutations":
		for _, m := range w.cloud.Mutations() {
			fmt.Fprintf(&b, "%s %s %s epoch=%d key=%s", m.Call, m.Address, m.NIC, m.Epoch, m.IdempotencyKey)
			if m.From != "" {
				fmt.Fprintf(&b, " from=%s", m.From)
			}
			b.WriteString("\n")
		}
	case "tick":
		d, err := time.ParseDuration(c.Get("by", "1s"))
		if err != nil {
			t.Fatal(err)
		}
		w.now = w.now.Add(d)
		fmt.Fprintf(&b, "now +%s\n", d)
	default:
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	return b.String()
}

// TestScenarios runs the scenario files in testdata: drain, desired again,
// move back, release and capture again, zombies fenced at import and at
// execute, and crashes between steps.
func TestScenarios(t *testing.T) {
	scenario.Walk(t, "testdata", func(t *testing.T, path string) {
		w := newWorld(t)
		scenario.Run(t, path, w.run)
	})
}
