package linear

import (
	"slices"
	"strings"
)

// NondetSpec is a specification whose operations may lead to several states
// (a write that may be lost, a queue that may reorder). Determinize turns it
// into a Spec.
type NondetSpec interface {
	// InitStates returns the possible initial states.
	InitStates() []State
	// Steps appends to dst every state op can lead to from s; none means op
	// is impossible in s.
	Steps(s State, op int, dst []State) []State
}

// Determinize returns a Spec whose states are the sets of states nd may be
// in (the subset construction): an operation is possible when it is possible
// from at least one of them. The sets are interned, so each distinct set is
// one State.
func Determinize(nd NondetSpec) Spec {
	d := &detSpec{nd: nd, ids: map[string]State{}}
	if n, ok := nd.(Neutral); ok {
		return &detNeutral{d, n}
	}
	return d
}

type detSpec struct {
	nd   NondetSpec
	ids  map[string]State
	sets [][]State
	buf  []State
	key  []byte
	// bytes estimates the memory of ids and sets.
	bytes int64
}

// Bytes is the memory of the interned sets, and of nd's tables when it is
// Growing too (see Growing).
func (d *detSpec) Bytes() int64 {
	if g, ok := d.nd.(Growing); ok {
		return d.bytes + g.Bytes()
	}
	return d.bytes
}

// InternCost estimates the memory of one entry of an intern table kept as
// a map from a string key of n bytes to a State and a slice of the same n
// bytes: the key, the copy, the slice header (twice, for the append that
// doubles the slice) and the map's slot (twice, for the growth that
// doubles the table). Allocation rounds sizes up to a size class, by at
// most an eighth above 16 bytes.
func InternCost(n int) int64 {
	if n == 0 {
		return 2*24 + 2*32
	}
	alloc := int64(n + n/8 + 16)
	return 2*alloc + 2*24 + 2*32
}

type detNeutral struct {
	*detSpec
	n Neutral
}

func (d *detNeutral) Neutral(op int) bool { return d.n.Neutral(op) }

func (d *detSpec) intern(set []State) State {
	slices.Sort(set)
	set = slices.Compact(set)
	d.key = d.key[:0]
	for _, s := range set {
		for b := range 8 {
			d.key = append(d.key, byte(s>>(8*b)))
		}
	}
	if id, ok := d.ids[string(d.key)]; ok {
		return id
	}
	id := State(len(d.sets))
	d.ids[string(d.key)] = id
	d.sets = append(d.sets, slices.Clone(set))
	d.bytes += InternCost(len(d.key))
	return id
}

func (d *detSpec) Init() State { return d.intern(d.nd.InitStates()) }

func (d *detSpec) Step(s State, op int) (State, bool) {
	d.buf = d.buf[:0]
	for _, x := range d.sets[s] {
		d.buf = d.nd.Steps(x, op, d.buf)
	}
	if len(d.buf) == 0 {
		return s, false
	}
	return d.intern(d.buf), true
}

// DescribeState lists the possible states, using nd's Describer if it has one.
func (d *detSpec) DescribeState(s State) string {
	parts := make([]string, len(d.sets[s]))
	for i, x := range d.sets[s] {
		parts[i] = StateString(d.nd, x)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "one of {" + strings.Join(parts, ", ") + "}"
}

// DescribeOp uses nd's Describer if it has one.
func (d *detSpec) DescribeOp(op int) string {
	return OpString(d.nd, op)
}
