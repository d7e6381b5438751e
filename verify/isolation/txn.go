// Package isolation checks histories of transactions against
// transactional consistency models (read committed, snapshot isolation,
// serializability, strict serializability, ...), as Elle does: it infers
// the version order of every key from what transactions read, builds the
// graph of dependencies between transactions (write-write, write-read,
// read-write, and process and real-time order), finds its strongly
// connected components, and searches each for the shortest cycle of every
// anomaly class the chosen model prohibits, besides the anomalies that need
// no cycle (aborted and intermediate reads, internal inconsistency, lost
// updates, ...). It reports the anomalies with step-by-step explanations,
// the weakest models they rule out and the stronger ones.
//
// Two workloads are understood. In list-append, a transaction appends
// unique values to lists and reads whole lists, so every read shows the
// order of the versions before it. In rw-register, transactions write unique
// values to registers and read them; the version order is known only in
// part (the initial state comes first, a write follows the version its
// transaction read, and optionally each key's versions follow process or
// real-time order).
package isolation

import (
	"fmt"
	"math"
	"slices"

	"github.com/ipfence/ipfence/verify/history"
)

// Workload names.
const (
	ListAppend = "list-append"
	RWRegister = "rw-register"
)

// mopKind is what a micro-operation does.
type mopKind uint8

const (
	mAppend mopKind = iota
	mRead
	mWrite
)

// mop is one micro-operation of a transaction. Keys and values are
// interned: keys as small integers, values as int64 (integers stand for
// themselves; other values get ids no integer in a history will reach).
type mop struct {
	kind mopKind
	key  int32
	// val is an append's or a write's value.
	val int64
	// For a read: known says the value was recorded (an ok completion);
	// rw-register reads keep the value in val (nilVal for nil), list
	// reads their n elements at start in reads, or, when start is -1,
	// as the first n of the key's list in keyLists (see parsed.list).
	known bool
	// null says a known read returned nil (list-append: nil, not []).
	null  bool
	start int32
	n     int32
}

// nilVal is an rw-register read of nil: the initial state.
const nilVal = math.MinInt64

// txn is one transaction of the history.
type txn struct {
	// index is the index of the event that completed the transaction
	// (the invoke's when none did): the operation as Elle names it and as
	// the user finds it in the file. invoke is the invoke event's index.
	index   int64
	invoke  int64
	process history.Process
	typ     history.Type // OK, Info or Fail
	mops    []mop
	// call and ret are the positions of the invoke and the completion in
	// the history's events; ret is -1 for an operation that never
	// completed.
	call, ret int32
}

// interner gives keys and non-integer values compact ids.
type interner struct {
	keys     map[string]int32
	intKeys  map[int64]int32
	small    []int32 // small[i] is integer key i's id plus one, 0 for none yet
	keyNames []history.Value
	vals     map[string]int64
	valNames map[int64]history.Value
}

// otherBase is the first id given to a non-integer value: far above any
// integer a test writes, and far below nilVal.
const otherBase = math.MinInt64 / 2

func newInterner() *interner {
	return &interner{keys: map[string]int32{}, intKeys: map[int64]int32{}, vals: map[string]int64{}, valNames: map[int64]history.Value{}}
}

func (in *interner) key(k history.Value) int32 {
	if i, ok := k.(int64); ok {
		return in.intKey(i)
	}
	s := history.Key(k)
	if id, ok := in.keys[s]; ok {
		return id
	}
	id := int32(len(in.keyNames))
	in.keys[s] = id
	in.keyNames = append(in.keyNames, k)
	return id
}

// smallKeys is how many small integer keys (0 and up) the interner finds
// in a slice rather than its map: tests use a few hundred keys at most,
// and every micro-operation's key is looked up.
const smallKeys = 4096

