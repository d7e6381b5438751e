package federation

import (
	"fmt"
	"slices"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/plan"
)

// MaxValue bounds every counter an event carries (seq, Lamport time,
// epoch): a value above it is refused wherever it comes from. Counters
// grow by one per event, so no real one comes near 2^63−1; keeping the top
// half of uint64 unused means that counter + 1 can never wrap, even after
// the largest jump the door lets through (see DefaultMaxJump).
const MaxValue = uint64(plan.MaxEpoch)

// DefaultMaxJump is how far ahead of what this node knows an event's
// counter may be: its origin's seq ahead of the highest seq seen of that
// origin, its Lamport time ahead of this node's clock, its epoch ahead of
// the highest epoch seen of its key.
//
// Why 2^32: a real counter moves by one per event. A node that emits a
// heartbeat ten times a second and was cut off from this one for a year
// moves its seq by 3.2×10^8, and a restart skips one block of 1024; epochs
// move by one per change of holder. 2^32 (4.3×10^9) is more than ten
// times any of that, so a true event is never refused. A forged or
// corrupt one is either refused (any value near 2^64 or 2^63) or moves a
// counter by at most 2^32, and it takes 2^31 of them in a row to bring a
// counter near MaxValue: no single event, and no burst a peer can send
// before it is noticed in the refusal counts, can exhaust a counter.
const DefaultMaxJump = uint64(1) << 32

// Reasons an event is refused at the door, as counted by Node.Refused.
const (
	// RefusedMalformed: the event fails Validate (no origin, no seq,
	// unknown kind, no record, unparsable key).
	RefusedMalformed = "malformed"
	// RefusedOrigin: the origin is not a node of the cluster.
	RefusedOrigin = "unknown-origin"
	// RefusedOwn: an event that claims to be this node's own, from a
	// peer, and is newer than what this node holds of its own (a peer may
	// relay a node's own events back, but never ones it did not make).
	RefusedOwn = "own-origin"
	// RefusedSubject: a drain or undrain for a node that is not a member.
	RefusedSubject = "unknown-member"
	// RefusedKey: an epoch or status names a capture key that no pool of
	// the configuration has.
	RefusedKey = "unknown-key"
	// RefusedBounds: a counter at or above MaxValue, or a time outside
	// [0, MaxValue].
	RefusedBounds = "out-of-bounds"
	// RefusedJump: a counter more than the jump window ahead of what this
	// node knows.
	RefusedJump = "too-far-ahead"
	// RefusedSender: the batch's sender is not a peer, or is not who
	// authenticated the request (a certificate of one node sending "from"
	// another).
	RefusedSender = "forged-sender"
)

// refusalReasons lists every reason, for counters that start at zero.
var refusalReasons = []string{RefusedMalformed, RefusedOrigin, RefusedOwn, RefusedSubject, RefusedKey, RefusedBounds, RefusedJump, RefusedSender, RefusedSignature}

// Limits are what the door knows: the cluster, the capture keys of the
// configuration, and the jump window.
type Limits struct {
	// Self is this node.
	Self string
	// Nodes is the cluster, this node included.
	Nodes []string
	// Keys are the capture keys an epoch or status may name; nil admits
	// any well-formed key.
	Keys map[capture.Key]bool
	// MaxJump is the jump window; 0 means DefaultMaxJump.
	MaxJump uint64
}

// Check decides whether an event that arrived from a peer may be applied
// to s. It returns "" and nil when it may, else the reason (one of the
// Refused constants) and an error naming the event and what is wrong.
// It is pure: it reads s and the limits only. Counters are compared to
// what s knows, so an event refused today may be admitted after the
// counters it jumped from have moved on legitimately.
func (s *State) Check(e *Event, lim Limits) (string, error) {
	if err := e.Validate(); err != nil {
		return RefusedMalformed, err
	}
	if !slices.Contains(lim.Nodes, e.Origin) {
		return RefusedOrigin, fmt.Errorf("event %s: origin %q is not a node of the cluster", e.ID(), e.Origin)
	}
	if e.Origin == lim.Self {
		return RefusedOwn, fmt.Errorf("event %s claims to be this node's own", e.ID())
	}
	return s.checkValues(e, lim)
}

