package model

import (
	"runtime"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// heapAfterGC is the live heap, measured after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The vectors table's estimate is never below what it allocates, for the
// lengths queue and set states take; without it, --max-memory would not
// bound the model (a 23-op queue history under 256MiB peaked at 1.8 GB).
func TestVectorsEstimateCoversTheHeap(t *testing.T) {
	for _, n := range []int{0, 1, 5, 22, 100} {
		const count = 20000
		vec := make([]uint32, n)
		before := heapAfterGC()
		v := newVectors()
		for i := range count {
			if n > 0 {
				vec[0] = uint32(i)
			} else if i > 0 {
				break
			}
			v.id(vec)
		}
		used := int64(heapAfterGC() - before)
		if n == 0 {
			continue
		}
		t.Logf("length %d: estimate %d, heap %d (%.2fx)", n, v.bytes, used, float64(v.bytes)/float64(used))
		if v.bytes < used {
			t.Errorf("length %d: estimate %d bytes for %d vectors, the heap grew %d", n, v.bytes, count, used)
		}
		// An estimate far above the truth would make the bound stop
		// searches that fit.
		if v.bytes > 3*used {
			t.Errorf("length %d: estimate %d bytes, more than three times the %d the heap grew", n, v.bytes, used)
		}
		runtime.KeepAlive(v)
	}
}

// Every model whose states are interned reports them to the checker, and
// stepping into new states grows the report.
func TestInterningModelsAreGrowing(t *testing.T) {
	ops := func(events ...history.Event) []history.Op {
		for i := range events {
			events[i].Index = int64(i)
		}
		o, _, err := history.Pair(events)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	inv := func(p history.Process, f string, v history.Value) history.Event {
		return history.Event{Process: p, Type: history.Invoke, F: f, Value: v}
	}
	ok := func(p history.Process, f string, v history.Value) history.Event {
		return history.Event{Process: p, Type: history.OK, F: f, Value: v}
	}
	cases := []struct {
		model string
		ops   []history.Op
		opt   Options
	}{
		{"fifo-queue", ops(inv(0, "enqueue", int64(1)), ok(0, "enqueue", int64(1)), inv(0, "enqueue", int64(2)), ok(0, "enqueue", int64(2))), Options{}},
		{"set", ops(inv(0, "add", int64(1)), ok(0, "add", int64(1)), inv(0, "add", int64(2)), ok(0, "add", int64(2))), Options{}},
		{"kv", ops(inv(0, "append", []history.Value{"k", "a"}), ok(0, "append", []history.Value{"k", "a"}), inv(0, "append", []history.Value{"k", "b"}), ok(0, "append", []history.Value{"k", "b"})), Options{}},
		{"kv", ops(inv(0, "append", []history.Value{"k", "a"}), ok(0, "append", []history.Value{"k", "a"}), inv(0, "append", []history.Value{"j", "b"}), ok(0, "append", []history.Value{"j", "b"})), Options{Unpartitioned: true}},
		{"multi-register", ops(inv(0, "txn", []history.Value{[]history.Value{"w", "x", int64(1)}}), ok(0, "txn", []history.Value{[]history.Value{"w", "x", int64(1)}}), inv(0, "txn", []history.Value{[]history.Value{"w", "x", int64(2)}}), ok(0, "txn", []history.Value{[]history.Value{"w", "x", int64(2)}})), Options{}},
	}
	for _, c := range cases {
		m, err := Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := m.Compile(c.ops, c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		spec := parts[0].Spec
		g, isGrowing := spec.(linear.Growing)
		if !isGrowing {
			t.Errorf("%s (%+v): the spec %T does not report its memory", c.model, c.opt, spec)
			continue
		}
		s := spec.Init()
		before := g.Bytes()
		for i := range parts[0].Ops {
			next, possible := spec.Step(s, i)
			if !possible {
				t.Fatalf("%s: op %d impossible", c.model, i)
			}
			s = next
		}
		if g.Bytes() <= before {
			t.Errorf("%s (%+v): two new states left the estimate at %d", c.model, c.opt, g.Bytes())
		}
	}
}