func (in *interner) intKey(i int64) int32 {
	if i >= 0 && i < smallKeys && int(i) < len(in.small) && in.small[i] != 0 {
		return in.small[i] - 1
	}
	if id, ok := in.intKeys[i]; ok {
		return id
	}
	id := int32(len(in.keyNames))
	in.intKeys[i] = id
	in.keyNames = append(in.keyNames, i)
	if i >= 0 && i < smallKeys {
		if int(i) >= len(in.small) {
			in.small = append(in.small, make([]int32, int(i)+1-len(in.small))...)
		}
		in.small[i] = id + 1
	}
	return id
}

func (in *interner) val(v history.Value) int64 {
	if i, ok := v.(int64); ok && i != nilVal && (i < otherBase || i >= otherBase+1<<40) {
		return i
	}
	s := history.Key(v)
	if id, ok := in.vals[s]; ok {
		return id
	}
	id := otherBase + int64(len(in.vals))
	in.vals[s] = id
	in.valNames[id] = v
	return id
}

// value returns an interned value as the history had it.
func (in *interner) value(v int64) history.Value {
	if v == nilVal {
		return nil
	}
	if name, ok := in.valNames[v]; ok {
		return name
	}
	return v
}

// showVal renders an interned value as the history had it.
func (in *interner) showVal(v int64) string {
	if v == nilVal {
		return "nil"
	}
	if name, ok := in.valNames[v]; ok {
		return history.Show(name)
	}
	return fmt.Sprint(v)
}

func (in *interner) showKey(k int32) string { return history.Show(in.keyNames[k]) }

// parsed is a history's transactions in compact form.
type parsed struct {
	workload string
	txns     []txn
	reads    []int64 // the elements of list reads, back to back
	// keyLists holds, per key, the longest list of elements that the
	// reads of it kept as a prefix (keepRead) have shown.
	keyLists [][]int64
	in       *interner
	// value renders transaction t's value as the history has it (the
	// completion's when it completed ok, else the invoke's), for reports;
	// only anomalies need it, so it may be slow.
	value func(t int32) history.Value
}

// InputError is a transaction the checker cannot read.
type InputError struct {
	Index int64 // the invoke event's index
	Msg   string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("transaction invoked at index %d: %s", e.Index, e.Msg)
}

// parse reads every client operation as a transaction of the workload.
// Nemesis events were set apart by history.Pair.
func parse(workload string, events []history.Event, ops []history.Op) (*parsed, error) {
	p := &parsed{workload: workload, in: newInterner()}
	p.value = func(t int32) history.Value {
		o := &ops[t]
		if o.Type == history.OK {
			return o.Output
		}
		return o.Input
	}
	p.txns = make([]txn, 0, len(ops))
	var mops []mop
	for i := range ops {
		o := &ops[i]
		if o.F != "txn" && o.F != "" {
			return nil, &InputError{o.Index, fmt.Sprintf("operation %q is not a transaction (f must be txn)", o.F)}
		}
		in, ok := o.Input.([]history.Value)
		if !ok {
			return nil, &InputError{o.Index, fmt.Sprintf("a transaction's value must be a list of micro-operations, found %s", history.Show(o.Input))}
		}
		var out []history.Value
		if o.Type == history.OK {
			if out, ok = o.Output.([]history.Value); !ok || len(out) != len(in) {
				return nil, &InputError{o.Index, fmt.Sprintf("the completion's value must list the same %d micro-operations, found %s", len(in), history.Show(o.Output))}
			}
		}
		start := len(mops)
		for j, raw := range in {
			m, err := p.mop(o, j, raw, out)
			if err != nil {
				return nil, err
			}
			mops = append(mops, m)
		}
		ret := int32(o.Return)
		if o.Return < 0 {
			ret = -1
		}
		index := o.Index
		if o.Return >= 0 {
			index = events[o.Return].Index
		}
		p.txns = append(p.txns, txn{index: index, invoke: o.Index, process: o.Process, typ: o.Type, mops: mops[start:len(mops):len(mops)], call: int32(o.Call), ret: ret})
	}
	return p, nil
}

