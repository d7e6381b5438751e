package workload

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Fork is two ok reads of the same keys that saw inserts in incompatible
// orders: A saw AOnly inserted and not BOnly, B saw BOnly and not AOnly. In
// any serial order one of the two reads comes first and sees a subset of
// what the other sees, so no serial order explains both.
type Fork struct {
	A     OpRef         `json:"a"`
	B     OpRef         `json:"b"`
	AOnly history.Value `json:"a_only"`
	BOnly history.Value `json:"b_only"`
	// Pairs counts the read pairs that fork this way: the reads that saw
	// exactly what A saw times those that saw exactly what B saw.
	Pairs int `json:"pairs"`
}

// BadValue is a long-fork read of a value its key cannot hold.
type BadValue struct {
	Read  OpRef         `json:"read"`
	Key   history.Value `json:"key"`
	Value history.Value `json:"value"`
	// Expected is what the key's one write wrote (Source "write"), or,
	// when the history holds no write of it, what an earlier read saw
	// (Source "read"); From is that write or read.
	Expected history.Value `json:"expected"`
	Source   string        `json:"source"`
	From     OpRef         `json:"from"`
}

// mop is one micro-operation [f k v].
type mop struct {
	f    string
	k, v history.Value
}

// mops reads a list of micro-operations.
func (c *run) mops(op *history.Op, v history.Value) ([]mop, error) {
	const want = "a list of micro-operations such as [[r 0 nil] [r 1 nil]] or [[w 0 1]]"
	list, ok := v.([]history.Value)
	if !ok || len(list) == 0 {
		return nil, c.opErr(op, "expected %s, found %s", want, history.Show(v))
	}
	out := make([]mop, len(list))
	for i, m := range list {
		t, ok := m.([]history.Value)
		if !ok || len(t) != 3 {
			return nil, c.opErr(op, "micro-operation %d is %s; expected [f key value]", i, history.Show(m))
		}
		f, ok := t[0].(string)
		if !ok || f != "r" && f != "w" {
			return nil, c.opErr(op, "micro-operation %d is %s; expected r (read) or w (write)", i, history.Show(m))
		}
		out[i] = mop{f, t[1], t[2]}
	}
	return out, nil
}

