package gen

import (
	"slices"
	"time"
)

// Mix hands out each op from a generator of gs chosen uniformly at random
// among those not exhausted. The choice is drawn when the previous op is
// handed out and held until the chosen generator gives an op: if it is
// Pending, so is Mix, rather than take another, so that the frequencies
// (and the sequence, for a seed) do not depend on timing. The choices come
// from stream seed in the run (Context.Rand).
func Mix(seed uint64, gs ...Generator) Generator {
	if len(gs) == 0 {
		return spent
	}
	return &mix{stream: seed, gens: slices.Clone(gs), cur: -1}
}

type mix struct {
	stream uint64
	r      Rand
	gens   []Generator // not exhausted; copy on write
	cur    int         // the chosen one; -1 until first asked
}

func (g *mix) Next(ctx Context) (Op, Generator, Status) {
	if g.cur < 0 {
		b := *g
		b.r = ctx.Rand(g.stream)
		b.cur = b.r.IntN(len(b.gens))
		g = &b
	}
	r, gens, cur := g.r, g.gens, g.cur
	for {
		op, next, st := gens[cur].Next(ctx)
		switch st {
		case Ready:
			if next != gens[cur] {
				gens = slices.Clone(gens)
				gens[cur] = next
			}
			return op, &mix{stream: g.stream, r: r, gens: gens, cur: r.IntN(len(gens))}, Ready
		case Pending:
			if next == gens[cur] && cur == g.cur {
				return pending(wakeAt(op, ctx.Time), g)
			}
			gens = slices.Clone(gens)
			gens[cur] = next
			return pending(wakeAt(op, ctx.Time), &mix{stream: g.stream, r: r, gens: gens, cur: cur})
		case Exhausted:
			gens = slices.Delete(slices.Clone(gens), cur, cur+1)
			if len(gens) == 0 {
				return Op{}, spent, Exhausted
			}
			cur = r.IntN(len(gens))
		default:
			return op, next, st
		}
	}
}

func (g *mix) Update(ctx Context, ev Event) Generator {
	gens, changed := updateAll(g.gens, ctx, ev)
	if !changed {
		return g
	}
	return &mix{stream: g.stream, r: g.r, gens: gens, cur: g.cur}
}

// updateAll passes ev to every generator of gs, copying gs only if one of
// them changes.
func updateAll(gs []Generator, ctx Context, ev Event) ([]Generator, bool) {
	var out []Generator
	for i, c := range gs {
		next := c.Update(ctx, ev)
		if next == c {
			continue
		}
		if out == nil {
			out = slices.Clone(gs)
		}
		out[i] = next
	}
	if out == nil {
		return gs, false
	}
	return out, true
}

// Any asks every generator of gs and hands out the op that may run soonest
// (the earliest Time; on a tie, the first in gs). It is how a nemesis
// schedule runs beside the clients: Any(Clients(workload), Nemesis(faults)).
// It is exhausted when all of gs are.
func Any(gs ...Generator) Generator {
	if len(gs) == 0 {
		return spent
	}
	return &anyOf{gens: slices.Clone(gs)}
}

type anyOf struct {
	gens []Generator // exhausted ones are spent; copy on write
}

func (g *anyOf) Next(ctx Context) (Op, Generator, Status) {
	gens, changed, op, st := soonest(g.gens, func(int) Context { return ctx })
	switch {
	case st == Exhausted:
		return Op{}, spent, Exhausted
	case changed:
		return op, &anyOf{gens: gens}, st
	}
	return op, g, st
}

func (g *anyOf) Update(ctx Context, ev Event) Generator {
	gens, changed := updateAll(g.gens, ctx, ev)
	if !changed {
		return g
	}
	return &anyOf{gens: gens}
}

// soonest asks each generator of gs that is not spent, with the context
// sub(i) gives it, and answers with the op that may run soonest (the
// earliest Time; on a tie, the lowest i), or Pending with the earliest
// wake-up time, or Exhausted when all of gs are. It returns gs as they stand
// afterwards: the chosen one advanced, the Pending ones advanced too (they
// may have started a clock), the exhausted ones replaced by spent, and the
// other Ready ones unchanged, since their ops were not handed out. gs is
// copied on the first change, never written.
func soonest(gs []Generator, sub func(i int) Context) (out []Generator, changed bool, op Op, st Status) {
	out = gs
	set := func(i int, g Generator) {
		if !changed {
			out = slices.Clone(gs)
			changed = true
		}
		out[i] = g
	}
	best, live := -1, 0
	var bestNext Generator
	var wake time.Duration
	for i, c := range gs {
		if c == spent {
			continue
		}
		ctx := sub(i)
		o, next, s := c.Next(ctx)
		switch s {
		case Ready:
			live++
			if best < 0 || o.Time < op.Time {
				best, op, bestNext = i, o, next
			}
		case Pending:
			live++
			wake = earlier(wake, wakeAt(o, ctx.Time))
			if next != c {
				set(i, next)
			}
		default:
			// Exhausted, or not a status: a child that breaks the
			// protocol is treated as finished rather than trusted.
			set(i, spent)
		}
	}
	switch {
	case best >= 0:
		if bestNext != gs[best] {
			set(best, bestNext)
		}
		return out, changed, op, Ready
	case live > 0:
		return out, changed, Op{Time: wake}, Pending
	}
	return out, changed, Op{}, Exhausted
}

// FlipFlop hands out one op from a, then one from b, then one from a, and so
// on; it is exhausted as soon as the one whose turn it is is.
func FlipFlop(a, b Generator) Generator { return &flipFlop{gens: [2]Generator{a, b}} }

type flipFlop struct {
	gens [2]Generator
	turn int
}

func (g *flipFlop) Next(ctx Context) (Op, Generator, Status) {
	op, next, st := g.gens[g.turn].Next(ctx)
	switch st {
	case Ready:
		n := &flipFlop{gens: g.gens, turn: 1 - g.turn}
		n.gens[g.turn] = next
		return op, n, Ready
	case Pending:
		if next == g.gens[g.turn] {
			return pending(wakeAt(op, ctx.Time), g)
		}
		n := &flipFlop{gens: g.gens, turn: g.turn}
		n.gens[g.turn] = next
		return pending(wakeAt(op, ctx.Time), n)
	case Exhausted:
		return Op{}, spent, Exhausted
	}
	return op, next, st
}

func (g *flipFlop) Update(ctx Context, ev Event) Generator {
	a, b := g.gens[0].Update(ctx, ev), g.gens[1].Update(ctx, ev)
	if a == g.gens[0] && b == g.gens[1] {
		return g
	}
	return &flipFlop{gens: [2]Generator{a, b}, turn: g.turn}
}
