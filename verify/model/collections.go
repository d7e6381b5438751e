package model

import (
	"slices"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// mutexModel is a lock: acquire when free, release when held.
type mutexModel struct{}

func (mutexModel) Name() string { return "mutex" }
func (mutexModel) Doc() string  { return "a lock: acquire (when free), release (when held)" }

// mutexSpec's state is 0 (free) or 1 (held); op true is an acquire.
type mutexSpec struct{ acquire []bool }

func (s *mutexSpec) Init() linear.State { return 0 }

func (s *mutexSpec) Step(st linear.State, i int) (linear.State, bool) {
	if s.acquire[i] {
		return 1, st == 0
	}
	return 0, st == 1
}

func (s *mutexSpec) DescribeState(st linear.State) string {
	if st == 1 {
		return "held"
	}
	return "free"
}

func (s *mutexSpec) DescribeOp(i int) string {
	if s.acquire[i] {
		return "acquire"
	}
	return "release"
}

func (m mutexModel) Compile(ops []history.Op, _ Options) ([]linear.Partition, error) {
	spec := &mutexSpec{}
	var part []linear.Op
	for id := range ops {
		o := &ops[id]
		if o.F != "acquire" && o.F != "release" {
			return nil, unknownF(o, m.Name(), "acquire", "release")
		}
		if o.Type == history.Fail {
			continue
		}
		spec.acquire = append(spec.acquire, o.F == "acquire")
		part = append(part, interval(o, id))
	}
	return []linear.Partition{{Ops: part, Spec: spec}}, nil
}

// setModel is a set: add an element, read the whole set. A read must return
// exactly the elements added before it.
type setModel struct{}

func (setModel) Name() string { return "set" }
func (setModel) Doc() string  { return "a set: add v, read → every element added" }

type setOp struct {
	add  bool
	any  bool     // an ok read of nil under Knossos semantics
	elem uint32   // for add
	read []uint32 // for read, sorted, no duplicates
}

// setSpec's state is an interned sorted list of element ids.
type setSpec struct {
	ops  []setOp
	vals *values
	vecs *vectors
	buf  []uint32
}

func (s *setSpec) Init() linear.State { return s.vecs.id(nil) }

// Bytes is the memory of the interned states (linear.Growing).
func (s *setSpec) Bytes() int64 { return s.vecs.bytes }

func (s *setSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := &s.ops[i]
	cur := s.vecs.get(st)
	if !o.add {
		return st, o.any || slices.Equal(cur, o.read)
	}
	j, found := slices.BinarySearch(cur, o.elem)
	if found {
		return st, true
	}
	s.buf = append(append(append(s.buf[:0], cur[:j]...), o.elem), cur[j:]...)
	return s.vecs.id(s.buf), true
}

func (s *setSpec) Neutral(i int) bool { return !s.ops[i].add }

func (s *setSpec) DescribeState(st linear.State) string { return s.show(s.vecs.get(st)) }

func (s *setSpec) show(ids []uint32) string { return "#{" + s.vals.showAll(ids) + "}" }

func (s *setSpec) DescribeOp(i int) string {
	o := &s.ops[i]
	switch {
	case o.add:
		return "add " + s.vals.show(o.elem)
	case o.any:
		return "read → nil (any value)"
	}
	return "read → " + s.show(o.read)
}

func (m setModel) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	spec := &setSpec{vals: newValues(), vecs: newVectors()}
	var part []linear.Op
	for id := range ops {
		o := &ops[id]
		if o.Type == history.Fail {
			continue
		}
		var so setOp
		switch o.F {
		case "add":
			so = setOp{add: true, elem: spec.vals.id(o.Input)}
		case "read":
			if o.Type != history.OK || (o.Output == nil && opt.NilReadsAny) {
				so.any = true
				break
			}
			l, ok := o.Output.([]history.Value)
			if !ok {
				return nil, opErr(o, "set read must return a collection, found %s", history.Show(o.Output))
			}
			for _, e := range l {
				so.read = append(so.read, spec.vals.id(e))
			}
			slices.Sort(so.read)
			so.read = slices.Compact(so.read)
		default:
			return nil, unknownF(o, m.Name(), "add", "read")
		}
		spec.ops = append(spec.ops, so)
		part = append(part, interval(o, id))
	}
	return []linear.Partition{{Ops: part, Spec: spec}}, nil
}

// queueModel is a FIFO queue: enqueue v; dequeue returns the oldest element,
// or nil when the queue is empty.
type queueModel struct{}

func (queueModel) Name() string { return "fifo-queue" }
func (queueModel) Doc() string {
	return "a FIFO queue: enqueue v, dequeue → oldest element (nil when empty)"
}

type queueOp struct {
	enqueue bool
	unknown bool // a dequeue whose result was not observed
	val     uint32
}

// queueSpec's state is an interned sequence of element ids, oldest first.
type queueSpec struct {
	ops  []queueOp
	vals *values
	vecs *vectors
	buf  []uint32
}

func (s *queueSpec) Init() linear.State { return s.vecs.id(nil) }

// Bytes is the memory of the interned states (linear.Growing).
func (s *queueSpec) Bytes() int64 { return s.vecs.bytes }

func (s *queueSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := &s.ops[i]
	cur := s.vecs.get(st)
	if o.enqueue {
		s.buf = append(append(s.buf[:0], cur...), o.val)
		return s.vecs.id(s.buf), true
	}
	if len(cur) == 0 {
		// The value id 0 is nil: a dequeue that found the queue empty.
		return st, o.unknown || o.val == 0
	}
	if !o.unknown && cur[0] != o.val {
		return st, false
	}
	return s.vecs.id(cur[1:]), true
}

func (s *queueSpec) DescribeState(st linear.State) string {
	return "[" + s.vals.showAll(s.vecs.get(st)) + "]"
}

func (s *queueSpec) DescribeOp(i int) string {
	o := &s.ops[i]
	switch {
	case o.enqueue:
		return "enqueue " + s.vals.show(o.val)
	case o.unknown:
		return "dequeue → ?"
	}
	return "dequeue → " + s.vals.show(o.val)
}

func (m queueModel) Compile(ops []history.Op, _ Options) ([]linear.Partition, error) {
	spec := &queueSpec{vals: newValues(), vecs: newVectors()}
	var part []linear.Op
	for id := range ops {
		o := &ops[id]
		if o.Type == history.Fail {
			continue
		}
		var qo queueOp
		switch o.F {
		case "enqueue":
			if o.Input == nil {
				return nil, opErr(o, "enqueue of nil: nil is how a dequeue reports an empty queue")
			}
			qo = queueOp{enqueue: true, val: spec.vals.id(o.Input)}
		case "dequeue":
			qo = queueOp{unknown: o.Type != history.OK, val: spec.vals.id(o.Output)}
		default:
			return nil, unknownF(o, m.Name(), "enqueue", "dequeue")
		}
		spec.ops = append(spec.ops, qo)
		part = append(part, interval(o, id))
	}
	return []linear.Partition{{Ops: part, Spec: spec}}, nil
}
