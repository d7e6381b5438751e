package capturesuite

import (
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// Once a read has found the holder, a kill, a pause and an isolating
// partition take out that node; a partition of another shape and the
// faults that do not take a node out keep what the seed drew; before any
// read, the drawn node stands.
func TestFaultsTakeOutTheHolder(t *testing.T) {
	fixed := func(v map[string]any) nemesis.Choose { return func(*gen.Rand) any { return v } }
	for _, c := range []struct {
		kind  string
		value map[string]any
		read  any // the holder the read found; nil: no read
		want  map[string]any
	}{
		{"kill", map[string]any{"node": "n1"}, nil, map[string]any{"node": "n1"}},
		{"kill", map[string]any{"node": "n1"}, "eni-n3", map[string]any{"node": "n3"}},
		{"pause", map[string]any{"node": "n2"}, "eni-n1", map[string]any{"node": "n1"}},
		{"partition", map[string]any{"shape": "isolate", "node": "n1"}, "eni-n2", map[string]any{"shape": "isolate", "node": "n2"}},
		{"partition", map[string]any{"shape": "random-halves", "seed": int64(7)}, "eni-n2", map[string]any{"shape": "random-halves", "seed": int64(7)}},
		{"wipe", map[string]any{"node": "n1"}, "eni-n2", map[string]any{"node": "n1"}},
		// A read that found no holder names none.
		{"kill", map[string]any{"node": "n1"}, "", map[string]any{"node": "n1"}},
		// An etcd member drawn stands: the fault is there to take it out.
		{"kill", map[string]any{"node": "e2"}, "eni-n3", map[string]any{"node": "e2"}},
		{"pause", map[string]any{"node": "e1"}, "eni-n3", map[string]any{"node": "e1"}},
		{"partition", map[string]any{"shape": "isolate", "node": "e3"}, "eni-n1", map[string]any{"shape": "isolate", "node": "e3"}},
	} {
		drawn := c.value
		g := targetHolder(gen.Nemesis(nemesis.Schedule(1, nemesis.Choices{Kinds: []string{c.kind}, Values: map[string]nemesis.Choose{c.kind: fixed(drawn)}}, time.Second, time.Second)), "e1", "e2", "e3")
		ctx := gen.Context{Time: 0, Threads: 2, Free: []int{gen.NemesisThread, 0, 1}}
		_, g, _ = g.Next(ctx)
		if c.read != nil {
			g = g.Update(ctx, gen.Event{Kind: gen.Completed, Thread: 0, F: "read", Value: map[string]any{"address": "10.0.1.10", "holder": c.read}})
		}
		ctx.Time = time.Second
		op, _, st := g.Next(ctx)
		if st != gen.Ready || op.F != "start-"+c.kind {
			t.Fatalf("%s after a read of %v: %v %s", c.kind, c.read, st, op.F)
		}
		got, _ := op.Value.(map[string]any)
		if len(got) != len(c.want) {
			t.Fatalf("%s after a read of %v: %v, want %v", c.kind, c.read, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Fatalf("%s after a read of %v: %v, want %v", c.kind, c.read, got, c.want)
			}
		}
		if drawn["node"] != c.value["node"] {
			t.Fatalf("the drawn value was changed in place: %v", drawn)
		}
	}
}

// A flap does not drain the node a kill, pause or isolation took out
// while the fault runs: it waits, and drains the holder the reads find
// next, or the same node once the fault has stopped.
func TestFlapsSpareATakenOutNode(t *testing.T) {
	ctx := func(at time.Duration) gen.Context {
		return gen.Context{Time: at, Threads: 2, Free: []int{gen.NemesisThread, 0, 1}}
	}
	read := func(g gen.Generator, holder string) gen.Generator {
		return g.Update(ctx(0), gen.Event{Kind: gen.Completed, Thread: 0, F: "read", Value: map[string]any{"address": "10.0.1.10", "holder": holder}})
	}
	nem := func(g gen.Generator, f string, v any) gen.Generator {
		return g.Update(ctx(0), gen.Event{Kind: gen.Invoked, Thread: gen.NemesisThread, F: f, Value: v})
	}
	for _, c := range []struct {
		name  string
		fault string
		value map[string]any
		then  func(gen.Generator) gen.Generator
		want  string
	}{
		{"kill, then the reads find n3", "start-kill", map[string]any{"node": "n2"}, func(g gen.Generator) gen.Generator { return read(g, "eni-n3") }, "n3"},
		{"pause, then it stops", "start-pause", map[string]any{"node": "n2"}, func(g gen.Generator) gen.Generator { return nem(g, "stop-pause", nil) }, "n2"},
		{"isolation, then the reads find n1", "start-partition", map[string]any{"shape": "isolate", "node": "n2"}, func(g gen.Generator) gen.Generator { return read(g, "eni-n1") }, "n1"},
	} {
		g := flaps(1, []string{"n1", "n2", "n3"})
		op, g, _ := g.Next(ctx(0)) // the first ask sets the first flap's time
		g = read(g, "eni-n2")
		g = nem(g, c.fault, c.value)
		for at := op.Time; at < op.Time+time.Second; at += flapRecheck {
			held, next, st := g.Next(ctx(at))
			if st == gen.Ready {
				t.Fatalf("%s: at %v the flap %s %v while n2 is out", c.name, at, held.F, held.Value)
			}
			g = next
		}
		g = c.then(g)
		drain, _, st := g.Next(ctx(op.Time + time.Second))
		if st != gen.Ready || drain.F != "drain" || drain.Value.(map[string]any)["node"] != c.want {
			t.Fatalf("%s: %v %s %v, want a drain of %s", c.name, st, drain.F, drain.Value, c.want)
		}
	}
	// A partition of another shape takes no one out: the holder is drained.
	g := flaps(1, []string{"n1", "n2", "n3"})
	op, g, _ := g.Next(ctx(0))
	g = read(g, "eni-n2")
	g = nem(g, "start-partition", map[string]any{"shape": "halves"})
	if drain, _, st := g.Next(ctx(op.Time)); st != gen.Ready || drain.Value.(map[string]any)["node"] != "n2" {
		t.Fatalf("under halves: %v %s %v, want a drain of n2", st, drain.F, drain.Value)
	}
}

// A flap is not sent through the node a fault took out: the harness
// binds thread t to nodes[t%3], and a drain sent through a paused node
// waits out the pause and fails (a 12 s run in CI saw both its drains
// go that way). It waits for a thread bound elsewhere, and only when no
// thread is bound elsewhere does it use the taken-out node's.
func TestFlapsRouteAroundATakenOutNode(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	for _, c := range []struct {
		name    string
		threads int
		free    []int
		want    int // the thread, or -2 for a wait
	}{
		{"only n1's thread free: wait", 6, []int{0, 3}, -2},
		{"n1's and n3's free: n3's", 6, []int{0, 2, 3}, 2},
		{"n2's free: n2's", 6, []int{3, 4}, 4},
		{"one thread, bound to n1: sent anyway", 1, []int{0}, 0},
	} {
		g := flaps(1, nodes)
		first, g, _ := g.Next(gen.Context{Time: 0, Threads: c.threads, Free: c.free})
		g = g.Update(gen.Context{}, gen.Event{Kind: gen.Completed, Thread: 1, F: "read", Value: map[string]any{"address": "10.0.1.10", "holder": "eni-n2"}})
		g = g.Update(gen.Context{}, gen.Event{Kind: gen.Invoked, Thread: gen.NemesisThread, F: "start-pause", Value: map[string]any{"node": "n1"}})
		op, _, st := g.Next(gen.Context{Time: first.Time, Threads: c.threads, Free: c.free})
		switch {
		case c.want == -2 && st != gen.Pending:
			t.Errorf("%s: %v %s on thread %d, want a wait", c.name, st, op.F, op.Thread)
		case c.want >= 0 && (st != gen.Ready || op.F != "drain" || op.Thread != c.want || op.Value.(map[string]any)["node"] != "n2"):
			t.Errorf("%s: %v %s %v on thread %d, want a drain of n2 on thread %d", c.name, st, op.F, op.Value, op.Thread, c.want)
		}
	}
}

// An undrain that failed or timed out is sent again; one that took
// effect is not.
func TestFlapsResendAFailedUndrain(t *testing.T) {
	ctx := func(at time.Duration) gen.Context { return gen.Context{Time: at, Threads: 2, Free: []int{0, 1}} }
	for _, ok := range []bool{false, true} {
		g := flaps(1, []string{"n1", "n2", "n3"})
		first, g, _ := g.Next(ctx(0))
		g = g.Update(ctx(0), gen.Event{Kind: gen.Completed, Thread: 0, F: "read", Value: map[string]any{"address": "10.0.1.10", "holder": "eni-n2"}})
		drain, g, st := g.Next(ctx(first.Time))
		if st != gen.Ready || drain.F != "drain" {
			t.Fatalf("%v %s", st, drain.F)
		}
		wait, g, _ := g.Next(ctx(first.Time))
		undrain, g, st := g.Next(ctx(wait.Time))
		if st != gen.Ready || undrain.F != "undrain" || undrain.Value.(map[string]any)["node"] != "n2" {
			t.Fatalf("%v %s %v, want an undrain of n2", st, undrain.F, undrain.Value)
		}
		done := wait.Time + 50*time.Millisecond
		g = g.Update(ctx(done), gen.Event{Kind: gen.Completed, Thread: 0, F: "undrain", Value: map[string]any{"node": "n2"}, Time: done, OK: ok})
		next, g, _ := g.Next(ctx(done))
		if next.Time < done || next.Time > done+flapEvery {
			t.Fatalf("ok %v: next op due at %v", ok, next.Time)
		}
		op, _, st := g.Next(ctx(next.Time))
		switch {
		case !ok && (st != gen.Ready || op.F != "undrain" || op.Value.(map[string]any)["node"] != "n2" || next.Time > done+flapRecheck):
			t.Fatalf("after a failed undrain: %v %s %v at %v, want the undrain of n2 again within %v", st, op.F, op.Value, next.Time, flapRecheck)
		case ok && op.F == "undrain":
			t.Fatalf("after an undrain that took effect: another undrain %v", op.Value)
		}
	}
}
