package gen

import (
	"slices"
	"time"
)

// Seq runs gs one after another: each starts when the one before it is
// exhausted, without waiting for that one's ops to complete (Phases waits).
// A later generator never runs before an earlier one's op: it sees the time
// as no earlier than the latest op Seq handed out, so its ops are not
// scheduled before that one.
func Seq(gs ...Generator) Generator {
	if len(gs) == 0 {
		return spent
	}
	return &seq{cur: gs[0], rest: slices.Clone(gs[1:])}
}

// Then runs a, then b: Seq(a, b).
func Then(a, b Generator) Generator { return Seq(a, b) }

type seq struct {
	cur  Generator
	rest []Generator // shared between values and never written
	mark time.Duration
}

func (g *seq) Next(ctx Context) (Op, Generator, Status) {
	c := ctx
	c.Time = max(c.Time, g.mark)
	cur, rest := g.cur, g.rest
	for {
		op, next, st := cur.Next(c)
		switch st {
		case Ready:
			return op, &seq{cur: next, rest: rest, mark: max(g.mark, op.Time)}, Ready
		case Pending:
			if next == g.cur {
				return pending(wakeAt(op, c.Time), g)
			}
			return pending(wakeAt(op, c.Time), &seq{cur: next, rest: rest, mark: g.mark})
		case Exhausted:
			if len(rest) == 0 {
				return Op{}, spent, Exhausted
			}
			cur, rest = rest[0], rest[1:]
		default:
			return op, next, st // not a status: let the interpreter reject it
		}
	}
}

func (g *seq) Update(ctx Context, ev Event) Generator {
	cur := g.cur.Update(ctx, ev)
	if cur == g.cur {
		return g
	}
	return &seq{cur: cur, rest: g.rest, mark: g.mark}
}

// Phases runs gs one after another, like Seq, but each phase begins only
// when every op the previous phase handed out has completed. Ops of other
// generators running beside it (Any, say) are not waited for.
func Phases(gs ...Generator) Generator {
	if len(gs) == 0 {
		return spent
	}
	return &phases{cur: gs[0], rest: slices.Clone(gs[1:])}
}

type phases struct {
	cur  Generator
	rest []Generator // shared between values and never written
	out  []int       // threads running an op of the current phase, ascending; copy on write
}

func (g *phases) Next(ctx Context) (Op, Generator, Status) {
	cur, rest := g.cur, g.rest
	for {
		op, next, st := cur.Next(ctx)
		switch st {
		case Ready:
			i, _ := slices.BinarySearch(g.out, op.Thread)
			return op, &phases{cur: next, rest: rest, out: slices.Insert(slices.Clip(g.out), i, op.Thread)}, Ready
		case Pending:
			if next == g.cur {
				return pending(wakeAt(op, ctx.Time), g)
			}
			return pending(wakeAt(op, ctx.Time), &phases{cur: next, rest: rest, out: g.out})
		case Exhausted:
			if len(rest) == 0 {
				return Op{}, spent, Exhausted
			}
			if len(g.out) > 0 {
				// Wait for the completions; spent keeps the finished
				// phase from being asked again.
				return pending(0, &phases{cur: spent, rest: rest, out: g.out})
			}
			cur, rest = rest[0], rest[1:]
		default:
			return op, next, st
		}
	}
}

func (g *phases) Update(ctx Context, ev Event) Generator {
	out := g.out
	if ev.Kind == Completed {
		// The thread's next completion after Phases handed it an op is that
		// op's: a thread runs one op at a time.
		if i, ok := slices.BinarySearch(out, ev.Thread); ok {
			out = slices.Delete(slices.Clone(out), i, i+1)
		}
	}
	cur := g.cur.Update(ctx, ev)
	if cur == g.cur && len(out) == len(g.out) {
		return g
	}
	return &phases{cur: cur, rest: g.rest, out: out}
}

// Synchronize waits until every thread in its scope is free, then runs g.
// Inside Clients it waits for the client threads only.
func Synchronize(g Generator) Generator { return &synchronize{g: g} }

type synchronize struct {
	g       Generator
	started bool
}

func (g *synchronize) Next(ctx Context) (Op, Generator, Status) {
	if g.started {
		op, next, st := g.g.Next(ctx)
		if next == g.g {
			return op, g, st
		}
		return op, &synchronize{g: next, started: true}, st
	}
	if lo, hi := ctx.Scope(); len(ctx.Free) < hi-lo {
		return pending(0, g)
	}
	return (&synchronize{g: g.g, started: true}).Next(ctx)
}

func (g *synchronize) Update(ctx Context, ev Event) Generator {
	if !g.started {
		return g // g has not started: what happens before is none of its business
	}
	next := g.g.Update(ctx, ev)
	if next == g.g {
		return g
	}
	return &synchronize{g: next, started: true}
}

// Cycle runs Seq(gs...) forever, restarting from the original generators
// each time the sequence is exhausted. A pass that is exhausted at once,
// handing out nothing, ends the cycle: it would spin forever otherwise.
func Cycle(gs ...Generator) Generator {
	if len(gs) == 0 {
		return spent
	}
	gs = slices.Clone(gs)
	return &cycle{orig: gs, s: &seq{cur: gs[0], rest: gs[1:]}}
}

type cycle struct {
	orig []Generator
	s    *seq
}

func (g *cycle) Next(ctx Context) (Op, Generator, Status) {
	op, next, st := g.s.Next(ctx)
	if st == Exhausted {
		// Keep the mark: the new pass must not run before the last op.
		fresh := &seq{cur: g.orig[0], rest: g.orig[1:], mark: g.s.mark}
		op, next, st = fresh.Next(ctx)
		if st == Exhausted {
			return Op{}, spent, Exhausted
		}
	}
	s, ok := next.(*seq)
	if !ok {
		return op, next, st
	}
	if s == g.s {
		return op, g, st
	}
	return op, &cycle{orig: g.orig, s: s}, st
}

func (g *cycle) Update(ctx Context, ev Event) Generator {
	s := g.s.Update(ctx, ev).(*seq)
	if s == g.s {
		return g
	}
	return &cycle{orig: g.orig, s: s}
}
