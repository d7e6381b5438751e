package linear

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// outcome of one partition's search.
type outcome uint8

const (
	found   outcome = iota // a linearization exists
	refuted                // none exists
	stopped                // the deadline or a cancellation ended the search
	tooBig                 // the memory bound ended the search
	paused                 // the search used its quantum of steps; run it again
)

// frame is one linearized operation on the search stack.
type frame struct {
	op     int32 // local operation number
	forced bool  // pushed by the neutral closure, so never branched on
	fkey   int32 // the frontier key of the configuration it was pushed from
	entry  int32 // the configuration's entry in the visited set
	prev   State // state before the operation
}

// search is the Wing & Gong / Lowe search over one partition. Operations are
// held as a doubly linked list of call and return entries in history order;
// linearizing an operation lifts both entries out of the list.
//
// Local operation i has call entry 2i+1 and return entry 2i+2; entry 0 is the
// list head; -1 ends the list.
type search struct {
	label   string
	ops     int // operations in the partition
	spec    Spec
	orig    []int32 // local op → index in the partition's Ops
	pos     []int   // entry → history position (math.MaxInt for pending returns)
	next    []int32
	prev    []int32
	pending []bool
	neutral []bool
	// k is set when the spec is Keyed; fkey is then the key of the current
	// configuration's frontier operation, the only key whose operations
	// are branched on, and -1 otherwise.
	k    *keyedState
	fkey int32
	// grow is set when the spec is Growing; charged is how much of its
	// memory the budget holds.
	grow    Growing
	charged int64
	budget  *budget

	state State
	bits  []uint64
	// lo and hi are bits's window (see window), kept as bits change.
	lo, hi int
	hash   uint64
	stack  []frame
	seen   *visited
	stop   *atomic.Bool
	// cursor is the entry the scan is at, kept between quanta; started
	// says the initial closure is done.
	cursor  int32
	started bool

	// The deepest point the search reached: the furthest return entry that
	// stopped it, its operation, and the linearization that got there.
	frontier  int
	failed    int32
	best      []int32
	bestValid int
}