// checkValues checks what Check checks after the origin: subjects, keys
// and counters.
func (s *State) checkValues(e *Event, lim Limits) (string, error) {
	switch e.Kind {
	case Drain, Undrain:
		if !slices.Contains(lim.Nodes, e.Subject) {
			return RefusedSubject, fmt.Errorf("event %s: %s for %q, which is not a node of the cluster", e.ID(), e.Kind, e.Subject)
		}
	case Heartbeat:
		if e.Subject != "" {
			return RefusedMalformed, fmt.Errorf("heartbeat %s has a subject", e.ID())
		}
	case Epoch:
		k, _ := capture.ParseKey(e.Subject) // Validate parsed it
		if lim.Keys != nil && !lim.Keys[k] {
			return RefusedKey, fmt.Errorf("epoch event %s: no configured pool has capture key %s", e.ID(), e.Subject)
		}
	case Status:
		if lim.Keys != nil && len(e.Held) > len(lim.Keys) {
			return RefusedKey, fmt.Errorf("status %s names %d keys, more than the %d configured", e.ID(), len(e.Held), len(lim.Keys))
		}
		for _, h := range e.Held {
			k, err := capture.ParseKey(h)
			if err != nil {
				return RefusedMalformed, fmt.Errorf("status %s: %w", e.ID(), err)
			}
			if lim.Keys != nil && !lim.Keys[k] {
				return RefusedKey, fmt.Errorf("status %s: no configured pool has capture key %s", e.ID(), h)
			}
		}
	}
	jump := lim.MaxJump
	if jump == 0 {
		jump = DefaultMaxJump
	}
	type counter struct {
		name      string
		val, base uint64
	}
	cs := []counter{{"seq", e.Seq, s.seqs[e.Origin]}, {"lamport", e.Lamport, s.lamport}}
	if e.Kind == Epoch {
		var base uint64
		if cur, ok := s.regs[e.Register()]; ok && cur.Record != nil {
			base = uint64(cur.Record.Epoch)
		}
		cs = append(cs, counter{"epoch", uint64(e.Record.Epoch), base})
	}
	if revertOverflow {
		cs = nil
	}
	for _, c := range cs {
		if c.val >= MaxValue {
			return RefusedBounds, fmt.Errorf("event %s: %s %d is at or above the bound %d", e.ID(), c.name, c.val, MaxValue)
		}
		// base < MaxValue here (every applied value was checked, and a
		// base that somehow is not only widens the window), so base +
		// jump cannot wrap.
		if c.val > c.base && c.val-c.base > jump {
			return RefusedJump, fmt.Errorf("event %s: %s %d is %d ahead of the %d this node knows, more than the window of %d", e.ID(), c.name, c.val, c.val-c.base, c.base, jump)
		}
	}
	if e.Time < 0 || uint64(e.Time) >= MaxValue {
		return RefusedBounds, fmt.Errorf("event %s: time %d is out of bounds", e.ID(), e.Time)
	}
	return "", nil
}

// keep reports whether a stored event still belongs in the state under the
// current limits: its origin and subject are nodes of the cluster, its key
// is configured, and its counters are in bounds. Events that do not are
// dropped when the log is opened (members or pools left the config), so
// that stored state is bounded by the configuration. Own events are kept.
func keep(e *Event, lim Limits) bool {
	if e.Validate() != nil || !slices.Contains(lim.Nodes, e.Origin) {
		return false
	}
	if e.Seq >= MaxValue || e.Lamport >= MaxValue || (e.Record != nil && uint64(e.Record.Epoch) >= MaxValue) {
		return false
	}
	lim.MaxJump = MaxValue // stored values were admitted once; only bounds matter
	_, err := NewState().checkValues(e, lim)
	return err == nil
}
