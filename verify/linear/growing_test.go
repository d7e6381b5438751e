package linear

import (
	"context"
	"testing"
)

// growingSpec is a counter that claims to allocate perByte bytes at each
// step, as an interning model does.
type growingSpec struct {
	perStep int64
	bytes   int64
}

func (s *growingSpec) Init() State { return 0 }

func (s *growingSpec) Step(st State, op int) (State, bool) {
	s.bytes += s.perStep
	return st + 1, true
}

func (s *growingSpec) Bytes() int64 { return s.bytes }

// concurrent returns n operations that all overlap.
func concurrent(n int) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Call: i, Return: n + i, ID: i}
	}
	return ops
}

// A Growing spec's memory counts against the bound: a search that the
// visited set alone would let finish stops with unknown: memory bound once
// the spec's tables pass it; the same spec under a larger bound finishes.
func TestGrowingSpecIsCharged(t *testing.T) {
	ops := concurrent(30)
	for _, c := range []struct {
		max  int64
		want Verdict
	}{{8 << 20, Unknown}, {1 << 30, True}} {
		spec := &growingSpec{perStep: 1 << 20}
		res, err := Check(context.Background(), []Partition{{Ops: ops, Spec: spec}}, Options{MaxMemory: c.max, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid != c.want {
			t.Fatalf("bound %d: %v (%s), want %v", c.max, res.Valid, res.Reason, c.want)
		}
		if c.want == Unknown {
			if res.Reason != ReasonMemory {
				t.Errorf("reason %q, want %q", res.Reason, ReasonMemory)
			}
			// It stopped at the step that passed the bound: 30 steps
			// would have claimed 30MiB.
			if spec.bytes > c.max+spec.perStep {
				t.Errorf("the spec reached %d bytes under a bound of %d", spec.bytes, c.max)
			}
		}
	}
}

// Determinize's interned sets are charged too, with the wrapped spec's.
func TestDeterminizeIsGrowing(t *testing.T) {
	d := Determinize(&growingND{})
	g, ok := d.(Growing)
	if !ok {
		t.Fatal("Determinize's spec does not report its memory")
	}
	s := d.Init()
	before := g.Bytes()
	for i := range 10 {
		s, _ = d.Step(s, i)
	}
	if after := g.Bytes(); after < before+10*InternCost(8)+10*100 {
		t.Errorf("10 new sets and 1000 inner bytes grew the estimate from %d to %d", before, after)
	}
}

type growingND struct{ bytes int64 }

func (g *growingND) InitStates() []State { return []State{0} }
func (g *growingND) Steps(s State, op int, dst []State) []State {
	g.bytes += 100
	return append(dst, s+1)
}
func (g *growingND) Bytes() int64 { return g.bytes }
