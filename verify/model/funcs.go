package model

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Funcs is a model written as plain functions, as Porcupine's Model is:
// Init and Step are all a model needs. The states are interned for the
// checker (which sees small integers), so S may be any type whose values
// compare with ==, or any type at all when Equal is given.
//
// Step sees every operation that may have taken effect: ok ones, and those
// whose outcome is unknown (op.Pending(): an info completion, or none). The
// checker may linearize a pending operation anywhere after its invoke or
// leave it out, so Step is asked only whether it could take effect; its
// Output was never observed, so a Step compares results with Returned
// (true for a pending operation whatever the value), as a dequeue that
// timed out may have removed any element. Failed operations certainly did
// not happen and never reach Step, except under Options.FailedCASObserved
// (Porcupine's etcd data), where a failed "cas" arrives with Type
// history.Fail as an observation that the compare did not match.
//
// Values reach Step normalized (every integer an int64, see
// history.Normalize); when S is an interface type, the states Init and Step
// return are normalized too, so an Init of 0 (an int) equals the int64 0 a
// read returns. A Step that panics makes the verdict unknown, with the
// panic's text (see SpecError), never a crash or a guess.
type Funcs[S any] struct {
	// Name names the model in reports (default "custom"); Doc describes
	// its operations in one line.
	Name, Doc string
	// Init returns the initial state. Required.
	Init func() S
	// Step applies op to state s: the next state, and whether op, with the
	// result the history recorded for it, is possible in s. It must not
	// modify s (copy a map or slice before changing it). Required.
	Step func(s S, op history.Op) (S, bool)
	// Partition, when set, splits the operations into independent parts
	// (one per key, say) that are checked apart; every operation it is
	// given must be in exactly one part. Nil checks one part.
	Partition func(ops []history.Op) [][]history.Op
	// Equal, when set, says whether two states are the same; nil compares
	// them with ==.
	Equal func(a, b S) bool
	// Describe and DescribeOp render a state and an operation in failure
	// reports and on the HTML page; nil renders them generically.
	Describe   func(s S) string
	DescribeOp func(op history.Op) string
}

// Model returns the model the checkers take.
func (m Funcs[S]) Model() Model { return funcsModel[S]{m} }

// funcsModel is a Funcs as a Model.
type funcsModel[S any] struct{ f Funcs[S] }

func (m funcsModel[S]) Name() string {
	if m.f.Name == "" {
		return "custom"
	}
	return m.f.Name
}

func (m funcsModel[S]) Doc() string {
	if m.f.Doc == "" {
		return "a model written as functions"
	}
	return m.f.Doc
}

