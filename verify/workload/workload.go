// Package workload checks histories of Jepsen's standard non-transactional
// workloads: set, set-full, counter, bank and long-fork. Each checker is a
// pure function of the history and the options: it reads the paired
// operations once, in history order, and answers valid, invalid or unknown
// with the figures and problem lists that explain the answer.
//
// Real-time order is taken from positions in the history, never from the
// time field: an operation precedes another when its completion comes
// before the other's invoke. A fail completion means the operation certainly
// did not take effect, so failed operations are left out; an info one (or an
// invoke that never completed) may have taken effect at any point after its
// invoke, or never.
//
// Values are compared as history values, so a history checks alike in EDN
// and in elle-cli's JSON (keywords and map keys arrive as strings either
// way). Jepsen's independent [key value] tuples are not split by key: a
// tuple is one opaque element, as elle-cli takes it.
//
// Events without a process (elle-cli's long-fork example has none) are
// paired in file order as if one process had issued them, as Jepsen does
// for operations whose process is nil.
package workload

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// The models, by name.
const (
	// Set is Jepsen's set workload: adds of distinct elements, then a
	// final read. The final reads are the ok reads invoked after every ok add
	// had completed; when there is none, the read that completed last (as
	// Jepsen takes it), which is then held only to the adds acknowledged
	// before it began.
	//
	//   - lost: elements whose add was acknowledged (ok) before a final read
	//     began, missing from that read;
	//   - unexpected: elements an ok read (any, not only a final one) returned
	//     that no add that did not fail had been invoked for before the read
	//     completed: never added, added only later, or added only by adds that
	//     failed (Jepsen counts that last case as recovered; a fail means the
	//     add certainly did not happen);
	//   - recovered: elements in a final read whose adds all crashed (info).
	//
	// Valid iff nothing is lost and nothing unexpected; unknown when no read
	// completed ok. Fields: attempt_count, acknowledged_count, read_count,
	// final_reads, ok_count, lost(_count), unexpected(_count),
	// recovered(_count); element lists are sorted.
	Set = "set-final"

	// SetFull is Jepsen's set-full workload: adds of distinct elements
	// and reads of the whole set all through the history. For each element:
	//
	//   - it is known from the completion of its first ok add, or of the first
	//     read that returned it, whichever came first;
	//   - it is stable when the last-invoked read that returned it began after
	//     every read that missed it: from some point on, every read sees it;
	//   - it is lost when it was known, and a read that began after it was
	//     known missed it, and no read that began later returned it: the set
	//     had it and dropped it;
	//   - it is stale when it is stable but a read that began after it was
	//     known still missed it (a linearizable set forbids that);
	//   - it is never read otherwise: no read began after it was known (or it
	//     never was), so its absence proves nothing;
	//   - it is duplicated when one read returned it more than once;
	//   - it is unexpected when a read returned it though no add of it that
	//     did not fail had been invoked before the read completed.
	//
	// Only reads that completed after an add of the element that did not fail
	// was invoked count for it, present or absent: earlier ones could not have
	// seen it. Jepsen compares times for staleness; positions are used here, so
	// a read that began after the element was known is stale evidence however
	// small the gap.
	//
	// Valid iff nothing is lost, duplicated or unexpected and, with
	// Options.SetFullLinearizable, nothing is stale; otherwise, as in Jepsen,
	// unknown when no element is stable (nothing was shown to stay). Jepsen
	// ignores elements no add named; here they are unexpected, as in the set
	// model, and make the history invalid, since a set returning elements
	// nobody added is broken whatever else holds.
	//
	// Fields: attempt_count, read_count, stable_count, lost(_count),
	// lost_detail ([]LostElement), never_read(_count), stale(_count),
	// worst_stale (up to 8 []StaleElement, longest latency first),
	// duplicated(_count) ([]Duplicate), unexpected(_count), linearizable.
	SetFull = "set-full"

	// Counter is Jepsen's counter workload: a counter starting at 0,
	// adds of an integer delta, and reads of the current value. An ok read must
	// lie between the least and the most the counter can have held at some
	// moment while the read ran:
	//
	//   - certain are the ok adds completed before the read was invoked: they
	//     took effect before it began;
	//   - possible are the adds that did not fail and were invoked before the
	//     read completed, other than the certain ones: each may or may not
	//     have taken effect by the moment the read took effect;
	//   - lower = the certain deltas + every negative possible delta, upper =
	//     the certain deltas + every positive possible delta.
	//
	// With deltas that are never negative (Jepsen asserts so) that is Jepsen's
	// rule: at least the sum of ok adds completed before the read began, at
	// most the sum of ok and info adds invoked before it completed. Failed adds
	// never count; reads that failed or crashed are not checked. Valid iff
	// every ok read lies within its bounds: with no reads, nothing contradicts
	// the history and it is valid, as in Jepsen.
	//
	// Fields: read_count, add_count, error_count, errors ([]CounterError, in
	// completion order).
	Counter = "counter"

	// Bank is Jepsen's bank workload: transfers of amounts between
	// accounts, and reads returning every account's balance (a map of account
	// to balance). Transfers move money and never create or destroy it, so
	// every ok read, whenever it ran, must show:
	//
	//   - the total: its balances sum to the bank's total amount;
	//   - no negative balance, unless Options.BankAllowNegative;
	//   - only known accounts, and a balance for each account it names.
	//
	// The total is Options.BankTotal, or else the sum of the first ok read
	// (by completion); the accounts are Options.BankAccounts, or else those of
	// the first ok read. That is elle-cli's rule, which has no test to take the
	// total from. Reads that failed or crashed and the transfers themselves
	// are not checked. Valid iff no ok read breaks a rule; with no ok read
	// there is nothing to break, and the history is valid, as in Jepsen.
	//
	// Fields: total, total_inferred, accounts, negative_allowed, read_count,
	// transfer_count, error_count (bad reads), error_kinds (kind → reads),
	// errors ([]BankError, in completion order), and when some total was wrong,
	// lowest_total and highest_total.
	Bank = "bank"

	// LongFork is Jepsen's long-fork workload: each write inserts one
	// key once ([[w k v]]), and each read reads a group of keys ([[r k1 nil]
	// [r k2 nil] ...], returning the values, nil for a key not yet inserted).
	// Operations are told apart by their values, whatever their f.
	//
	// Reads are grouped by the set of keys they read. Since keys are only ever
	// inserted, the keys a read saw inserted grow along any serial order, so
	// of two ok reads of a group, one must have seen a subset of what the other
	// saw. Two reads where each saw a key the other did not are a fork: they
	// saw two inserts in opposite orders, which snapshot isolation forbids and
	// parallel snapshot isolation allows.
	//
	// A read must also see each key's one written value. Jepsen stops at a key
	// with two different values; here a read of a value other than the key's
	// write, or, when the history has no write of the key, other than what an
	// earlier read saw, is reported as a bad value and makes the history
	// invalid: with one write per key at most one of the values is real.
	//
	// Valid iff no forks and no bad values; otherwise unknown when a key was
	// written more than once (the workload's premise fails, as Jepsen says).
	// Options.LongForkGroupSize, when set, is the size every read must have.
	//
	// Fields: read_count, early_read_count (reads that saw nothing inserted),
	// late_read_count (reads that saw everything inserted), write_count,
	// group_count, group_size, fork_count (read pairs), forks ([]Fork),
	// bad_values ([]BadValue), multiple_writes (keys).
	LongFork = "long-fork"
)

