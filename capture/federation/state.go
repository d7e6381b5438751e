package federation

import (
	"fmt"
	"slices"

	"github.com/ipfence/ipfence/capture"
)

// State is a node's view of the cluster: the newest event in every
// register. It is a pure value: Apply is its only change, and two states
// that applied the same events, in any order, are equal.
type State struct {
	regs    map[string]Event
	lamport uint64
	// seqs is the highest sequence number seen of each origin, applied or
	// not: the door measures how far ahead an event jumps from it.
	seqs map[string]uint64
}

// NewState returns an empty state.
func NewState() *State { return &State{regs: map[string]Event{}, seqs: map[string]uint64{}} }

// Apply takes an event in if it is newer than what its register holds and
// reports whether it was; either way the Lamport clock moves past it. It
// trusts the event: events from elsewhere go through Check first.
func (s *State) Apply(e Event) bool {
	s.lamport = max(s.lamport, e.Lamport)
	s.seqs[e.Origin] = max(s.seqs[e.Origin], e.Seq)
	r := e.Register()
	if old, ok := s.regs[r]; ok && !newer(&e, &old) {
		return false
	}
	s.regs[r] = e
	return true
}

// newerThanHeld reports whether e would replace what its register holds.
func (s *State) newerThanHeld(e *Event) bool {
	old, ok := s.regs[e.Register()]
	return !ok || newer(e, &old)
}

// Next returns the Lamport time for a new event of this node, without
// moving the clock: applying the event moves it. It refuses to go past
// MaxValue rather than wrap to 0, which would order every later event of
// this node before the older ones (an undrain after a drain at 2^64−1
// would lose for good).
func (s *State) Next() (uint64, error) {
	if s.lamport >= MaxValue {
		return 0, fmt.Errorf("the Lamport clock is at %d, the most it may reach", s.lamport)
	}
	return s.lamport + 1, nil
}

// Seq is the highest sequence number seen of origin.
func (s *State) Seq(origin string) uint64 { return s.seqs[origin] }

// Lamport is the clock's current value.
func (s *State) Lamport() uint64 { return s.lamport }

// Events returns every register's event, in register order.
func (s *State) Events() []Event {
	keys := make([]string, 0, len(s.regs))
	for k := range s.regs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Event, len(keys))
	for i, k := range keys {
		out[i] = s.regs[k]
	}
	return out
}

// Get returns a register's event.
func (s *State) Get(register string) (Event, bool) {
	e, ok := s.regs[register]
	return e, ok
}

// Heartbeat returns the newest heartbeat of a node.
func (s *State) Heartbeat(node string) (Event, bool) {
	return s.Get(string(Heartbeat) + "|" + node)
}

// Intent returns the newest drain or undrain of a member.
func (s *State) Intent(member string) (Event, bool) {
	return s.Get("intent|" + member)
}

// Drained reports whether the newest intent for a member is a drain.
func (s *State) Drained(member string) bool {
	e, ok := s.Intent(member)
	return ok && e.Kind == Drain
}

// Epochs returns the newest epoch observation of every capture key.
func (s *State) Epochs() map[capture.Key]capture.EpochRecord {
	out := map[capture.Key]capture.EpochRecord{}
	for _, e := range s.regs {
		if e.Kind != Epoch || e.Record == nil {
			continue
		}
		k, err := capture.ParseKey(e.Subject)
		if err != nil {
			continue // Validate refuses such events; a stored one is ignored
		}
		out[k] = *e.Record
	}
	return out
}

// EpochEvent returns the event holding a capture key's newest epoch
// observation: its Lamport time orders it against operators' intents.
func (s *State) EpochEvent(k capture.Key) (Event, bool) {
	return s.Get("epoch|" + k.String())
}