// checkLongFork implements LongFork.
func checkLongFork(c *run) error {
	type read struct {
		op  *history.Op
		ms  []mop
		sig string // the read's group: its keys, in order
	}
	type write struct {
		op  *history.Op
		val history.Value
	}
	var reads []read
	writes := map[any]write{}
	var multi []history.Value
	multiSeen := map[any]bool{}
	nwrites := 0
	for i := range c.ops {
		op := &c.ops[i]
		v := value(op)
		if v == nil {
			return c.opErr(op, "an op carries no value; expected micro-operations such as [[r 0 nil]] or [[w 0 1]]")
		}
		ms, err := c.mops(op, v)
		if err != nil {
			return err
		}
		if len(ms) == 1 && ms[0].f == "w" {
			// Jepsen counts every invoked write, even one that failed:
			// the workload must never try a key twice.
			nwrites++
			k := keyOf(ms[0].k)
			if _, dup := writes[k]; dup && !multiSeen[k] {
				multiSeen[k] = true
				multi = append(multi, ms[0].k)
			}
			if _, dup := writes[k]; !dup {
				writes[k] = write{op, ms[0].v}
			}
			continue
		}
		if slices.ContainsFunc(ms, func(m mop) bool { return m.f != "r" }) {
			return c.opErr(op, "a long-fork op either reads keys or writes one key; found %s", history.Show(v))
		}
		if op.Type != history.OK {
			continue
		}
		if op.Output == nil {
			return c.opErr(op, "an ok read returned no value")
		}
		out, err := c.mops(op, op.Output)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(out, func(m mop) bool { return m.f != "r" }) {
			return c.opErr(op, "an ok read returned %s, which is not all reads", history.Show(op.Output))
		}
		keys := make([]history.Value, len(out))
		for j, m := range out {
			keys[j] = m.k
		}
		sortValues(keys)
		for j := 1; j < len(keys); j++ {
			if history.Equal(keys[j-1], keys[j]) {
				return c.opErr(op, "the read reads key %s twice", history.Show(keys[j]))
			}
		}
		if n := c.o.LongForkGroupSize; n > 0 && len(keys) != n {
			return c.opErr(op, "every read should read %d keys (the group size), but this one read %d: %s", n, len(keys), history.Show(keys))
		}
		var sig strings.Builder
		for _, k := range keys {
			s := history.Key(k)
			sig.WriteString(strconv.Itoa(len(s)))
			sig.WriteByte(':')
			sig.WriteString(s)
		}
		reads = append(reads, read{op, out, sig.String()})
	}
	slices.SortFunc(reads, func(a, b read) int { return cmp.Compare(a.op.Return, b.op.Return) })

	// Values, and early and late reads.
	var bad []BadValue
	type seen struct {
		val history.Value
		op  *history.Op
	}
	firstSeen := map[any]seen{}
	early, late := 0, 0
	for _, r := range reads {
		inserted := 0
		for _, m := range r.ms {
			if m.v == nil {
				continue
			}
			inserted++
			k := keyOf(m.k)
			if multiSeen[k] {
				continue
			}
			if w, ok := writes[k]; ok {
				if !history.Equal(m.v, w.val) {
					bad = append(bad, BadValue{Read: c.ref(r.op, true), Key: m.k, Value: m.v, Expected: w.val, Source: "write", From: c.ref(w.op, true)})
				}
				continue
			}
			if s, ok := firstSeen[k]; !ok {
				firstSeen[k] = seen{m.v, r.op}
			} else if !history.Equal(m.v, s.val) {
				bad = append(bad, BadValue{Read: c.ref(r.op, true), Key: m.k, Value: m.v, Expected: s.val, Source: "read", From: c.ref(s.op, true)})
			}
		}
		switch inserted {
		case 0:
			early++
		case len(r.ms):
			late++
		}
	}

	// Forks, group by group, comparing each distinct pattern of what was
	// seen once: reads that saw the same keys fork alike.
	type pattern struct {
		first   *history.Op
		present map[any]bool
		count   int
	}
	var forks []Fork
	groupOrder := []string{}
	groups := map[string][]*pattern{}
	bySig := map[string]map[string]*pattern{}
	for _, r := range reads {
		if _, ok := groups[r.sig]; !ok {
			groupOrder = append(groupOrder, r.sig)
			groups[r.sig] = nil
			bySig[r.sig] = map[string]*pattern{}
		}
		present := map[any]bool{}
		var ps strings.Builder
		for _, m := range sortedMops(r.ms) {
			if m.v != nil {
				present[keyOf(m.k)] = true
				ps.WriteByte('1')
			} else {
				ps.WriteByte('0')
			}
		}
		p := bySig[r.sig][ps.String()]
		if p == nil {
			p = &pattern{first: r.op, present: present}
			bySig[r.sig][ps.String()] = p
			groups[r.sig] = append(groups[r.sig], p)
		}
		p.count++
	}
	keysOf := map[*history.Op][]mop{}
	for _, r := range reads {
		keysOf[r.op] = sortedMops(r.ms)
	}
	forkPairs := 0
	for _, g := range groupOrder {
		ps := groups[g]
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				a, b := ps[i], ps[j]
				var aOnly, bOnly history.Value
				var haveA, haveB bool
				for _, m := range keysOf[a.first] {
					k := keyOf(m.k)
					switch {
					case a.present[k] && !b.present[k] && !haveA:
						aOnly, haveA = m.k, true
					case b.present[k] && !a.present[k] && !haveB:
						bOnly, haveB = m.k, true
					}
				}
				if haveA && haveB {
					forks = append(forks, Fork{A: c.ref(a.first, true), B: c.ref(b.first, true), AOnly: aOnly, BOnly: bOnly, Pairs: a.count * b.count})
					forkPairs += a.count * b.count
				}
			}
		}
	}

	f := c.r.Fields
	f["read_count"], f["early_read_count"], f["late_read_count"] = len(reads), early, late
	f["write_count"], f["group_count"], f["group_size"] = nwrites, len(groupOrder), c.o.LongForkGroupSize
	f["fork_count"], f["forks"] = forkPairs, nonNilSlice(forks)
	f["bad_values"], f["multiple_writes"] = nonNilSlice(bad), nonNil(sortValues(multi))

	if len(forks) > 0 {
		k := forks[0]
		c.note("%s; first: the read completed at index %d saw key %s inserted but not key %s, the read completed at index %d saw key %s but not key %s",
			plural(forkPairs, "forking pair of reads", "forking pairs of reads"),
			k.A.Index, history.Show(k.AOnly), history.Show(k.BOnly), k.B.Index, history.Show(k.BOnly), history.Show(k.AOnly))
	}
	if len(bad) > 0 {
		b := bad[0]
		c.note("%s; first: the read completed at index %d saw key %s = %s, but the %s at index %d has %s",
			plural(len(bad), "bad value", "bad values"), b.Read.Index, history.Show(b.Key), history.Show(b.Value), b.Source, b.From.Index, history.Show(b.Expected))
	}
	switch {
	case len(forks) > 0 || len(bad) > 0:
		c.r.Valid = linear.False
	case len(multi) > 0:
		c.r.Valid = linear.Unknown
		c.r.Reason = "keys written more than once (" + showSome(multi) + "); long-fork needs one write per key"
	default:
		c.r.Valid = linear.True
		c.note("%s in %s, no forks (%d early, %d late)", plural(len(reads), "read", "reads"), plural(len(groupOrder), "group", "groups"), early, late)
	}
	return nil
}

// sortedMops returns the micro-operations ordered by key, so that reads of
// one group list their keys alike.
func sortedMops(ms []mop) []mop {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b mop) int { return compareValues(a.k, b.k) })
	return out
}