// Names lists the model names: set, set-full, counter, bank, long-fork.
func Names() []string { return []string{Set, SetFull, Counter, Bank, LongFork} }

// Options are the per-model knobs. The zero value gives the defaults of
// Jepsen and elle-cli.
type Options struct {
	// BankTotal is the amount every bank read must sum to. 0 infers it
	// from the first ok read, as elle-cli does when it is given no
	// --total-amount.
	BankTotal int64
	// BankAccounts, when not empty, are the accounts bank reads may name
	// (map keys as the history spells them, such as "0"); empty infers
	// them from the first ok read, as elle-cli does.
	BankAccounts []string
	// BankAllowNegative accepts negative balances. The default refuses
	// them, as Jepsen's bank checker and elle-cli do unless told
	// otherwise (elle-cli's --allow-negative-balances).
	BankAllowNegative bool
	// SetFullLinearizable makes stale set-full elements invalid: with a
	// linearizable set every read that begins after an add completed must
	// see the element (Jepsen's :linearizable? option). Off by default.
	SetFullLinearizable bool
	// LongForkGroupSize, when not 0, is the number of keys every long-fork
	// read must read; a read of another size is an input error (Jepsen's
	// group size n). 0 accepts reads of any size, grouped by the keys
	// they read.
	LongForkGroupSize int
}

// Report is one model's answer for one history. It marshals to one JSON
// object: "model", "valid", "ops", "reason" when there is one, then every
// entry of Fields; each model's documentation lists its fields.
type Report struct {
	Model string `json:"model"`
	// Valid is True, False, or Unknown when the history cannot prove
	// either (Reason says why).
	Valid  linear.Verdict `json:"valid"`
	Reason string         `json:"reason,omitempty"`
	// Ops counts client operations: an invoke and its completion are one.
	Ops int `json:"ops"`
	// Fields holds the model's figures and problem lists, keyed by their
	// JSON names.
	Fields map[string]any `json:"-"`

	// notes are the phrases Summary joins: the first problems, or what
	// the valid answer rests on.
	notes []string
}

