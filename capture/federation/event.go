// Package federation is how the nodes of a cluster tell each other what they
// know: heartbeats, drains and undrains, epoch observations and capture
// status. Each kind of fact is a last-writer-wins register; an
// event is a newer value for one register, so receiving an event twice, late
// or out of order changes nothing it should not, and every node that has
// seen the same events holds the same state. Events travel from a durable
// outbox, at least once, and every node relays what is new to it, so that a
// node reaches the group while one direct link is down.
//
// The state and the liveness rules are pure (state.go, liveness.go); the
// node (node.go) is the shell that persists, sends and receives.
package federation

import (
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/capture"
)

// Kind is what an event says.
type Kind string

// Event kinds.
const (
	// Heartbeat: the origin is alive, at Time on its own clock.
	Heartbeat Kind = "heartbeat"
	// Drain and Undrain: an operator's intent for member Subject.
	Drain   Kind = "drain"
	Undrain Kind = "undrain"
	// Epoch: the origin's record of capture key Subject.
	Epoch Kind = "epoch"
	// Status: what the origin holds, for operators.
	Status Kind = "status"
)

// Durable reports whether events of the kind are persisted and resent after
// a restart. Heartbeats and status are superseded within seconds, so
// they are sent from memory only.
func (k Kind) Durable() bool { return k != Heartbeat && k != Status }

// Event is one fact from one node.
type Event struct {
	// Origin is the node that made the event, Seq its number there
	// (increasing, persisted across restarts).
	Origin string `json:"origin"`
	Seq    uint64 `json:"seq"`
	// Lamport orders events across origins.
	Lamport uint64 `json:"lamport"`
	// Time is the origin's clock when it made the event, in nanoseconds;
	// liveness compares heartbeat times only to other heartbeat times.
	Time    int64  `json:"time"`
	Kind    Kind   `json:"kind"`
	Subject string `json:"subject"`
	// Record is, for an epoch observation, the origin's record.
	Record *capture.EpochRecord `json:"record,omitempty"`
	// Held is, for a status, the capture keys the origin holds.
	Held []string `json:"held,omitempty"`
	// Key and Sig are, with a Signer (mutual TLS), the id of the
	// origin's certificate and the origin's signature of every other
	// field (see sign.go).
	Key string `json:"key,omitempty"`
	Sig []byte `json:"sig,omitempty"`
}

// ID names the event uniquely: origin/seq.
func (e *Event) ID() string { return fmt.Sprintf("%s/%d", e.Origin, e.Seq) }

// Register is the register an event writes: drains and undrains of one
// member share one, heartbeats and status are per origin, epochs per
// capture key.
func (e *Event) Register() string {
	switch e.Kind {
	case Drain, Undrain:
		return "intent|" + e.Subject
	case Epoch:
		return "epoch|" + e.Subject
	}
	return string(e.Kind) + "|" + e.Origin
}

// newer reports whether a should replace b in their register. Heartbeats
// and status come from one origin and follow its sequence; epochs keep the
// highest epoch, then the later Lamport; intents keep the later Lamport, the origin name breaking ties so that every node picks the
// same one.
func newer(a, b *Event) bool {
	switch a.Kind {
	case Heartbeat, Status:
		return a.Seq > b.Seq
	case Epoch:
		if a.Record.Epoch != b.Record.Epoch {
			return a.Record.Epoch > b.Record.Epoch
		}
	}
	if a.Lamport != b.Lamport {
		return a.Lamport > b.Lamport
	}
	if a.Origin != b.Origin {
		return a.Origin > b.Origin
	}
	return a.Seq > b.Seq
}

// Validate checks an event received from elsewhere.
func (e *Event) Validate() error {
	switch {
	case e.Origin == "" || strings.ContainsAny(e.Origin, "|/"):
		return fmt.Errorf("event has a bad origin %q", e.Origin)
	case e.Seq == 0:
		return fmt.Errorf("event %s has no seq", e.ID())
	case e.Subject == "" && e.Kind != Heartbeat && e.Kind != Status:
		return fmt.Errorf("event %s (%s) has no subject", e.ID(), e.Kind)
	}
	if err := e.validSignatureFields(); err != nil {
		return err
	}
	switch e.Kind {
	case Heartbeat, Drain, Undrain, Status:
	case Epoch:
		if e.Record == nil {
			return fmt.Errorf("epoch event %s has no record", e.ID())
		}
		if _, err := capture.ParseKey(e.Subject); err != nil {
			return fmt.Errorf("epoch event %s: %w", e.ID(), err)
		}
	default:
		return fmt.Errorf("event %s has unknown kind %q", e.ID(), e.Kind)
	}
	return nil
}
