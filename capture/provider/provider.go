// Package provider is the contract between ipfence and whatever carries a
// capture: a cloud API that places secondary private IPs on NICs (AWS, Azure,
// OCI, or ipfence's simulator), or the kernel's proxy-ARP on premises.
//
// The semantics every implementation must keep, checked by the suite in
// providertest: an address is on at most one NIC; assigning an address that
// is on another NIC fails with ErrAssignedElsewhere unless reassignment is
// allowed, and then it moves atomically (never on two NICs, never on none in
// between); unassigning is NIC-scoped, so unassigning an address from a NIC
// that does not hold it changes nothing; repeating a call is harmless; a new
// NIC does not forward (cloud NICs start with the source/dest check on).
//
// A successful call may become visible later (AWS remaps asynchronously):
// callers that need to know where an address is must Describe it, and the
// contract suite runs against providers constructed without such a delay.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// Errors a provider reports; test them with errors.Is.
var (
	// ErrAssignedElsewhere: the address is on another NIC and reassignment
	// was not allowed.
	ErrAssignedElsewhere = errors.New("address is assigned to another NIC")
	// ErrUnknownNIC: the NIC does not exist.
	ErrUnknownNIC = errors.New("unknown NIC")
	// ErrThrottled: the provider refused the call for now; retry later.
	ErrThrottled = errors.New("request throttled")
	// ErrUnavailable: the provider could not be reached or failed
	// internally; the call may or may not have taken effect.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrStale: the cloud's own record shows that an action at a newer
	// epoch than the call's acted on the address (the driver read it with
	// the object's ETag, or the cloud refused the conditional write), so
	// the call changed nothing. Retrying cannot help: the action is stale.
	ErrStale = errors.New("refused by the cloud: a newer epoch acted on the address")
)

// Request identifies a mutation and the fencing token it was issued under.
// Providers that record mutations keep the epoch and idempotency key, so
// that a checker can tell a stale action from a current one.
type Request struct {
	NIC     string
	Address netip.Addr
	// Epoch and IdempotencyKey come from the action; zero for calls made
	// outside the journal (tests, the operator).
	Epoch          capture.Epoch
	IdempotencyKey string
	// LineRevision is the etcd revision of the epoch record the node
	// confirmed for the key right before the call (the key's mod
	// revision): the fencing token of a pool on the etcd epoch line,
	// whose provider call cannot sit inside etcd's transaction. Zero off
	// the etcd line; drivers then send nothing.
	LineRevision int64
}

// Observation is what a provider reports about an address.
type Observation struct {
	Address netip.Addr
	// NIC holds the address; empty when no NIC does.
	NIC string
	// Forwarding is whether that NIC forwards traffic not addressed to it
	// (AWS source/dest check off, Azure IP forwarding on); false when no
	// NIC holds the address.
	Forwarding bool
}

// Provider carries captures.
type Provider interface {
	// Assign puts the address on the NIC. If it is on another NIC,
	// Assign fails with ErrAssignedElsewhere unless reassign is true, in
	// which case the address moves atomically.
	Assign(ctx context.Context, req Request, reassign bool) error
	// Unassign takes the address off the NIC; if the NIC does not hold it,
	// nothing changes and Unassign succeeds.
	Unassign(ctx context.Context, req Request) error
	// SetForwarding turns forwarding on the NIC on or off; the request's
	// Address is informational.
	SetForwarding(ctx context.Context, req Request, enabled bool) error
	// Describe reports where the address is.
	Describe(ctx context.Context, addr netip.Addr) (Observation, error)
}

// Mutation is one change a provider applied, as a checker reads it.
type Mutation struct {
	// Time is when the change was applied (became visible).
	Time time.Time
	// Call is the action kind that caused it.
	Call           capture.Kind
	NIC            string
	Address        netip.Addr
	Epoch          capture.Epoch
	IdempotencyKey string
	// LineRevision is the request's (zero when it carried none).
	LineRevision int64 `json:",omitempty"`
	// From is the NIC the address left, for an assign that moved it.
	From string `json:",omitempty"`
	// Enabled is the forwarding setting, for forwarding calls.
	Enabled bool `json:",omitempty"`
}

// Recorder is implemented by providers that keep the authoritative history
// of the mutations they applied (the in-memory provider, the simulator).
type Recorder interface {
	Mutations() []Mutation
}

// Stale is a mutation a provider applied with an epoch lower than one it had
// already applied for the same address: an action the fence should have
// stopped.
type Stale struct {
	// Index is the mutation's position in the record.
	Index    int
	Mutation Mutation
	// High is the highest epoch applied for the address before it.
	High capture.Epoch
	// Effective says the mutation touched the address's capture: an
	// assign (which moves the address), an unassign (recorded only when it
	// took the address off its NIC), or a forwarding change on the NIC
	// that held the address then. A stale forwarding change on a NIC that
	// no longer held the address changes nothing anyone relies on: a
	// vacating node's late clean-up of its own NIC, which the cross-node
	// race of two nodes' gates allows (see the capture design) and which
	// the provider's NIC-scoped semantics make harmless.
	Effective bool
}

// StaleMutations scans a provider's record (in the order applied) for
// stale mutations. Mutations with epoch 0 (made outside the journal) are
// not judged.
func StaleMutations(ms []Mutation) []Stale {
	high := map[netip.Addr]capture.Epoch{}
	holder := map[netip.Addr]string{}
	var out []Stale
	for i, m := range ms {
		h := holder[m.Address]
		switch m.Call {
		case capture.Assign, capture.ProxyARPStart:
			holder[m.Address] = m.NIC
		case capture.Unassign, capture.ProxyARPStop:
			if h == m.NIC {
				delete(holder, m.Address)
			}
		}
		if m.Epoch == 0 {
			continue
		}
		if m.Epoch < high[m.Address] {
			eff := true
			if m.Call == capture.EnableForwarding || m.Call == capture.DisableForwarding {
				eff = m.NIC == h
			}
			out = append(out, Stale{Index: i, Mutation: m, High: high[m.Address], Effective: eff})
			continue
		}
		high[m.Address] = m.Epoch
	}
	return out
}

// LineRevisions is the value of the line-revision header of a call
// carrying reqs: their LineRevision in decimal, comma-separated in the
// order of reqs, or "" when none carries one (off the etcd line nothing is
// sent). The executor never puts requests with and without a revision in
// one call, so a list holds no zero.
func LineRevisions(reqs ...Request) string {
	var b []byte
	some := false
	for i, r := range reqs {
		if i > 0 {
			b = append(b, ',')
		}
		some = some || r.LineRevision != 0
		b = strconv.AppendInt(b, r.LineRevision, 10)
	}
	if !some {
		return ""
	}
	return string(b)
}

// ParseLineRevisions reads a line-revision header's value, as
// LineRevisions writes it: one revision or a comma-separated list, each
// decimal and positive (zero is said by sending no header).
func ParseLineRevisions(v string) ([]int64, error) {
	parts := strings.Split(v, ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n <= 0 || p[0] == '+' {
			return nil, fmt.Errorf("line revision %q is not a positive decimal", p)
		}
		out[i] = n
	}
	return out, nil
}
