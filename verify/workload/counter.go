package workload

import (
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// CounterError is an ok counter read outside the values the counter could
// have held while the read ran.
type CounterError struct {
	Read  OpRef `json:"read"`
	Lower int64 `json:"lower"`
	Value int64 `json:"value"`
	Upper int64 `json:"upper"`
}

// checkCounter implements Counter.
func checkCounter(c *run) error {
	type step struct {
		op    *history.Op
		delta int64
		read  int64
	}
	// What happens at each event position: an add invoked or completed,
	// a read invoked or completed.
	at := make([]*step, len(c.events))
	adds, reads := 0, 0
	for i := range c.ops {
		op := &c.ops[i]
		switch op.F {
		case "add":
			d, ok := value(op).(int64)
			if !ok {
				return c.opErr(op, "an add must carry an integer delta, found %s", history.Show(value(op)))
			}
			adds++
			if op.Type == history.Fail {
				continue
			}
			s := &step{op: op, delta: d}
			at[op.Call] = s
			if op.Type == history.OK {
				at[op.Return] = s
			}
		case "read":
			if op.Type != history.OK {
				continue
			}
			v, ok := op.Output.(int64)
			if !ok {
				return c.opErr(op, "an ok read must return the counter's integer value, found %s", history.Show(op.Output))
			}
			reads++
			s := &step{op: op, read: v}
			at[op.Call], at[op.Return] = s, s
		default:
			return c.unknownF(op, "add or read")
		}
	}

	// Running sums over the events so far: positive and negative deltas of
	// ok adds completed, and of adds (not failed) invoked. At a read's
	// invoke the completed sums are taken; at its completion the invoked
	// ones; lower = posOK(invoke) + negInvoked(completion), upper =
	// posInvoked(completion) + negOK(invoke).
	var posOK, negOK, posInv, negInv int64
	type snapshot struct{ posOK, negOK int64 }
	begun := map[*history.Op]snapshot{}
	var errs []CounterError
	overflow := false
	add := func(a *int64, d int64) {
		s := *a + d // wraps on overflow, which the comparison catches
		if (d > 0 && s < *a) || (d < 0 && s > *a) {
			overflow = true
		}
		*a = s
	}
	for pos, s := range at {
		if s == nil {
			continue
		}
		op := s.op
		switch {
		case op.F == "add" && pos == op.Call:
			if s.delta >= 0 {
				add(&posInv, s.delta)
			} else {
				add(&negInv, s.delta)
			}
		case op.F == "add":
			if s.delta >= 0 {
				add(&posOK, s.delta)
			} else {
				add(&negOK, s.delta)
			}
		case pos == op.Call:
			begun[op] = snapshot{posOK, negOK}
		default:
			b := begun[op]
			delete(begun, op)
			lower, upper := b.posOK, b.negOK
			add(&lower, negInv)
			add(&upper, posInv)
			if s.read < lower || s.read > upper {
				errs = append(errs, CounterError{Read: c.ref(op, false), Lower: lower, Value: s.read, Upper: upper})
			}
		}
		if overflow {
			return c.opErr(op, "the sum of the add deltas up to this op overflows a 64-bit integer")
		}
	}

	f := c.r.Fields
	f["read_count"], f["add_count"], f["error_count"], f["errors"] = reads, adds, len(errs), nonNilSlice(errs)
	if len(errs) > 0 {
		e := errs[0]
		c.r.Valid = linear.False
		c.note("%s out of bounds; first: the read completed at index %d returned %d, but the counter was between %d and %d while it ran",
			plural(len(errs), "read", "reads"), e.Read.Index, e.Value, e.Lower, e.Upper)
		return nil
	}
	c.r.Valid = linear.True
	if reads == 0 {
		c.note("%s and no ok read: nothing to contradict", plural(adds, "add", "adds"))
	} else {
		c.note("all %s within bounds", plural(reads, "read", "reads"))
	}
	return nil
}