// Compile makes one partition per part of m's Partition, each with a spec
// of its own (partitions are checked in parallel, and a spec interns).
func (m funcsModel[S]) Compile(ops []history.Op, opt Options) ([]linear.Partition, error) {
	f := m.f
	if f.Init == nil || f.Step == nil {
		return nil, fmt.Errorf("model %s: Init and Step are required", m.Name())
	}
	keyOf, err := stateKeyer[S](f.Equal)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name(), err)
	}
	var live []history.Op
	ids := make(map[int]int, len(ops)) // Call position → index into ops
	for i := range ops {
		o := ops[i]
		if o.Type == history.Fail && !(opt.FailedCASObserved && o.F == "cas") {
			continue
		}
		o.Input, o.Output = normalValue(o.Input), normalValue(o.Output)
		live = append(live, o)
		ids[o.Call] = i
	}
	groups := [][]history.Op{live}
	if f.Partition != nil {
		groups = f.Partition(live)
		seen := make(map[int]bool, len(live))
		n := 0
		for _, g := range groups {
			for i := range g {
				id, ok := ids[g[i].Call]
				if !ok || seen[id] {
					return nil, fmt.Errorf("model %s: Partition returned an operation (%s %s invoked at index %d) that is not one of its input or is in two parts",
						m.Name(), g[i].F, history.Show(g[i].Input), g[i].Index)
				}
				seen[id] = true
				n++
			}
		}
		if n != len(live) {
			return nil, fmt.Errorf("model %s: Partition kept %d of %d operations; every operation must be in one part", m.Name(), n, len(live))
		}
	}
	errs := &specErrs{}
	parts := make([]linear.Partition, 0, len(groups))
	for gi, g := range groups {
		if len(g) == 0 {
			continue
		}
		sp := &funcsSpec[S]{f: f, ops: g, key: keyOf, errs: errs, ids: map[any]linear.State{}, iface: reflect.TypeFor[S]().Kind() == reflect.Interface}
		p := linear.Partition{Spec: sp}
		if len(groups) > 1 {
			p.Label = fmt.Sprintf("part %d", gi)
		}
		for i := range g {
			p.Ops = append(p.Ops, Interval(&g[i], ids[g[i].Call]))
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// normalValue normalizes a value read from a history or built by a client.
func normalValue(v history.Value) history.Value {
	if n, err := history.Normalize(v); err == nil {
		return n
	}
	return v
}

// stateKeyer says how states are interned: by a map key (nil Equal and a
// comparable S), or by Equal (it returns nil then).
func stateKeyer[S any](equal func(a, b S) bool) (func(S) (any, error), error) {
	if equal != nil {
		return nil, nil
	}
	t := reflect.TypeFor[S]()
	if t.Kind() == reflect.Interface {
		return func(s S) (any, error) {
			v := any(s)
			switch v.(type) {
			case nil, bool, int64, string, float64:
				// The common states, comparable as they are.
				return v, nil
			}
			if n, err := history.Normalize(v); err == nil && !reflect.TypeOf(v).Comparable() {
				// A list or map state, in the history's Value forms.
				return history.Key(n), nil
			}
			if !reflect.TypeOf(v).Comparable() {
				return nil, fmt.Errorf("a state of type %T cannot be compared with ==; give the model an Equal", v)
			}
			return v, nil
		}, nil
	}
	if !t.Comparable() {
		return nil, fmt.Errorf("states of type %s cannot be compared with ==; give the model an Equal", t)
	}
	return func(s S) (any, error) { return any(s), nil }, nil
}

// SpecError returns the first error a partition's spec met while it was
// checked (a user's Step that panicked), or nil. The checker's verdict is
// then unknown: the search went on as if the step were impossible.
func SpecError(parts []linear.Partition) error {
	for _, p := range parts {
		if e, ok := p.Spec.(interface{ Err() error }); ok {
			if err := e.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// specErrs keeps the first error of a model's partitions.
type specErrs struct {
	mu  sync.Mutex
	err error
}

func (e *specErrs) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *specErrs) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// funcsSpec is one partition of a Funcs model as a linear.Spec.
type funcsSpec[S any] struct {
	f    Funcs[S]
	ops  []history.Op
	key  func(S) (any, error) // nil: intern with f.Equal
	errs *specErrs

	states []S
	ids    map[any]linear.State
	bytes  int64 // the intern table's memory, estimated
	iface  bool  // S is an interface type, whose states are normalized
}

func (s *funcsSpec[S]) Err() error { return s.errs.get() }

// Bytes estimates the memory the interned states hold, which the checker
// charges to its memory bound (linear.Growing): a state that grows as the
// search goes (a queue, a set) may take more than the search's own
// tables. It counts each state's own size and its key, not what a
// state's pointers, slices or maps refer to.
func (s *funcsSpec[S]) Bytes() int64 { return s.bytes }

// charge adds one interned state, with a key of n bytes, to Bytes.
func (s *funcsSpec[S]) charge(st S, n int) {
	s.bytes += linear.InternCost(n) + int64(unsafe.Sizeof(st))
}

// intern returns st's State, adding it when new.
func (s *funcsSpec[S]) intern(st S) (linear.State, bool) {
	if s.iface {
		switch any(st).(type) {
		case nil, bool, int64, string:
		default:
			if v, ok := normalValue(any(st)).(S); ok {
				st = v
			}
		}
	}
	if s.key == nil {
		// Newest first: a step usually returns a state just made.
		for i := len(s.states) - 1; i >= 0; i-- {
			if s.f.Equal(s.states[i], st) {
				return linear.State(i), true
			}
		}
		s.states = append(s.states, st)
		s.charge(st, 0)
		return linear.State(len(s.states) - 1), true
	}
	k, err := s.key(st)
	if err != nil {
		s.errs.set(fmt.Errorf("model %s: %w", funcsModel[S]{s.f}.Name(), err))
		return 0, false
	}
	if id, ok := s.ids[k]; ok {
		return id, true
	}
	id := linear.State(len(s.states))
	s.ids[k] = id
	s.states = append(s.states, st)
	n := 8
	if ks, ok := k.(string); ok {
		n = len(ks)
	}
	s.charge(st, n)
	return id, true
}

func (s *funcsSpec[S]) Init() linear.State {
	var st S
	if err := s.guard("Init", func() { st = s.f.Init() }); err != nil {
		s.errs.set(err)
	}
	id, _ := s.intern(st)
	return id
}

func (s *funcsSpec[S]) Step(st linear.State, op int) (linear.State, bool) {
	var next S
	var ok bool
	o := &s.ops[op]
	if err := s.guard("Step", func() { next, ok = s.f.Step(s.states[st], *o) }); err != nil {
		s.errs.set(fmt.Errorf("%w, on %s", err, s.DescribeOp(op)))
		return st, false
	}
	if !ok {
		return st, false
	}
	return s.intern(next)
}

// guard runs fn and turns a panic in it into an error.
func (s *funcsSpec[S]) guard(what string, fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("model %s: %s panicked: %v", funcsModel[S]{s.f}.Name(), what, p)
		}
	}()
	fn()
	return nil
}

func (s *funcsSpec[S]) DescribeState(st linear.State) string {
	if int(st) >= len(s.states) {
		return fmt.Sprintf("state %d", st)
	}
	v := s.states[st]
	if s.f.Describe != nil {
		var out string
		if s.guard("Describe", func() { out = s.f.Describe(v) }) == nil {
			return out
		}
	}
	if hv, err := history.Normalize(any(v)); err == nil && canShow(any(v)) {
		return history.Show(hv)
	}
	return fmt.Sprintf("%v", any(v))
}

// canShow says whether v is a value history.Show renders faithfully
// (scalars, lists, maps; not structs, whose unexported fields JSON drops).
func canShow(v any) bool {
	if v == nil {
		return true
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Struct, reflect.Pointer, reflect.Func, reflect.Chan:
		return false
	}
	return true
}

func (s *funcsSpec[S]) DescribeOp(op int) string {
	o := s.ops[op]
	if s.f.DescribeOp != nil {
		var out string
		if s.guard("DescribeOp", func() { out = s.f.DescribeOp(o) }) == nil {
			return out
		}
	}
	var b strings.Builder
	b.WriteString(o.F)
	if o.Input != nil {
		b.WriteString(" " + history.Show(o.Input))
	}
	switch {
	case o.Pending():
		b.WriteString(" (outcome unknown)")
	case o.Type == history.Fail:
		b.WriteString(" (failed)")
	case o.Output != nil:
		b.WriteString(" → " + history.Show(o.Output))
	}
	return b.String()
}

// Returned reports whether op's result is v: compared by meaning
// (history.Equal) when op completed, and true whatever v is when op's
// outcome is unknown, since nobody saw what it returned.
func Returned(op history.Op, v history.Value) bool {
	return op.Pending() || history.Equal(op.Output, v)
}

// Interval is the checker's view of a history operation's extent, with id
// as the caller's name for it: from its invoke to its completion, or
// pending (Return -1) when its outcome is unknown, that is for an info
// completion as much as for none. A model that builds linear.Ops itself
// must build them with Interval: an info operation given its completion's
// position would be taken as one that certainly happened by then.
func Interval(o *history.Op, id int) linear.Op { return interval(o, id) }

// CheckIntervals reports a partition operation that a model compiled as
// completed although its history operation's outcome is unknown (the
// mistake Interval prevents), naming the operation.
func CheckIntervals(ops []history.Op, parts []linear.Partition) error {
	for _, p := range parts {
		for _, lo := range p.Ops {
			if lo.ID < 0 || lo.ID >= len(ops) {
				continue
			}
			o := &ops[lo.ID]
			if o.Pending() && lo.Return >= 0 {
				return fmt.Errorf("operation %s invoked at index %d ended in %s, so its outcome is unknown, but the model gave the checker return position %d: build linear.Ops with model.Interval, which marks it pending", o.F, o.Index, o.Type, lo.Return)
			}
		}
	}
	return nil
}
