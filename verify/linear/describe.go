package linear

import "strconv"

// StateString renders a state with the spec's Describer, or as a number.
func StateString(spec any, s State) string {
	if d, ok := spec.(Describer); ok {
		return d.DescribeState(s)
	}
	return "state " + strconv.FormatUint(s, 10)
}

// OpString renders an operation with the spec's Describer, or as a number.
func OpString(spec any, op int) string {
	if d, ok := spec.(Describer); ok {
		return d.DescribeOp(op)
	}
	return "op " + strconv.Itoa(op)
}

// Step is one operation of a linearization with the states around it.
type Step struct {
	Op            int // partition operation index
	Before, After State
}

// Replay applies a sequence of partition operations from the initial state
// and returns each step with its states, stopping at the first impossible
// one. It uses a fresh walk of spec, so call it after the check is done.
func Replay(spec Spec, order []int) []Step {
	out := make([]Step, 0, len(order))
	s := spec.Init()
	for _, op := range order {
		next, ok := spec.Step(s, op)
		if !ok {
			break
		}
		out = append(out, Step{Op: op, Before: s, After: next})
		s = next
	}
	return out
}