func newSearch(p *Partition, b *budget, stop *atomic.Bool) *search {
	neutral, _ := p.Spec.(Neutral)
	keyed, _ := p.Spec.(Keyed)
	s := &search{label: p.Label, ops: len(p.Ops), spec: p.Spec, stop: stop, frontier: -1, failed: -1, budget: b}
	s.grow, _ = p.Spec.(Growing)
	n := len(p.Ops)
	s.orig = make([]int32, 0, n)
	flags := make([]bool, 2*n)
	s.pending, s.neutral = flags[:0:n], flags[n:n:2*n]
	for i, o := range p.Ops {
		isNeutral := neutral != nil && neutral.Neutral(i)
		// An operation that cannot change the state and may never have
		// happened constrains nothing.
		if o.Pending() && isNeutral {
			continue
		}
		s.orig = append(s.orig, int32(i))
		s.pending = append(s.pending, o.Pending())
		s.neutral = append(s.neutral, isNeutral)
	}
	if keyed != nil {
		s.k = newKeyed(keyed, s.orig, b)
	}
	s.fkey = -1
	m := len(s.orig)
	s.pos = make([]int, 2*m+1)
	links := make([]int32, 3*(2*m+1))
	s.next, s.prev = links[:2*m+1], links[2*m+1:2*(2*m+1)]
	order := links[2*(2*m+1) : 2*(2*m+1)][: 0 : 2*m]
	for i, oi := range s.orig {
		o := p.Ops[oi]
		s.pos[2*i+1] = o.Call
		if o.Pending() {
			s.pos[2*i+2] = math.MaxInt
		} else {
			s.pos[2*i+2] = o.Return
		}
		order = append(order, int32(2*i+1), int32(2*i+2))
	}
	slices.SortFunc(order, func(a, b int32) int {
		if s.pos[a] != s.pos[b] {
			if s.pos[a] < s.pos[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	last := int32(0)
	for _, e := range order {
		s.next[last] = e
		s.prev[e] = last
		last = e
	}
	s.next[last] = -1
	s.bits = make([]uint64, (m+63)/64)
	s.seen = newVisited(b)
	s.state = p.Spec.Init()
	return s
}

// charge accounts the growth of a Growing spec since the last call. It
// reports false when the memory bound is reached. The spec's memory stays
// charged until the whole check ends, since its tables live as long as the
// partition does.
func (s *search) charge() bool {
	if s.grow == nil {
		return true
	}
	n := s.grow.Bytes()
	if n <= s.charged {
		return true
	}
	if !s.budget.grow(n - s.charged) {
		return false
	}
	s.charged = n
	return true
}

// step applies operation i in the current state, charging what the spec
// allocated; ok=false means the memory bound was reached.
func (s *search) step(i int32) (next State, possible, ok bool) {
	next, possible = s.spec.Step(s.state, int(s.orig[i]))
	return next, possible, s.charge()
}

// zobrist is operation i's contribution to the hash of a bitset: the hash of
// a set is the xor of its members', so it changes in O(1) as ops are pushed
// and popped.
func zobrist(i int32) uint64 { return mix(uint64(i)*0x2545f4914f6cdd1d + 0x632be59bd9b4e019) }

func isCall(e int32) bool  { return e&1 == 1 }
func opOf(e int32) int32   { return (e - 1) >> 1 }
func callOf(i int32) int32 { return 2*i + 1 }

func (s *search) unlink(e int32) {
	n, p := s.next[e], s.prev[e]
	s.next[p] = n
	if n >= 0 {
		s.prev[n] = p
	}
}

func (s *search) relink(e int32) {
	n, p := s.next[e], s.prev[e]
	s.next[p] = e
	if n >= 0 {
		s.prev[n] = e
	}
}

// pushResult says what became of a push.
type pushResult uint8

const (
	pushed    pushResult = iota
	dead                 // the configuration was visited before, or hits a nogood: it fails
	outOfRoom            // the memory bound stopped it
)

// push linearizes op i, moving to state next, unless that configuration is
// known to fail; blame is then the key blamed for that failure (-1 when the
// spec is not Keyed).
func (s *search) push(i int32, next State, forced bool) (res pushResult, blame int32) {
	s.bits[i>>6] |= 1 << (i & 63)
	h := s.hash ^ zobrist(i)
	if k := s.k; k != nil {
		k.flip(i)
		if d := k.of[i]; k.dead(d, next) {
			k.flip(i)
			s.bits[i>>6] &^= 1 << (i & 63)
			return dead, d
		}
	}
	lo, hi := s.lo, max(s.hi, int(i>>6)+1)
	for lo < len(s.bits) && s.bits[lo] == ^uint64(0) {
		lo++
	}
	entry, isNew, ok := s.seen.insertWindow(h^mix(next), next, s.bits, lo, hi)
	if !ok || !isNew {
		s.bits[i>>6] &^= 1 << (i & 63)
		blame = -1
		if s.k != nil {
			s.k.flip(i)
			if ok {
				blame = s.k.blames[entry]
			}
		}
		if !ok {
			return outOfRoom, -1
		}
		return dead, blame
	}
	if k := s.k; k != nil {
		if len(k.blames) == cap(k.blames) {
			// The blames grow with the visited set: charged alike.
			c := int64(cap(k.blames))
			k.blames = append(k.blames, -1)
			if !s.budget.grow(int64(cap(k.blames))*4 - c*4) {
				k.blames = k.blames[:len(k.blames)-1]
				s.bits[i>>6] &^= 1 << (i & 63)
				k.flip(i)
				return outOfRoom, -1
			}
		} else {
			k.blames = append(k.blames, -1)
		}
	}
	s.stack = append(s.stack, frame{op: i, forced: forced, fkey: s.fkey, entry: int32(entry), prev: s.state})
	s.state, s.hash, s.lo, s.hi = next, h, lo, hi
	s.checkWindow()
	s.unlink(2*i + 1)
	s.unlink(2*i + 2)
	return pushed, -1
}

// pop undoes the last linearization and returns its frame.
func (s *search) pop() frame {
	f := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	i := f.op
	s.relink(2*i + 2)
	s.relink(2*i + 1)
	s.bits[i>>6] &^= 1 << (i & 63)
	if w := int(i >> 6); w < s.lo {
		s.lo = w
	}
	for s.hi > s.lo && s.bits[s.hi-1] == 0 {
		s.hi--
	}
	s.checkWindow()
	s.hash ^= zobrist(i)
	if s.k != nil {
		s.k.flip(i)
	}
	s.state = f.prev
	s.bestValid = min(s.bestValid, len(s.stack))
	return f
}

// backtrack is called when the current configuration fails, blaming key
// blame (-1 when the spec is not Keyed). It pops through forced frames and
// through configurations that the blame fails as well, to the first one that
// has a sibling left to try, and returns the entry after that frame's call,
// where the scan resumes. more=false means the stack ran out: no
// linearization exists. ok=false reports the memory bound.
func (s *search) backtrack(blame int32) (e int32, more, ok bool) {
	for len(s.stack) > 0 {
		f := s.pop()
		k := s.k
		if k != nil {
			k.blames[f.entry] = blame
		}
		if f.forced {
			// The configuration it was forced from fails as well; if the
			// forced op is of the blamed key, so does that key's part.
			if k != nil && blame == k.of[f.op] && !k.record(blame, s.state) {
				return -1, false, false
			}
			continue
		}
		s.fkey = f.fkey
		if k != nil && blame != f.fkey {
			// Another key's part failed; it is the same in this
			// configuration, so no sibling can help.
			continue
		}
		return s.next[callOf(f.op)], true, true
	}
	return -1, false, true
}

// closure linearizes every neutral operation that can be linearized now.
// Moving such an operation to the front of any linearization that exists
// keeps it valid (it changes no state, and everything real time puts before
// it is already linearized), so the configuration stands or falls with the
// one after it: no branch is needed. It returns failed=true when that
// configuration is known to fail, blaming key blame.
func (s *search) closure() (failed bool, blame int32, ok bool) {
	e := s.next[0]
	for e >= 0 && isCall(e) {
		i := opOf(e)
		if s.neutral[i] {
			next, possible, ok := s.step(i)
			if !ok {
				return false, -1, false
			}
			if possible {
				p := s.prev[e]
				res, blame := s.push(i, next, true)
				switch res {
				case outOfRoom:
					return false, -1, false
				case dead:
					// By the same argument per key, the blamed key's part
					// fails here too when the op is of that key.
					if s.k != nil && blame == s.k.of[i] && !s.k.record(blame, s.state) {
						return false, -1, false
					}
					return true, blame, true
				}
				e = s.next[p]
				continue
			}
		}
		e = s.next[e]
	}
	return false, -1, true
}

// frontierKey returns the key of the frontier operation: the one whose
// completion comes first among those not linearized. -1 when the spec is not
// Keyed or nothing is left.
func (s *search) frontierKey() int32 {
	if s.k == nil {
		return -1
	}
	e := s.next[0]
	for e >= 0 && isCall(e) {
		e = s.next[e]
	}
	if e < 0 {
		return -1
	}
	return s.k.of[opOf(e)]
}

// checkWindows makes every push and pop check the window kept against
// window's (tests set it).
var checkWindows = false

func (s *search) checkWindow() {
	if checkWindows {
		if lo, hi := window(s.bits); lo != s.lo || hi != s.hi {
			panic(fmt.Sprintf("window kept [%d, %d), want [%d, %d)", s.lo, s.hi, lo, hi))
		}
	}
}

// note records the furthest return entry the search could not pass.
func (s *search) note(e int32) {
	if s.pos[e] <= s.frontier {
		return
	}
	s.frontier = s.pos[e]
	s.failed = opOf(e)
	s.best = s.best[:s.bestValid]
	for _, f := range s.stack[s.bestValid:] {
		s.best = append(s.best, f.op)
	}
	s.bestValid = len(s.stack)
}

// run continues the search for at most quantum steps. It returns paused
// when the quantum is used up; any other outcome is final.
func (s *search) run(quantum int) outcome {
	var e int32
	var blame int32
	if !s.started {
		s.started = true
		// What the spec holds before the search (its Init, its tables
		// of values) is charged first.
		if !s.charge() {
			return tooBig
		}
		failed, _, ok := s.closure()
		if !ok {
			return tooBig
		}
		if failed {
			return refuted
		}
		s.fkey = s.frontierKey()
		s.cursor = s.next[0]
	}
	e = s.cursor
	for steps := 1; ; steps++ {
		if steps&1023 == 0 {
			if s.stop.Load() {
				return stopped
			}
			if steps >= quantum {
				s.cursor = e
				return paused
			}
		}
		if e < 0 {
			return found
		}
		if isCall(e) {
			i := opOf(e)
			if s.neutral[i] {
				// The closure found it impossible in this state.
				e = s.next[e]
				continue
			}
			if s.k != nil && s.k.of[i] != s.fkey {
				// Some linearization that exists starts with an
				// operation of the frontier's key (see Keyed).
				e = s.next[e]
				continue
			}
			next, possible, ok := s.step(i)
			if !ok {
				return tooBig
			}
			if !possible {
				e = s.next[e]
				continue
			}
			res, childBlame := s.push(i, next, false)
			switch res {
			case outOfRoom:
				return tooBig
			case dead:
				if childBlame == s.fkey {
					e = s.next[e]
					continue
				}
				// Another key's part fails: so does this configuration.
				blame = childBlame
			case pushed:
				failed, b, ok := s.closure()
				if !ok {
					return tooBig
				}
				if !failed {
					s.fkey = s.frontierKey()
					e = s.next[0]
					continue
				}
				blame = b
			}
		} else {
			i := opOf(e)
			if s.pending[i] {
				// Pending returns sit at the end of the list: every
				// operation that completed is linearized, and the pending
				// ones left may never have taken effect.
				return found
			}
			s.note(e)
			// Every candidate of the frontier's key failed for that key.
			blame = s.fkey
			if s.k != nil && !s.k.record(blame, s.state) {
				return tooBig
			}
		}
		var more, ok bool
		if e, more, ok = s.backtrack(blame); !ok {
			return tooBig
		} else if !more {
			return refuted
		}
	}
}

// linearization returns the current stack as partition operation indices.
func (s *search) linearization() []int {
	out := make([]int, len(s.stack))
	for i, f := range s.stack {
		out[i] = int(s.orig[f.op])
	}
	return out
}

// prefix returns the longest linearizable prefix found, as partition
// operation indices.
func (s *search) prefix() []int {
	out := make([]int, len(s.best))
	for i, op := range s.best {
		out[i] = int(s.orig[op])
	}
	return out
}
