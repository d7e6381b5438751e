package linear

import (
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

	state State
	bits  []uint64
	hash  uint64
	stack []frame
	seen  *visited
	stop  *atomic.Bool
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
	s := &search{label: p.Label, ops: len(p.Ops), spec: p.Spec, stop: stop, frontier: -1, failed: -1}
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
	s.seen = newVisited(len(s.bits), b)
	s.state = p.Spec.Init()
	return s
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

// push linearizes op i, moving to state next, unless that configuration was
// visited before. ok=false reports the memory bound.
func (s *search) push(i int32, next State, forced bool) (pushed, ok bool) {
	s.bits[i>>6] |= 1 << (i & 63)
	h := s.hash ^ zobrist(i)
	isNew, ok := s.seen.insert(h^mix(next), next, s.bits)
	if !isNew {
		s.bits[i>>6] &^= 1 << (i & 63)
		return false, ok
	}
	s.stack = append(s.stack, frame{op: i, forced: forced, prev: s.state})
	s.state, s.hash = next, h
	s.unlink(2*i + 1)
	s.unlink(2*i + 2)
	return true, true
}

// pop undoes the last linearization and returns its frame.
func (s *search) pop() frame {
	f := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	i := f.op
	s.relink(2*i + 2)
	s.relink(2*i + 1)
	s.bits[i>>6] &^= 1 << (i & 63)
	s.hash ^= zobrist(i)
	s.state = f.prev
	s.bestValid = min(s.bestValid, len(s.stack))
	return f
}

// backtrack pops through forced frames and one branching frame, returning
// the entry after that frame's call, where the scan resumes. ok=false means
// the stack ran out: no linearization exists.
func (s *search) backtrack() (int32, bool) {
	for len(s.stack) > 0 {
		f := s.pop()
		if !f.forced {
			return s.next[callOf(f.op)], true
		}
	}
	return -1, false
}

// closure linearizes every neutral operation that can be linearized now.
// Moving such an operation to the front of any linearization that exists
// keeps it valid (it changes no state, and everything real time puts before
// it is already linearized), so the configuration stands or falls with the
// one after it: no branch is needed. It returns dead=true when that
// configuration was visited before, which means it failed.
func (s *search) closure() (dead, ok bool) {
	e := s.next[0]
	for e >= 0 && isCall(e) {
		i := opOf(e)
		if s.neutral[i] {
			if next, possible := s.spec.Step(s.state, int(s.orig[i])); possible {
				p := s.prev[e]
				pushed, ok := s.push(i, next, true)
				if !ok {
					return false, false
				}
				if !pushed {
					return true, true
				}
				e = s.next[p]
				continue
			}
		}
		e = s.next[e]
	}
	return false, true
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
	if !s.started {
		s.started = true
		dead, ok := s.closure()
		if !ok {
			return tooBig
		}
		if dead {
			return refuted
		}
		s.cursor = s.next[0]
	}
	e := s.cursor
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
			next, possible := s.spec.Step(s.state, int(s.orig[i]))
			if !possible {
				e = s.next[e]
				continue
			}
			pushed, ok := s.push(i, next, false)
			if !ok {
				return tooBig
			}
			if !pushed {
				e = s.next[e]
				continue
			}
			dead, ok := s.closure()
			if !ok {
				return tooBig
			}
			if !dead {
				e = s.next[0]
				continue
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
		}
		var more bool
		if e, more = s.backtrack(); !more {
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
