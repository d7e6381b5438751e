package model

import (
	"fmt"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// registerModel is a single register: read and write, and with cas also
// compare-and-set ([old new]).
type registerModel struct{ cas bool }

func (m registerModel) Name() string {
	if m.cas {
		return "cas-register"
	}
	return "register"
}

func (m registerModel) Doc() string {
	if m.cas {
		return "one register: read, write v, cas [old new]"
	}
	return "one register: read, write v"
}

type regKind uint8

const (
	regRead     regKind = iota // observed value a
	regReadAny                 // an ok read of nil under Knossos semantics
	regWrite                   // sets a
	regCAS                     // a → b; impossible when the value is not a
	regMismatch                // a cas that observed the value was not a
)

type regOp struct {
	kind regKind
	a, b uint32
}

// registerSpec is shared by register and cas-register; its state is the
// interned value, 0 being nil (absent).
type registerSpec struct {
	init uint32
	ops  []regOp
	vals *values
}

func (s *registerSpec) Init() linear.State { return linear.State(s.init) }

func (s *registerSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := &s.ops[i]
	switch o.kind {
	case regRead:
		return st, st == linear.State(o.a)
	case regReadAny:
		return st, true
	case regWrite:
		return linear.State(o.a), true
	case regCAS:
		if st == linear.State(o.a) {
			return linear.State(o.b), true
		}
		return st, false
	default: // regMismatch
		return st, st != linear.State(o.a)
	}
}

func (s *registerSpec) Neutral(i int) bool {
	k := s.ops[i].kind
	return k == regRead || k == regReadAny || k == regMismatch
}

func (s *registerSpec) DescribeState(st linear.State) string { return s.vals.show(uint32(st)) }

func (s *registerSpec) DescribeOp(i int) string {
	o := &s.ops[i]
	switch o.kind {
	case regRead:
		return "read → " + s.vals.show(o.a)
	case regReadAny:
		return "read → nil (any value)"
	case regWrite:
		return "write " + s.vals.show(o.a)
	case regCAS:
		return fmt.Sprintf("cas %s → %s", s.vals.show(o.a), s.vals.show(o.b))
	default:
		return fmt.Sprintf("cas %s → %s (compare failed)", s.vals.show(o.a), s.vals.show(o.b))
	}
}

func (m registerModel) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	spec := &registerSpec{vals: newValues()}
	spec.init = spec.vals.id(opt.Initial)
	var part []linear.Op
	valid := []string{"read", "write"}
	if m.cas {
		valid = append(valid, "cas")
	}
	for id := range ops {
		o := &ops[id]
		var ro regOp
		switch {
		case o.F == "read":
			if o.Type == history.Fail {
				continue
			}
			ro = regOp{kind: regRead, a: spec.vals.id(o.Output)}
			if o.Output == nil && opt.NilReadsAny {
				ro.kind = regReadAny
			}
		case o.F == "write":
			if o.Type == history.Fail {
				continue
			}
			ro = regOp{kind: regWrite, a: spec.vals.id(o.Input)}
		case o.F == "cas" && m.cas:
			old, nu, ok := pair(o.Input)
			if !ok {
				return nil, opErr(o, "cas value must be [old new], found %s", history.Show(o.Input))
			}
			ro = regOp{kind: regCAS, a: spec.vals.id(old), b: spec.vals.id(nu)}
			if o.Type == history.Fail {
				if !opt.FailedCASObserved {
					continue
				}
				ro.kind = regMismatch
			}
		default:
			return nil, unknownF(o, m.Name(), valid...)
		}
		spec.ops = append(spec.ops, ro)
		part = append(part, interval(o, id))
	}
	return []linear.Partition{{Ops: part, Spec: spec}}, nil
}
