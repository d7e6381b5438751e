package txnsim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
)

// outcome is one simulated run with its ground truth.
type outcome struct {
	c      Config // with defaults filled
	events []history.Event
	ops    []history.Op
	tr     *trace
}

func simulate(t testing.TB, c Config) *outcome {
	t.Helper()
	tr := &trace{ops: map[int64]*opTrace{}}
	var events []history.Event
	if err := run(c, func(e history.Event) error {
		events = append(events, e)
		return nil
	}, tr); err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	ops, nemesis, err := history.Pair(events)
	if err != nil {
		t.Fatalf("%+v: pairing: %v", c, err)
	}
	if len(nemesis) != 0 {
		t.Fatalf("%+v: %d nemesis events", c, len(nemesis))
	}
	return &outcome{c: c.withDefaults(), events: events, ops: ops, tr: tr}
}

// micro is one parsed micro-op.
type micro struct {
	f string
	k int64
	v history.Value
}

func micros(t testing.TB, v history.Value) []micro {
	t.Helper()
	list, ok := v.([]history.Value)
	if !ok {
		t.Fatalf("transaction value %s is not a list", history.Show(v))
	}
	out := make([]micro, len(list))
	for i, e := range list {
		triple, ok := e.([]history.Value)
		if !ok || len(triple) != 3 {
			t.Fatalf("micro-op %s is not a 3-element list", history.Show(e))
		}
		f, ok1 := triple[0].(string)
		k, ok2 := triple[1].(int64)
		if !ok1 || !ok2 {
			t.Fatalf("micro-op %s: want [string int64 value]", history.Show(e))
		}
		out[i] = micro{f, k, triple[2]}
	}
	return out
}

// ints reads a list-append read value.
func ints(t testing.TB, v history.Value) []int64 {
	t.Helper()
	list, ok := v.([]history.Value)
	if !ok {
		t.Fatalf("read value %s is not a list", history.Show(v))
	}
	out := make([]int64, len(list))
	for i, e := range list {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("read value %s holds a non-integer", history.Show(v))
		}
		out[i] = n
	}
	return out
}

// txnView is what a history alone shows of an ok transaction: the reads
// made before the transaction's own appends to the key (external reads),
// and its appends.
type txnView struct {
	op       history.Op
	reads    map[int64][][]int64
	appends  map[int64][]int64
	repeated bool // read one key twice externally and got different lists
}

func views(t testing.TB, o *outcome) []txnView {
	t.Helper()
	var out []txnView
	for _, op := range o.ops {
		if op.Type != history.OK {
			continue
		}
		v := txnView{op: op, reads: map[int64][][]int64{}, appends: map[int64][]int64{}}
		for _, m := range micros(t, op.Output) {
			switch m.f {
			case "append":
				v.appends[m.k] = append(v.appends[m.k], m.v.(int64))
			case "r":
				if len(v.appends[m.k]) > 0 {
					continue
				}
				l := ints(t, m.v)
				for _, prev := range v.reads[m.k] {
					if !slices.Equal(prev, l) {
						v.repeated = true
					}
				}
				v.reads[m.k] = append(v.reads[m.k], l)
			}
		}
		out = append(out, v)
	}
	return out
}

func overlap(a, b history.Op) bool { return a.Call < b.Return && b.Call < a.Return }

// writeSkew finds two concurrent ok transactions each of which read,
// without seeing the other's append, a key the other appended to.
func writeSkew(vs []txnView) string {
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			a, b := &vs[i], &vs[j]
			if !overlap(a.op, b.op) {
				continue
			}
			x, okx := missed(a, b)
			y, oky := missed(b, a)
			if okx && oky {
				return fmt.Sprintf("index %d reads key %d without index %d's append, which reads key %d without index %d's append",
					a.op.Index, x, b.op.Index, y, a.op.Index)
			}
		}
	}
	return ""
}

// missed reports a key that r read externally without seeing an append of w.
func missed(r, w *txnView) (int64, bool) {
	for k, lists := range r.reads {
		for _, v := range w.appends[k] {
			for _, l := range lists {
				if !slices.Contains(l, v) {
					return k, true
				}
			}
		}
	}
	return 0, false
}

// lostUpdate finds two ok transactions that read the same list of a key
// and both appended to it.
func lostUpdate(vs []txnView) string {
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			a, b := &vs[i], &vs[j]
			for k, la := range a.reads {
				if len(a.appends[k]) == 0 || len(b.appends[k]) == 0 {
					continue
				}
				for _, lb := range b.reads[k] {
					if slices.Equal(la[0], lb) {
						return fmt.Sprintf("indexes %d and %d both read key %d as %v and both append to it", a.op.Index, b.op.Index, k, lb)
					}
				}
			}
		}
	}
	return ""
}

// staleRead finds an ok transaction that invoked after another ok
// transaction completed and read a key without that one's append.
func staleRead(vs []txnView) string {
	for i := range vs {
		for j := range vs {
			w, r := &vs[i], &vs[j]
			if w.op.Return >= r.op.Call {
				continue
			}
			if k, ok := missed(r, w); ok {
				return fmt.Sprintf("index %d completed before index %d invoked, which read key %d without its append", w.op.Index, r.op.Index, k)
			}
		}
	}
	return ""
}

func nonRepeatable(vs []txnView) string {
	for _, v := range vs {
		if v.repeated {
			return fmt.Sprintf("index %d read a key twice with different results", v.op.Index)
		}
	}
	return ""
}