// MarshalJSON writes the report as one object: the common keys first, then
// the fields in key order.
func (r Report) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	put := func(k string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("report field %q: %w", k, err)
		}
		b.Write(vb)
		return nil
	}
	if err := errors.Join(put("model", r.Model), put("valid", r.Valid), put("ops", r.Ops)); err != nil {
		return nil, err
	}
	if r.Reason != "" {
		if err := put("reason", r.Reason); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Fields)) {
		switch k {
		case "model", "valid", "ops", "reason":
			continue // the common keys win; a field cannot shadow them
		}
		if err := put(k, r.Fields[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Summary is the answer in one line for people, naming the first problems.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%s: %s (%s)", r.Model, verdictWord(r.Valid), plural(r.Ops, "op", "ops"))
	notes := r.notes
	if r.Valid == linear.Unknown && r.Reason != "" && !slices.Contains(notes, r.Reason) {
		notes = append([]string{r.Reason}, notes...)
	}
	if len(notes) > 0 {
		s += ": " + strings.Join(notes, "; ")
	}
	return s
}

func verdictWord(v linear.Verdict) string {
	switch v {
	case linear.True:
		return "valid"
	case linear.False:
		return "INVALID"
	}
	return "unknown"
}

// OpError reports an operation a model cannot read: a function the model
// does not know, or a value of the wrong shape.
type OpError struct {
	Model string
	// Index is the operation's invoke event index.
	Index   int64
	Process history.Process
	F       string
	Msg     string
}

// Error names the model, the operation and what was wrong with it.
func (e *OpError) Error() string {
	return fmt.Sprintf("%s: op at index %d (process %s, f %q): %s", e.Model, e.Index, e.Process, e.F, e.Msg)
}

// OpRef names one operation in a report.
type OpRef struct {
	// Index is the completion event's index, -1 when the operation never
	// completed; InvokeIndex is the invoke's.
	Index       int64  `json:"index"`
	InvokeIndex int64  `json:"invoke_index"`
	Process     *int64 `json:"process"` // null when the event named none
	F           string `json:"f"`
	Type        string `json:"type"`
	// Value is the result of an ok operation and the argument otherwise;
	// left out where it would repeat a whole set.
	Value history.Value `json:"value,omitempty"`
}

// Check runs one model's checker over a history. It returns an error only
// for input the model cannot use: an unknown model, events that cannot be
// paired, or an operation of the wrong shape (the error names its index).
func Check(model string, h *history.History, o Options) (*Report, error) {
	check, ok := checkers[model]
	if !ok {
		return nil, fmt.Errorf("unknown model %q; the workload models are %s", model, strings.Join(Names(), ", "))
	}
	if h == nil {
		return nil, fmt.Errorf("%s: no history", model)
	}
	ops, err := pair(h.Events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model, err)
	}
	c := &run{model: model, events: h.Events, ops: ops, o: o,
		r: &Report{Model: model, Ops: len(ops), Fields: map[string]any{}}}
	if err := check(c); err != nil {
		return nil, err
	}
	return c.r, nil
}

var checkers = map[string]func(*run) error{
	Set:      checkSet,
	SetFull:  checkSetFull,
	Counter:  checkCounter,
	Bank:     checkBank,
	LongFork: checkLongFork,
}

// anonymous stands in for the process of events that named none while they
// are paired; readers never produce it, since client processes are
// non-negative and the two special ones are -1 and -2.
const anonymous history.Process = -3

// pair pairs the client operations, pairing events that name no process in
// file order as one process.
func pair(events []history.Event) ([]history.Op, error) {
	if slices.ContainsFunc(events, func(e history.Event) bool { return e.Process == history.NoProcess }) {
		events = slices.Clone(events)
		for i := range events {
			if events[i].Process == history.NoProcess {
				events[i].Process = anonymous
			}
		}
		ops, _, err := history.Pair(events)
		if err != nil {
			return nil, fmt.Errorf("events without a process are paired in file order as one process (shown as %s): %w", anonymous, err)
		}
		return ops, nil
	}
	ops, _, err := history.Pair(events)
	return ops, err
}

// run is one check under way.
type run struct {
	model  string
	events []history.Event
	ops    []history.Op
	o      Options
	r      *Report
}

func (c *run) opErr(op *history.Op, format string, args ...any) error {
	p := op.Process
	if p == anonymous {
		p = history.NoProcess
	}
	return &OpError{Model: c.model, Index: op.Index, Process: p, F: op.F, Msg: fmt.Sprintf(format, args...)}
}

// unknownF is the error for an operation outside the model.
func (c *run) unknownF(op *history.Op, want string) error {
	return c.opErr(op, "the %s model has no operation %q (expected %s); is this the right model?", c.model, op.F, want)
}

// ref names op; withValue adds its value.
func (c *run) ref(op *history.Op, withValue bool) OpRef {
	r := OpRef{Index: -1, InvokeIndex: op.Index, F: op.F, Type: op.Type.String()}
	if p := c.events[op.Call].Process; p >= 0 {
		n := int64(p)
		r.Process = &n
	}
	if op.Return >= 0 {
		r.Index = c.events[op.Return].Index
	}
	if withValue {
		r.Value = op.Input
		if op.Type == history.OK {
			r.Value = op.Output
		}
	}
	return r
}

// note adds a phrase for Summary.
func (c *run) note(format string, args ...any) {
	c.r.notes = append(c.r.notes, fmt.Sprintf(format, args...))
}

// value returns what an operation carried: its argument, or its result when
// the invoke had none (some histories put the element only on the ok).
func value(op *history.Op) history.Value {
	if op.Input != nil {
		return op.Input
	}
	return op.Output
}

// keyOf returns a map key identifying v among history values: v itself when
// it is comparable, its canonical text otherwise.
func keyOf(v history.Value) any {
	switch v.(type) {
	case nil, bool, int64, float64, string:
		return v
	}
	return composite(history.Key(v))
}

// composite is the key of a list or map value; a type of its own, so that
// the text of [1 2] never equals the string "[1,2]".
type composite string

// interner numbers distinct values in the order it first sees them.
// Integers and strings, the usual elements, have maps of their own: a map
// keyed by interface values costs several times as much per lookup, and a
// set-full check looks up every element of every read.
type interner struct {
	ints  map[int64]int
	strs  map[string]int
	other map[any]int
	vals  []history.Value
}

func newInterner() *interner {
	return &interner{ints: map[int64]int{}, strs: map[string]int{}, other: map[any]int{}}
}

// id returns v's number, assigning the next one when v is new.
func (in *interner) id(v history.Value) (int, bool) {
	switch x := v.(type) {
	case int64:
		if i, ok := in.ints[x]; ok {
			return i, false
		}
		in.ints[x] = len(in.vals)
	case string:
		if i, ok := in.strs[x]; ok {
			return i, false
		}
		in.strs[x] = len(in.vals)
	default:
		k := keyOf(v)
		if i, ok := in.other[k]; ok {
			return i, false
		}
		in.other[k] = len(in.vals)
	}
	in.vals = append(in.vals, v)
	return len(in.vals) - 1, true
}

// lookup returns v's number, or -1.
func (in *interner) lookup(v history.Value) int {
	var i int
	var ok bool
	switch x := v.(type) {
	case int64:
		i, ok = in.ints[x]
	case string:
		i, ok = in.strs[x]
	default:
		i, ok = in.other[keyOf(v)]
	}
	if !ok {
		return -1
	}
	return i
}

// compareValues orders values for reports: nil, booleans, numbers by
// value, strings, lists element by element, then maps by their text.
func compareValues(a, b history.Value) int {
	if c := cmp.Compare(valueRank(a), valueRank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
		if c := cmp.Compare(float64(x), b.(float64)); c != 0 {
			return c
		}
		return -1 // an integer before the equal float
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
		if c := cmp.Compare(x, float64(b.(int64))); c != 0 {
			return c
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case []history.Value:
		y := b.([]history.Value)
		for i := range min(len(x), len(y)) {
			if c := compareValues(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	}
	return strings.Compare(history.Key(a), history.Key(b))
}

func valueRank(v history.Value) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64, float64:
		return 2
	case string:
		return 3
	case []history.Value:
		return 4
	case map[string]history.Value:
		return 5
	}
	return 6
}

// sortValues sorts vals in report order and returns them.
func sortValues(vals []history.Value) []history.Value {
	slices.SortFunc(vals, compareValues)
	return vals
}

// showSome renders the first few values for a summary line.
func showSome(vals []history.Value) string {
	const shown = 3
	parts := make([]string, 0, shown+1)
	for i, v := range vals {
		if i == shown {
			parts = append(parts, "and "+strconv.Itoa(len(vals)-shown)+" more")
			break
		}
		parts = append(parts, history.Show(v))
	}
	return strings.Join(parts, ", ")
}

// elements reads a collection result: a list or set of values.
func (c *run) elements(op *history.Op, what string) ([]history.Value, error) {
	switch v := op.Output.(type) {
	case []history.Value:
		return v, nil
	case nil:
		return nil, c.opErr(op, "an ok read must return %s, found nil", what)
	}
	return nil, c.opErr(op, "an ok read must return %s, found %s", what, history.Show(op.Output))
}

// plural returns "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
