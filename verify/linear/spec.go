// Package linear decides whether a history is linearizable: whether its
// operations can be put in one total order that respects real time (an
// operation that completed before another was invoked comes first) and the
// sequential specification of the object.
//
// The search is Wing & Gong's, with Lowe's memoization of visited
// configurations (the set of linearized operations as a bitset, and the model
// state), over partitions that a model declares independent
// (P-compositionality), checked in parallel. Two reductions keep it small:
// an operation that never changes the state (a read) is linearized as soon
// as it can be and never branched on, and such an operation whose outcome is
// unknown is dropped, since it can neither take effect nor fail to.
//
// The package knows nothing of histories or models: a model compiles its
// operations into a Spec over small integer states, and the checker only
// steps it. The verdict is true, false, or unknown when the deadline or the
// memory bound stopped the search; it is never a guess.
package linear

// State is a model state as the checker sees it: a small integer that the
// Spec gives meaning to. Two configurations with equal States are the same
// configuration, so a Spec whose states are richer than 64 bits interns them.
type State = uint64

// Spec is the sequential specification of one partition, with its operations
// numbered 0..n-1 in the order of the partition's Ops.
//
// The checker calls a Spec from one goroutine at a time, but partitions are
// checked in parallel: partitions must not share a Spec that keeps mutable
// state (an intern table, say).
type Spec interface {
	// Init returns the initial state.
	Init() State
	// Step applies operation op to state s. It returns the next state and
	// whether op, with the result the history recorded for it, is possible
	// in s. Step must be deterministic; see Determinize for models that are
	// not.
	Step(s State, op int) (State, bool)
}

// Neutral is implemented by a Spec that can tell which operations never
// change the state (reads, compare-and-sets that reported a mismatch). The
// checker linearizes those eagerly, which is sound for them alone, and drops
// them when their outcome is unknown.
type Neutral interface {
	// Neutral reports whether Step(s, op) returns s for every s where it
	// succeeds.
	Neutral(op int) bool
}

// Keyed is implemented by a Spec whose state is a product of independent
// parts, one per key, each operation touching one: operations on different
// keys commute and never observe each other.
//
// The checker then branches only on operations of the frontier's key (the
// key of the operation that completes first among those not yet
// linearized). That is sound: in any linearization from a configuration,
// the first operation of the frontier's key can be moved to the front, since
// nothing before it need precede it in real time (it would have to complete
// before that operation was invoked, and so before the frontier operation
// completed, which none does) and it commutes with the other keys'
// operations it passes. The state stays whole; this is a partial-order
// reduction, not a partitioning. It also learns, from the parts of the state,
// which keys' progress cannot be completed (see the search's nogoods).
type Keyed interface {
	// Key returns the key operation op touches.
	Key(op int) int
	// Part returns key's part of state s: two states with equal parts for
	// a key are the same to that key's operations.
	Part(s State, key int) uint64
}

// Growing is implemented by a Spec whose memory grows as it is stepped,
// such as one that interns states richer than 64 bits. The checker charges
// that growth to the check's memory bound (Options.MaxMemory) together
// with its own tables, and stops with verdict unknown when the bound is
// reached, so that the bound holds for the model's tables too.
type Growing interface {
	// Bytes returns the memory the Spec holds, in bytes: an estimate that
	// is never below what it allocated, and that never decreases.
	Bytes() int64
}

// Describer is implemented by a Spec that can render states and operations
// for failure reports and the HTML page.
type Describer interface {
	DescribeState(s State) string
	DescribeOp(op int) string
}

// Op is one operation of a partition: the positions of its invoke and its
// completion in the history's event order. Return < 0 means the operation is
// pending: it may take effect at any point after Call, or never. Pending
// means what history.Op.Pending means, an info completion as much as none:
// build Ops from history operations with model.Interval, which gives an
// info operation Return -1 (its completion's position would make it one
// that certainly took effect by then).
type Op struct {
	Call, Return int
	// ID is the caller's name for the operation (an index into its list of
	// operations); results refer to operations by their position in the
	// partition, and the caller maps them back with ID.
	ID int
}

// Pending reports whether the operation's outcome is unknown.
func (o Op) Pending() bool { return o.Return < 0 }

// Partition is an independent part of a history with its specification.
type Partition struct {
	// Label names the partition in reports, such as "key 3"; empty when the
	// history is not partitioned.
	Label string
	Ops   []Op
	Spec  Spec
}