// mop reads micro-operation j of o.
func (p *parsed) mop(o *history.Op, j int, raw history.Value, out []history.Value) (mop, error) {
	l, ok := raw.([]history.Value)
	if !ok || len(l) != 3 {
		return mop{}, &InputError{o.Index, fmt.Sprintf("micro-operation %d must be [f key value], found %s", j, history.Show(raw))}
	}
	f, _ := l[0].(string)
	if out != nil && f != "r" && history.Key(out[j]) != history.Key(raw) {
		// A completion reports what ran; a write that changed on the way
		// is a malformed history, not something to pick a side of.
		return mop{}, &InputError{o.Index, fmt.Sprintf("completed micro-operation %d is %s, but %s was invoked", j, history.Show(out[j]), history.Show(raw))}
	}
	m := mop{key: p.in.key(l[1])}
	switch {
	case f == "append" && p.workload == ListAppend:
		m.kind = mAppend
		m.val = p.in.val(l[2])
	case f == "w" && p.workload == RWRegister:
		m.kind = mWrite
		m.val = p.in.val(l[2])
	case f == "r":
		m.kind = mRead
		if out == nil {
			return m, nil
		}
		rl, ok := out[j].([]history.Value)
		if !ok || len(rl) != 3 {
			return mop{}, &InputError{o.Index, fmt.Sprintf("completed micro-operation %d must be [f key value], found %s", j, history.Show(out[j]))}
		}
		if f2, _ := rl[0].(string); f2 != "r" || history.Key(rl[1]) != history.Key(l[1]) {
			return mop{}, &InputError{o.Index, fmt.Sprintf("completed micro-operation %d is %s, not the read of key %s that was invoked", j, history.Show(out[j]), history.Show(l[1]))}
		}
		m.known = true
		if p.workload == RWRegister {
			if rl[2] == nil {
				m.val = nilVal
			} else {
				m.val = p.in.val(rl[2])
			}
			return m, nil
		}
		var elems []history.Value
		switch v := rl[2].(type) {
		case nil:
			// A read of a key nobody appended to: the empty list.
		case []history.Value:
			elems = v
		default:
			return mop{}, &InputError{o.Index, fmt.Sprintf("micro-operation %d reads key %s as %s; a list-append read returns a list", j, history.Show(l[1]), history.Show(rl[2]))}
		}
		m.start, m.n = int32(len(p.reads)), int32(len(elems))
		for _, e := range elems {
			p.reads = append(p.reads, p.in.val(e))
		}
		m.start = p.keepRead(m.key, m.start)
	default:
		valid := "append, r"
		if p.workload == RWRegister {
			valid = "w, r"
		}
		return mop{}, &InputError{o.Index, fmt.Sprintf("micro-operation %d has f %q; %s takes %s", j, history.Show(l[0]), p.workload, valid)}
	}
	return m, nil
}

// list returns a list read's elements.
func (p *parsed) list(m *mop) []int64 {
	if m.start < 0 {
		return p.keyLists[m.key][:m.n:m.n]
	}
	return p.reads[m.start : m.start+m.n : m.start+m.n]
}

// keepRead files the elements of a list read of key k, just appended to
// p.reads at start, and returns where they are: start, or -1 for the
// prefix of k's list in keyLists. Almost every read of a key shows a
// prefix of the same list of appends, so storing each read's elements
// took more memory than all else a million transactions need; a read
// that is a prefix of the list, or extends it, is kept as its length.
func (p *parsed) keepRead(k int32, start int32) int32 {
	read := p.reads[start:]
	for int(k) >= len(p.keyLists) {
		p.keyLists = append(p.keyLists, nil)
	}
	l := p.keyLists[k]
	switch {
	case len(read) <= len(l) && slices.Equal(read, l[:len(read)]):
	case len(read) > len(l) && slices.Equal(read[:len(l)], l):
		p.keyLists[k] = append(l, read[len(l):]...)
	default:
		return start
	}
	p.reads = p.reads[:start]
	return -1
}

// name renders a transaction for explanations: T and its operation's
// index in the history: the completion's, as Elle names operations (the
// invoke's for one that never completed).
func (p *parsed) name(t int32) string { return fmt.Sprintf("T%d", p.txns[t].index) }
