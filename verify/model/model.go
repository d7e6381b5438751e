// Package model holds the sequential specifications that histories are
// checked against: registers, a compare-and-set register, multi-registers,
// a key-value store, a mutex, a set and a FIFO queue; Register adds a
// program's own. A model compiles the operations of a history into
// partitions of integer-coded operations for the linear checker; the
// values themselves never reach the search.
package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Options say how to read a history's operations.
type Options struct {
	// Initial is the initial value of a register (of every key, for
	// multi-registers); nil means absent.
	Initial history.Value
	// NilReadsAny makes an ok read of nil match any value, as Knossos does
	// for histories whose clients logged reads without their results.
	NilReadsAny bool
	// FailedCASObserved makes a failed compare-and-set an observation that
	// the compare did not match, as in Porcupine's etcd data. Otherwise a
	// failed operation is removed: it certainly did not happen, and it
	// tells nothing about the state.
	FailedCASObserved bool
	// Unpartitioned checks a model that would split the history into
	// independent parts (kv, multi-register) as one object with one state.
	// kv still tells the checker which key each operation touches, so the
	// search reduces by independence instead; this is how the checker is
	// measured against Porcupine on histories it cannot split.
	Unpartitioned bool
}

// OptionsFor returns the semantics of the tool that writes a format:
// Knossos for EDN and elle-cli JSON (an ok read of nil matches anything),
// Porcupine for Jepsen log lines (nil is an absent value, a failed cas saw a
// mismatch), and ipfence's own for JSON Lines (nil is absent, fail means it
// did not happen).
func OptionsFor(f history.Format) Options {
	switch f {
	case history.EDN, history.JSON:
		return Options{NilReadsAny: true}
	case history.JepsenLog:
		return Options{FailedCASObserved: true}
	}
	return Options{}
}

// Model compiles a paired history into checker partitions.
type Model interface {
	// Name is the model's name on the command line.
	Name() string
	// Doc is a one-line description of the operations it accepts.
	Doc() string
	// Compile turns client operations into partitions with their specs.
	Compile(ops []history.Op, opt Options) ([]linear.Partition, error)
}

var models = []Model{
	registerModel{cas: false},
	registerModel{cas: true},
	multiRegisterModel{},
	kvModel{},
	mutexModel{},
	setModel{},
	queueModel{},
	independentModel{registerModel{cas: false}},
	independentModel{registerModel{cas: true}},
}

// registered holds the models Register added, after the built-in ones;
// a program registers its models at its start, before any Lookup, but a
// lock keeps a late one safe.
var (
	registeredMu sync.RWMutex
	registered   []Model
)

// Register adds m to the models that Names, All and Lookup know, so that a
// program's own model is found by name as the built-in ones are (on its
// command line, say). A name already known is refused: a model is never
// replaced behind the back of a check that looked it up.
func Register(m Model) error {
	if m == nil || m.Name() == "" {
		return errors.New("model.Register: a model needs a name")
	}
	registeredMu.Lock()
	defer registeredMu.Unlock()
	for _, k := range append(slices.Clip(models), registered...) {
		if k.Name() == m.Name() {
			return fmt.Errorf("model.Register: a model named %q is already known", m.Name())
		}
	}
	registered = append(registered, m)
	return nil
}

// Names lists the model names: the built-in ones, then the registered.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, m := range all {
		out[i] = m.Name()
	}
	return out
}

// All returns every model, in the order Names lists them.
func All() []Model {
	registeredMu.RLock()
	defer registeredMu.RUnlock()
	return append(slices.Clone(models), registered...)
}

// Lookup finds a model by name.
func Lookup(name string) (Model, error) {
	for _, m := range All() {
		if m.Name() == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown model %q; valid models: %s", name, strings.Join(Names(), ", "))
}

// OpError reports an operation a model cannot read.
type OpError struct {
	Index int64 // the invoke event's index
	Msg   string
}

func (e *OpError) Error() string {
	return fmt.Sprintf("operation invoked at index %d: %s", e.Index, e.Msg)
}

func opErr(o *history.Op, format string, args ...any) error {
	return &OpError{Index: o.Index, Msg: fmt.Sprintf(format, args...)}
}

// interval is the checker's view of an operation's extent.
func interval(o *history.Op, id int) linear.Op {
	r := o.Return
	if o.Pending() {
		r = -1
	}
	return linear.Op{Call: o.Call, Return: r, ID: id}
}

// values interns Values as small integers; 0 is nil. Integers and strings,
// the common cases, skip the canonical encoding.
type values struct {
	ints  map[int64]uint32
	strs  map[string]uint32
	other map[string]uint32
	vals  []history.Value
}

func newValues() *values {
	return &values{ints: map[int64]uint32{}, strs: map[string]uint32{}, vals: []history.Value{nil}}
}

func (v *values) id(x history.Value) uint32 {
	next := uint32(len(v.vals))
	switch k := x.(type) {
	case nil:
		return 0
	case int64:
		if id, ok := v.ints[k]; ok {
			return id
		}
		v.ints[k] = next
	case string:
		if id, ok := v.strs[k]; ok {
			return id
		}
		v.strs[k] = next
	default:
		// A value a user built in Go (an int Initial, a float64 from
		// encoding/json) is the same value as the int64 a read returns.
		if n, err := history.Normalize(x); err == nil {
			switch n.(type) {
			case nil, int64, string:
				return v.id(n)
			}
		}
		key := history.Key(x)
		if id, ok := v.other[key]; ok {
			return id
		}
		if v.other == nil {
			v.other = map[string]uint32{}
		}
		v.other[key] = next
	}
	v.vals = append(v.vals, x)
	return next
}

func (v *values) show(id uint32) string { return history.Show(v.vals[id]) }

// showAll renders a list of ids separated by spaces.
func (v *values) showAll(ids []uint32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = v.show(id)
	}
	return strings.Join(parts, " ")
}

// vectors interns sequences of value ids as States.
type vectors struct {
	ids  map[string]linear.State
	vecs [][]uint32
	buf  []byte
	// bytes estimates the table's memory, which the checker charges to
	// its memory bound (linear.Growing): a queue's or a set's states grow
	// as the search goes, and may take more memory than the search's own
	// tables.
	bytes int64
}

func newVectors() *vectors { return &vectors{ids: map[string]linear.State{}} }

func (t *vectors) id(vec []uint32) linear.State {
	t.buf = t.buf[:0]
	for _, x := range vec {
		t.buf = append(t.buf, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	if s, ok := t.ids[string(t.buf)]; ok {
		return s
	}
	s := linear.State(len(t.vecs))
	t.ids[string(t.buf)] = s
	t.vecs = append(t.vecs, slices.Clone(vec))
	t.bytes += linear.InternCost(len(t.buf))
	return s
}

func (t *vectors) get(s linear.State) []uint32 { return t.vecs[s] }

// pair reads a two-element list such as [old new] or [key value].
func pair(v history.Value) (history.Value, history.Value, bool) {
	l, ok := v.([]history.Value)
	if !ok || len(l) != 2 {
		return nil, nil, false
	}
	return l[0], l[1], true
}

func unknownF(o *history.Op, model string, valid ...string) error {
	return opErr(o, "model %s has no operation %q (valid: %s)", model, o.F, strings.Join(valid, ", "))
}
