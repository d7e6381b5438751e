package capturesuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/jepsen/capturesuite/ownermodel"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

const sec = int64(time.Second)

// rec builds a record entry at t seconds on the history's clock (the run's
// StartMono is 1000s).
func rec(t float64, call, nic, addr string, epoch uint64, from string) mutationRecord {
	return mutationRecord{Mono: 1000*sec + int64(t*float64(sec)), Call: call, NIC: nic, Address: addr, Epoch: epoch, From: from}
}

func run(t *testing.T, events []history.Event) *checker.Run {
	t.Helper()
	for i := range events {
		events[i].Index = int64(i)
	}
	r, err := checker.NewRun("capture", events, "", 1000*sec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSingleHolder(t *testing.T) {
	ok := &collected{mutations: []mutationRecord{
		rec(1, "assign-secondary-ip", "eni-n1", "a", 1, ""),
		rec(2, "assign-secondary-ip", "eni-n2", "a", 2, "eni-n1"),
		rec(3, "unassign-secondary-ip", "eni-n2", "a", 3, ""),
	}}
	res := singleHolder(ok).Check(context.Background(), run(t, nil))
	if res.Valid != linear.True || res.Fields["dual_holder_ms"] != 0.0 {
		t.Fatalf("%+v", res)
	}
	// A provider that put a on n2 without taking it off n1 (a broken
	// simulator or driver): two holders from 2s until n1's unassign at 3.5s.
	bad := &collected{mutations: []mutationRecord{
		rec(1, "assign-secondary-ip", "eni-n1", "a", 1, ""),
		rec(2, "assign-secondary-ip", "eni-n2", "a", 2, ""),
		rec(3.5, "unassign-secondary-ip", "eni-n1", "a", 2, ""),
		rec(4, "assign-secondary-ip", "eni-n3", "b", 1, ""),
		rec(5, "assign-secondary-ip", "eni-n1", "b", 1, ""),
	}}
	res = singleHolder(bad).Check(context.Background(), run(t, nil))
	// b is on two NICs from 5s to the end of the record (5s): 0 ms more.
	if res.Valid != linear.False || res.Fields["dual_holder_ms"] != 1500.0 || res.Fields["dual_holder_episodes"] != 2 {
		t.Fatalf("%+v", res)
	}
}

func TestFence(t *testing.T) {
	a, b := "10.0.1.1", "10.0.1.2"
	col := &collected{mutations: []mutationRecord{
		rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
		rec(2, "assign-secondary-ip", "eni-n2", a, 3, "eni-n1"),
		rec(2.5, "ensure-forwarding-enabled", "eni-n2", a, 3, ""),
		rec(3, "unassign-secondary-ip", "eni-n2", a, 2, ""), // stale: strips the holder
		rec(4, "assign-secondary-ip", "eni-n1", b, 7, ""),
		rec(5, "ensure-forwarding-disabled", "eni-n3", b, 6, ""), // stale, on a former holder
		rec(6, "ensure-forwarding-disabled", "eni-n1", b, 6, ""), // stale, on the holder
	}}
	res := fence(col).Check(context.Background(), run(t, nil))
	ex := res.Fields["examples"].([]string)
	if res.Valid != linear.False || res.Fields["stale_actions_executed"] != 2 || res.Fields["stale_forwarding_on_former_holders"] != 1 || len(ex) != 2 ||
		ex[0] != "mutation 3 at 3.000s: unassign-secondary-ip 10.0.1.1 on eni-n2 at epoch 2, after epoch 3" ||
		ex[1] != "mutation 6 at 6.000s: ensure-forwarding-disabled 10.0.1.2 on eni-n1 at epoch 6, after epoch 7" {
		t.Fatalf("%+v", res)
	}
	// Only the former holder's clean-up: harmless, valid.
	col.mutations = col.mutations[:3]
	col.mutations = append(col.mutations, rec(4, "assign-secondary-ip", "eni-n1", b, 7, ""), rec(5, "ensure-forwarding-disabled", "eni-n3", b, 6, ""))
	if res := fence(col).Check(context.Background(), run(t, nil)); res.Valid != linear.True || res.Fields["stale_actions_executed"] != 0 || res.Fields["stale_forwarding_on_former_holders"] != 1 {
		t.Fatalf("%+v", res)
	}
}

// An epoch line that wrapped: epoch 0 after 3 (which provider.StaleMutations
// leaves unjudged, as a change made outside any journal), and an epoch
// above plan.MaxEpoch.
func TestFenceWrappedEpochs(t *testing.T) {
	a := "10.0.1.1"
	col := &collected{mutations: []mutationRecord{
		rec(1, "assign-secondary-ip", "eni-n1", a, 3, ""),
		rec(2, "assign-secondary-ip", "eni-n2", a, 1<<64-1, "eni-n1"),
		rec(3, "unassign-secondary-ip", "eni-n2", a, 0, ""),
	}}
	res := fence(col).Check(context.Background(), run(t, nil))
	f := res.Fields["findings"].([]string)
	if res.Valid != linear.False || res.Fields["stale_actions_executed"] != 1 || res.Fields["epochs_above_bound"] != 1 || len(f) != 2 ||
		f[0] != "mutation 2 at 3.000s: unassign-secondary-ip 10.0.1.1 on eni-n2 at epoch 0, which no journal makes (a wrapped epoch), after epoch 18446744073709551615" ||
		f[1] != "mutation 1 at 2.000s: assign-secondary-ip 10.0.1.1 on eni-n2 at epoch 18446744073709551615, above the bound 9223372036854775807" {
		t.Fatalf("%+v", res)
	}
}

func nem(f string, typ history.Type, v history.Value, t float64) history.Event {
	return history.Event{Process: history.Nemesis, Type: typ, F: f, Value: v, Time: int64(t * float64(sec))}
}

func TestFailover(t *testing.T) {
	events := []history.Event{
		nem("start-kill", history.Invoke, map[string]any{"node": "n1"}, 10), nem("start-kill", history.Info, "n1", 10.01),
		nem("stop-kill", history.Invoke, nil, 14), nem("stop-kill", history.Info, "restarted n1", 14.1),
		// A pause of n2 that heals before anyone gives up on it.
		nem("start-pause", history.Invoke, map[string]any{"node": "n2"}, 20), nem("start-pause", history.Info, "n2", 20),
		nem("stop-pause", history.Invoke, nil, 20.3), nem("stop-pause", history.Info, "resumed n2", 20.3),
		// Halves: not a fault that names a holder to take out.
		nem("start-partition", history.Invoke, map[string]any{"shape": "halves"}, 30), nem("start-partition", history.Info, "halves", 30),
		nem("stop-partition", history.Invoke, nil, 34), nem("stop-partition", history.Info, "healed", 34),
	}
	col := &collected{mutations: []mutationRecord{
		rec(1, "assign-secondary-ip", "eni-n1", "a", 1, ""),
		rec(1, "assign-secondary-ip", "eni-n1", "b", 1, ""),
		rec(10.7, "assign-secondary-ip", "eni-n2", "a", 2, "eni-n1"),
		rec(10.9, "assign-secondary-ip", "eni-n2", "b", 2, "eni-n1"),
		rec(31, "assign-secondary-ip", "eni-n3", "a", 3, "eni-n2"),
	}}
	res := failover(col).Check(context.Background(), run(t, events))
	if res.Fields["failovers"] != 2 || res.Fields["healed_before_failover"] != 2 ||
		fmt.Sprintf("%.2f %.2f %.2f", res.Fields["median_s"], res.Fields["p99_s"], res.Fields["max_s"]) != "0.70 0.90 0.90" {
		t.Fatalf("%+v", res)
	}
}

func TestConvergence(t *testing.T) {
	events := []history.Event{
		nem("stop-kill", history.Invoke, nil, 50), nem("stop-kill", history.Info, "restarted n1", 50.5),
	}
	col := &collected{converged: true, bound: 30 * time.Second, mutations: []mutationRecord{
		rec(40, "assign-secondary-ip", "eni-n2", "a", 2, "eni-n1"),
		rec(51.25, "assign-secondary-ip", "eni-n1", "a", 3, "eni-n2"),
		rec(52, "ensure-forwarding-disabled", "eni-n2", "a", 3, ""),
	}}
	res := convergence(col).Check(context.Background(), run(t, events))
	if res.Valid != linear.True || res.Fields["convergence_s"] != 0.75 || res.Fields["heal_s"] != 50.5 {
		t.Fatalf("%+v", res)
	}
	col.converged = false
	if res := convergence(col).Check(context.Background(), run(t, events)); res.Valid != linear.False {
		t.Fatalf("%+v", res)
	}
}

// The merged history puts each mutation after every client event recorded
// by its time, and the capture-owner model judges it.
func TestOwnerHistory(t *testing.T) {
	read := func(p history.Process, typ history.Type, holder any, t float64) history.Event {
		v := map[string]history.Value{"address": "a"}
		if typ == history.OK {
			v["holder"] = holder
		}
		return history.Event{Process: p, Type: typ, F: "read", Value: v, Time: int64(t * float64(sec))}
	}
	events := []history.Event{
		read(0, history.Invoke, nil, 0.5), read(0, history.OK, nil, 0.6),
		read(1, history.Invoke, nil, 1.5), read(1, history.OK, "eni-n1", 2.5),
		{Process: 2, Type: history.Invoke, F: "drain", Value: map[string]history.Value{"node": "n1"}, Time: 3 * sec},
		{Process: 2, Type: history.OK, F: "drain", Value: map[string]history.Value{"node": "n1"}, Time: 3 * sec},
	}
	col := &collected{mutations: []mutationRecord{rec(2, "assign-secondary-ip", "eni-n1", "a", 1, "")}}
	merged, err := ownerHistory(col)(run(t, slices.Clone(events)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range merged {
		got = append(got, fmt.Sprintf("%d %s %s", e.Process, e.Type, e.F))
	}
	want := "0 invoke read|0 ok read|1 invoke read|1099511627776 invoke assign|1099511627776 ok assign|1 ok read"
	if strings.Join(got, "|") != want {
		t.Fatalf("merged %s", strings.Join(got, "|"))
	}
	lin := checker.Linearizable(checker.LinearOptions{Model: ownermodel.Model{}, History: ownerHistory(col)})
	if res := lin.Check(context.Background(), run(t, slices.Clone(events))); res.Valid != linear.True {
		t.Fatalf("%+v", res)
	}
	// The same reads, with the mutation a second earlier: the first read
	// missed a completed assign.
	col.mutations[0] = rec(0.2, "assign-secondary-ip", "eni-n1", "a", 1, "")
	if res := lin.Check(context.Background(), run(t, slices.Clone(events))); res.Valid != linear.False {
		t.Fatalf("%+v", res)
	}
}

// flaps drains a node and undrains the same node flapBack later, every
// flapEvery, seeded.
func TestFlaps(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	sched := func(seed uint64) []string {
		var out []string
		for _, e := range gen.Simulate(gen.TimeLimit(13500*time.Millisecond, gen.Clients(flaps(seed, nodes))), 2,
			func(gen.Op) time.Duration { return 5 * time.Millisecond }, time.Minute) {
			if e.Kind == gen.Invoked {
				out = append(out, fmt.Sprintf("%v %s %v", e.Time, e.F, e.Value.(map[string]any)["node"]))
			}
		}
		return out
	}
	a := sched(1)
	if len(a) != 8 || !slices.Equal(a, sched(1)) || slices.Equal(a, sched(5)) {
		t.Fatalf("schedule %v", a)
	}
	for i := 0; i < len(a); i += 2 {
		d, u := strings.Fields(a[i]), strings.Fields(a[i+1])
		if d[1] != "drain" || u[1] != "undrain" || d[2] != u[2] {
			t.Fatalf("pair %d: %v / %v", i/2, d, u)
		}
		dt, _ := time.ParseDuration(d[0])
		ut, _ := time.ParseDuration(u[0])
		if ut-dt != flapBack || dt != time.Duration(i/2+1)*flapEvery {
			t.Fatalf("pair %d at %v and %v", i/2, dt, ut)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Binary: "x", Nodes: 1}, "--nodes must be from 2 to 9, not 1"},
		{Options{Binary: "x", Concurrency: -1}, "--concurrency must be from 1 to 1000, not -1"},
		{Options{Binary: "x", TimeLimit: time.Second}, "--time-limit must be at least 10s"},
		{Options{Binary: "x", Nemesis: []string{"meteor"}}, `--nemesis: unknown fault "meteor"; valid: partition,pause,kill,clock,provider`},
		{Options{}, "no ipfence binary"},
	}
	for _, c := range cases {
		_, err := Run(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// A process that dies before it is ready: the error carries its exit
// status and the last lines it wrote, not just the log's name.
func TestStartFailureCarriesItsError(t *testing.T) {
	logf, err := os.Create(filepath.Join(t.TempDir(), "n2.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("/bin/sh", "-c", "echo 'starting' >&2; echo 'listen tcp 127.0.0.1:40001: bind: address already in use' >&2; exit 4")
	_, err = startListening(context.Background(), cmd, "n2", logf, nil)
	want := "n2 did not start, exit status 4: starting | listen tcp 127.0.0.1:40001: bind: address already in use; see " + logf.Name()
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

// Once a read has seen the holder, the flaps drain that node: only a
// holder's drain plans the release the fence must stop.
func TestFlapsDrainTheHolder(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	var g gen.Generator = flaps(1, nodes)
	ask := func(at time.Duration) gen.Op {
		t.Helper()
		op, next, st := g.Next(gen.Context{Time: at, Threads: 2, Free: []int{0, 1}})
		g = next
		if st != gen.Ready && op.F == "" {
			op, next, st = g.Next(gen.Context{Time: op.Time, Threads: 2, Free: []int{0, 1}})
			g = next
		}
		if st != gen.Ready {
			t.Fatalf("at %v: %v", at, st)
		}
		return op
	}
	g.Next(gen.Context{Time: 0, Threads: 2, Free: []int{0, 1}})
	read := func(holder any) {
		g = g.Update(gen.Context{}, gen.Event{Kind: gen.Completed, F: "read", Value: map[string]any{"address": "10.0.1.10", "holder": holder}})
	}
	for _, c := range []struct {
		holder any
		want   string
	}{{"eni-n3", "n3"}, {"eni-n2", "n2"}, {nil, "n2"}, {"eni-n1", "n1"}} {
		read(c.holder)
		at := time.Duration(0)
		var drain gen.Op
		for drain.F != "drain" {
			drain = ask(at)
			at = drain.Time
		}
		if n := drain.Value.(map[string]any)["node"]; n != c.want {
			t.Fatalf("after a read found %v: drained %v, want %s", c.holder, n, c.want)
		}
		if undo := ask(at); undo.F != "undrain" || undo.Value.(map[string]any)["node"] != c.want {
			t.Fatalf("then %v %v", undo.F, undo.Value)
		}
	}
}
