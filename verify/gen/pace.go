package gen

import "time"

// Stagger spaces g's ops by random delays, uniform in [0, 2·dt) and so dt
// on average, each counted from the previous op's Time; the first op is not
// delayed. The delays come from stream seed in the run (Context.Rand), one
// drawn per op handed out. g sees the time its next op will run at, so a
// TimeLimit inside Stagger cuts by scheduled time, as one outside does.
func Stagger(seed uint64, dt time.Duration, g Generator) Generator {
	return &spacer{stream: seed, random: true, dt: dt, g: g}
}

// Delay spaces g's ops by exactly dt, counted from the previous op's Time;
// the first op is not delayed.
func Delay(dt time.Duration, g Generator) Generator {
	return &spacer{dt: dt, g: g}
}

type spacer struct {
	stream  uint64
	bound   bool // r is the stream's source in the run
	r       Rand
	random  bool
	dt      time.Duration
	started bool          // an op was handed out
	next    time.Duration // earliest Time of the next op, once started
	g       Generator
}

func (s *spacer) Next(ctx Context) (Op, Generator, Status) {
	if s.random && !s.bound {
		b := *s
		b.r, b.bound = ctx.Rand(s.stream), true
		s = &b
	}
	c := ctx
	if s.started {
		c.Time = max(c.Time, s.next)
	}
	op, next, st := s.g.Next(c)
	switch st {
	case Ready:
		n := *s
		n.g, n.started = next, true
		gap := s.dt
		if s.random {
			gap = n.r.Duration(2 * s.dt)
		}
		n.next = op.Time + gap
		return op, &n, Ready
	case Pending:
		if next == s.g {
			return pending(wakeAt(op, c.Time), s)
		}
		n := *s
		n.g = next
		return pending(wakeAt(op, c.Time), &n)
	case Exhausted:
		return Op{}, spent, Exhausted
	}
	return op, next, st
}

func (s *spacer) Update(ctx Context, ev Event) Generator {
	next := s.g.Update(ctx, ev)
	if next == s.g {
		return s
	}
	n := *s
	n.g = next
	return &n
}

// Limit hands out at most n of g's ops.
func Limit(n int, g Generator) Generator {
	if n <= 0 {
		return spent
	}
	return &limit{n: n, g: g}
}

type limit struct {
	n int // ops left, > 0
	g Generator
}

func (l *limit) Next(ctx Context) (Op, Generator, Status) {
	op, next, st := l.g.Next(ctx)
	switch st {
	case Ready:
		if l.n == 1 {
			return op, spent, Ready
		}
		return op, &limit{n: l.n - 1, g: next}, Ready
	case Pending:
		if next == l.g {
			return pending(wakeAt(op, ctx.Time), l)
		}
		return pending(wakeAt(op, ctx.Time), &limit{n: l.n, g: next})
	case Exhausted:
		return Op{}, spent, Exhausted
	}
	return op, next, st
}

func (l *limit) Update(ctx Context, ev Event) Generator {
	next := l.g.Update(ctx, ev)
	if next == l.g {
		return l
	}
	return &limit{n: l.n, g: next}
}

// TimeLimit hands out g's ops until d has passed since TimeLimit was first
// asked, then is exhausted. An op scheduled at or after the limit is not
// handed out: TimeLimit waits for the limit instead, since an earlier op may
// still come (a thread completing, say).
func TimeLimit(d time.Duration, g Generator) Generator {
	return &timeLimit{d: d, g: g}
}

type timeLimit struct {
	d       time.Duration
	started bool
	until   time.Duration
	g       Generator
}

func (t *timeLimit) Next(ctx Context) (Op, Generator, Status) {
	if !t.started {
		t = &timeLimit{d: t.d, started: true, until: ctx.Time + t.d, g: t.g}
	}
	if ctx.Time >= t.until {
		return Op{}, spent, Exhausted
	}
	c := ctx
	if c.horizon == 0 || t.until < c.horizon {
		c.horizon = t.until
	}
	op, next, st := t.g.Next(c)
	switch st {
	case Ready:
		if op.Time >= t.until {
			// A generator outside this package that set Time itself; g
			// keeps its op, since it was not handed out.
			return pending(t.until, t)
		}
		return op, &timeLimit{d: t.d, started: true, until: t.until, g: next}, Ready
	case Pending:
		w := earlier(wakeAt(op, ctx.Time), t.until)
		if next == t.g {
			return pending(w, t)
		}
		return pending(w, &timeLimit{d: t.d, started: true, until: t.until, g: next})
	case Exhausted:
		return Op{}, spent, Exhausted
	}
	return op, next, st
}

func (t *timeLimit) Update(ctx Context, ev Event) Generator {
	next := t.g.Update(ctx, ev)
	if next == t.g {
		return t
	}
	return &timeLimit{d: t.d, started: t.started, until: t.until, g: next}
}
