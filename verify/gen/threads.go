package gen

import (
	"math"
	"slices"
)

// Clients runs g on the client threads only: g sees no nemesis thread, free
// or not, and hears only of client threads' events.
func Clients(g Generator) Generator { return &route{g: g, lo: 0, hi: math.MaxInt} }

// Nemesis runs g on the nemesis thread only. Inside it, client ops (F) go to
// the nemesis thread too, so a schedule may be written either way.
func Nemesis(g Generator) Generator { return &route{g: g, lo: NemesisThread, hi: 0} }

// route runs g on the threads in [lo, hi) of its scope.
type route struct {
	g      Generator
	lo, hi int
}

func (r *route) Next(ctx Context) (Op, Generator, Status) {
	op, next, st := r.g.Next(ctx.restrict(r.lo, r.hi))
	if next == r.g {
		return op, r, st
	}
	return op, &route{g: next, lo: r.lo, hi: r.hi}, st
}

func (r *route) Update(ctx Context, ev Event) Generator {
	c := ctx.restrict(r.lo, r.hi)
	if ev.Thread < c.lo || ev.Thread >= c.hi {
		return r
	}
	next := r.g.Update(c, ev)
	if next == r.g {
		return r
	}
	return &route{g: next, lo: r.lo, hi: r.hi}
}

// EachThread gives each client thread of its scope its own generator, made
// by f(thread) when EachThread is first asked (so f must be pure: it may be
// called again for the same thread). Each thread's generator sees only its
// own thread and hears only its events. When several have ops, the soonest
// is handed out first; EachThread is exhausted when all of them are.
func EachThread(f func(thread int) Generator) Generator { return &eachThread{f: f} }

type eachThread struct {
	f    func(thread int) Generator
	lo   int         // the thread of gens[0]
	gens []Generator // per thread, made on the first ask; nil before
}

func (e *eachThread) Next(ctx Context) (Op, Generator, Status) {
	c := ctx.clients()
	n := e
	if n.gens == nil {
		lo, hi := c.Scope()
		if hi <= lo {
			return Op{}, spent, Exhausted
		}
		gens := make([]Generator, hi-lo)
		for i := range gens {
			gens[i] = e.f(lo + i)
		}
		n = &eachThread{f: e.f, lo: lo, gens: gens}
	}
	gens, changed, op, st := soonest(n.gens, func(i int) Context {
		return c.restrict(n.lo+i, n.lo+i+1)
	})
	switch {
	case st == Exhausted:
		return Op{}, spent, Exhausted
	case changed:
		return op, &eachThread{f: n.f, lo: n.lo, gens: gens}, st
	}
	return op, n, st
}

func (e *eachThread) Update(ctx Context, ev Event) Generator {
	i := ev.Thread - e.lo
	if i < 0 || i >= len(e.gens) {
		return e
	}
	next := e.gens[i].Update(ctx.restrict(ev.Thread, ev.Thread+1), ev)
	if next == e.gens[i] {
		return e
	}
	gens := slices.Clone(e.gens)
	gens[i] = next
	return &eachThread{f: e.f, lo: e.lo, gens: gens}
}

// Reserved is a group of Reserve: Threads client threads that run Gen.
type Reserved struct {
	Threads int
	Gen     Generator
}

// Reserve splits the client threads of its scope: the first groups[0].Threads
// run groups[0].Gen, the next groups[1].Threads run groups[1].Gen, and so on;
// the threads left over run rest (nil: none). A group that gets no thread
// never runs. When several groups have ops, the soonest is handed out first;
// Reserve is exhausted when every group that has threads is. It splits
// client threads only: run the nemesis beside it with Any.
func Reserve(groups []Reserved, rest Generator) Generator {
	r := &reserve{}
	for _, g := range groups {
		r.sizes = append(r.sizes, max(g.Threads, 0))
		r.gens = append(r.gens, g.Gen)
	}
	if rest != nil {
		r.sizes = append(r.sizes, math.MaxInt)
		r.gens = append(r.gens, rest)
	}
	return r
}

type reserve struct {
	sizes []int       // threads per group; never written
	gens  []Generator // per group; spent when exhausted or threadless; copy on write
}

// bounds returns group i's threads, [lo, hi), within c's client threads.
func (r *reserve) bounds(c Context, i int) (lo, hi int) {
	lo, end := c.Scope()
	for j := 0; j < i; j++ {
		lo += min(r.sizes[j], end-lo)
	}
	return lo, lo + min(r.sizes[i], end-lo)
}

func (r *reserve) Next(ctx Context) (Op, Generator, Status) {
	c := ctx.clients()
	gens, threadless := r.gens, false
	for i, g := range gens {
		if lo, hi := r.bounds(c, i); hi <= lo && g != spent {
			// It would be Pending forever and keep Reserve from ending.
			if !threadless {
				gens, threadless = slices.Clone(gens), true
			}
			gens[i] = spent
		}
	}
	gens, changed, op, st := soonest(gens, func(i int) Context {
		return c.restrict(r.bounds(c, i))
	})
	switch {
	case st == Exhausted:
		return Op{}, spent, Exhausted
	case changed || threadless:
		return op, &reserve{sizes: r.sizes, gens: gens}, st
	}
	return op, r, st
}

func (r *reserve) Update(ctx Context, ev Event) Generator {
	c := ctx.clients()
	for i, g := range r.gens {
		lo, hi := r.bounds(c, i)
		if ev.Thread < lo || ev.Thread >= hi {
			continue
		}
		next := g.Update(c.restrict(lo, hi), ev)
		if next == g {
			return r
		}
		gens := slices.Clone(r.gens)
		gens[i] = next
		return &reserve{sizes: r.sizes, gens: gens}
	}
	return r
}
