package gen

import "time"

// Once hands out op once, to the first free thread that may take it: the
// nemesis thread if op.Thread is NemesisThread, else the lowest free client
// thread (inside Nemesis, the nemesis thread). op.Time, if set, is the
// earliest time it may run.
func Once(op Op) Generator { return &once{op: op} }

type once struct{ op Op }

func (g *once) Next(ctx Context) (Op, Generator, Status) {
	op, ok := assign(ctx, g.op)
	if !ok {
		return pending(0, g)
	}
	return op, spent, Ready
}

func (g *once) Update(Context, Event) Generator { return g }

// Repeat hands out op forever, to free threads as Once does.
func Repeat(op Op) Generator { return &repeat{op: op} }

type repeat struct{ op Op }

func (g *repeat) Next(ctx Context) (Op, Generator, Status) {
	op, ok := assign(ctx, g.op)
	if !ok {
		return pending(0, g)
	}
	return op, g, Ready
}

func (g *repeat) Update(Context, Event) Generator { return g }

// RepeatN hands out op n times.
func RepeatN(n int, op Op) Generator { return Limit(n, Repeat(op)) }

// Fn hands out, forever, the op f computes; f draws from r, the source of
// stream seed in the run (Context.Rand: the run's seed and this one), whose
// state the generator carries, so the same seeds give the same ops. f is
// called only when some thread is free, and must be a pure function of its
// arguments: a call whose op no free thread may take is thrown away, with
// its draws, and made again later.
func Fn(seed uint64, f func(ctx Context, r *Rand) Op) Generator {
	return &fn{stream: seed, f: f}
}

type fn struct {
	stream uint64
	bound  bool // r is the stream's source in the run
	r      Rand
	f      func(ctx Context, r *Rand) Op
}

func (g *fn) Next(ctx Context) (Op, Generator, Status) {
	if !g.bound {
		b := *g
		b.r, b.bound = ctx.Rand(g.stream), true
		g = &b
	}
	if len(ctx.Free) == 0 {
		return pending(0, g)
	}
	r := g.r
	op, ok := assign(ctx, g.f(ctx, &r))
	if !ok {
		return pending(0, g)
	}
	return op, &fn{stream: g.stream, bound: true, r: r, f: g.f}, Ready
}

func (g *fn) Update(Context, Event) Generator { return g }

// Sleep hands out nothing for d from when it is first asked, then is
// exhausted. In a Seq it is first asked when the generator before it is
// exhausted, which is when that one's last op was handed out (or, if that op
// was scheduled later, at the op's time: Seq never lets a later generator
// run before an earlier one's op).
func Sleep(d time.Duration) Generator { return &sleep{d: d} }

type sleep struct {
	d       time.Duration
	started bool
	until   time.Duration
}

func (g *sleep) Next(ctx Context) (Op, Generator, Status) {
	if !g.started {
		g = &sleep{d: g.d, started: true, until: ctx.Time + g.d}
	}
	if ctx.Time >= g.until {
		return Op{}, spent, Exhausted
	}
	return pending(g.until, g)
}

func (g *sleep) Update(Context, Event) Generator { return g }
