// Package capture holds the vocabulary of epoch-fenced address capture:
// pools and members, capture keys and domains, the fencing token
// (captureEpoch), provider actions and journal rows. The packages beside it
// compute with these values: placement (who should hold an address), plan
// (which actions a node needs), gate (which actions are stale), policy (which
// rows are approved without an operator), store (the node's bbolt file),
// provider (the contract with clouds and proxy-ARP), executor (the provider
// calls), bus (in-process events), and reconcile (the loop that ties them
// together).
//
// A mobile /32 has exactly one capture holder at a time: the node whose NIC
// carries it as a secondary private IP (cloud), or whose interface answers
// ARP for it (on premises). Every provider action carries the capture key's
// epoch, which increases whenever the desired holder changes, and one gate
// skips every action whose epoch or holder is no longer current.
package capture

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Epoch is a capture key's fencing token: persisted, strictly increasing,
// bumped whenever the desired holder changes. Wall-clock time never is one.
type Epoch uint64

// Domain is a captureDomain: the scope within which every node competing for
// an address shares one epoch line.
type Domain string

// CloudDomain is the domain of a cloud pool: its provider and placement
// group. Without a group the domain is the node's own, so that a node's
// captures form their own epoch line.
func CloudDomain(providerRef, group, node string) Domain {
	if group != "" {
		return Domain("provider:" + providerRef + ":placement:" + group)
	}
	return Domain("provider:" + providerRef + ":node:" + node)
}

// OnPremDomain is the domain of an on-premises pool: its layer-2 domain.
func OnPremDomain(l2 string) Domain { return Domain("onprem:" + l2) }

// Key identifies what an epoch fences: an address of a pool in a domain.
type Key struct {
	Pool    string     `json:"pool"`
	Address netip.Addr `json:"address"`
	Domain  Domain     `json:"domain"`
}

// String renders the key as pool/address@domain.
func (k Key) String() string { return k.Pool + "/" + k.Address.String() + "@" + string(k.Domain) }

// ParseKey reads the String form back.
func ParseKey(s string) (Key, error) {
	slash := strings.Index(s, "/")
	at := strings.Index(s, "@")
	if slash <= 0 || at < slash {
		return Key{}, fmt.Errorf("capture key %q is not pool/address@domain", s)
	}
	addr, err := netip.ParseAddr(s[slash+1 : at])
	if err != nil {
		return Key{}, fmt.Errorf("capture key %q: %w", s, err)
	}
	return Key{Pool: s[:slash], Address: addr, Domain: Domain(s[at+1:])}, nil
}

// Compare orders keys by pool, address, then domain.
func (k Key) Compare(o Key) int {
	if c := strings.Compare(k.Pool, o.Pool); c != 0 {
		return c
	}
	if c := k.Address.Compare(o.Address); c != 0 {
		return c
	}
	return strings.Compare(string(k.Domain), string(o.Domain))
}

// Member is a node that may hold a pool's addresses.
type Member struct {
	Node string
	// Priority orders members: lower wins, then the node name.
	Priority int
	// Target is what holds the address on this node: a NIC id in the
	// cloud, an interface name on premises.
	Target string
	// Drained members give their addresses up (maintenance).
	Drained bool
	// Stale members have stopped sending heartbeats; liveness sets it.
	Stale bool
}

// Pool is a named set of mobile addresses with one provider and one
// placement group.
type Pool struct {
	Name string
	// Provider names the provider the pool's actions go to.
	Provider string
	// Group is the placement group; empty means each node alone.
	Group string
	// L2Domain, when set, makes the pool on-premises (proxy-ARP).
	L2Domain  string
	Addresses []netip.Addr
	Members   []Member
}

// OnPrem reports whether the pool captures by proxy-ARP.
func (p *Pool) OnPrem() bool { return p.L2Domain != "" }

// Domain is the pool's capture domain as seen by node.
func (p *Pool) Domain(node string) Domain {
	if p.OnPrem() {
		return OnPremDomain(p.L2Domain)
	}
	return CloudDomain(p.Provider, p.Group, node)
}

// Member returns node's membership, if any.
func (p *Pool) Member(node string) (Member, bool) {
	for _, m := range p.Members {
		if m.Node == node {
			return m, true
		}
	}
	return Member{}, false
}

// EpochRecord is a capture key's current epoch and the holder desired at it
// ("" when no member may hold the address).
type EpochRecord struct {
	Epoch  Epoch  `json:"epoch"`
	Holder string `json:"holder"`
}

// Kind is what an action does.
type Kind string

// Action kinds. Acquires are carried out by the desired holder; releases by
// the node vacating the address.
const (
	Assign            Kind = "assign-secondary-ip"
	Unassign          Kind = "unassign-secondary-ip"
	EnableForwarding  Kind = "ensure-forwarding-enabled"
	DisableForwarding Kind = "ensure-forwarding-disabled"
	ProxyARPStart     Kind = "proxy-arp-start"
	ProxyARPStop      Kind = "proxy-arp-stop"
)

// kinds lists every kind, acquires first: the order plans carry actions
// in, which no caller may change (hence a copy from Kinds).
var kinds = []Kind{Assign, EnableForwarding, ProxyARPStart, Unassign, DisableForwarding, ProxyARPStop}

// Kinds returns every kind, acquires first.
func Kinds() []Kind { return slices.Clone(kinds) }

// Order is the kind's place in a plan: acquires first; -1 for an unknown
// kind.
func (k Kind) Order() int { return slices.Index(kinds, k) }

// Acquire reports whether the kind takes a capture (rather than releasing).
func (k Kind) Acquire() bool {
	return k == Assign || k == EnableForwarding || k == ProxyARPStart
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	return k.Order() >= 0
}

// Params an action may carry.
const (
	// ParamAllowReassignment ("true") lets an assign move the address from
	// another NIC atomically: the seize that needs no release first.
	ParamAllowReassignment = "allowReassignment"
)

// Action is one provider call a node intends to make.
type Action struct {
	Kind     Kind   `json:"kind"`
	Provider string `json:"provider"`
	// Target is the NIC id or interface acted on.
	Target  string     `json:"target"`
	Address netip.Addr `json:"address"`
	Key     Key        `json:"key"`
	Epoch   Epoch      `json:"epoch"`
	// Holder is the node the action is for: the desired holder for an
	// acquire, the vacating node for a release.
	Holder string `json:"holder"`
	// IdempotencyKey is stable across reconciles within one epoch and
	// distinct across epochs; see IdempotencyKey.
	IdempotencyKey string            `json:"idempotencyKey"`
	Params         map[string]string `json:"params,omitempty"`
}

// IdempotencyKey builds <pool>:<provider>:<target>:<kind>:<address>:epoch:<N>.
func IdempotencyKey(pool, provider, target string, kind Kind, addr netip.Addr, epoch Epoch) string {
	return fmt.Sprintf("%s:%s:%s:%s:%s:epoch:%d", pool, provider, target, kind, addr, epoch)
}

// NewAction builds an action with its idempotency key.
func NewAction(kind Kind, key Key, provider, target, holder string, epoch Epoch, params map[string]string) Action {
	return Action{
		Kind: kind, Provider: provider, Target: target, Address: key.Address, Key: key,
		Epoch: epoch, Holder: holder, Params: params,
		IdempotencyKey: IdempotencyKey(key.Pool, provider, target, kind, key.Address, epoch),
	}
}

// String renders the action briefly.
func (a Action) String() string {
	return fmt.Sprintf("%s %s on %s for %s at epoch %d", a.Kind, a.Address, a.Target, a.Holder, a.Epoch)
}

// State is a journal row's state.
type State string

// Journal row states: pending → approved → running → succeeded | failed |
// skipped. skipped is where the gate sends stale rows, and an operator's
// rejection.
const (
	Pending   State = "pending"
	Approved  State = "approved"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Skipped   State = "skipped"
)

// States lists every state in lifecycle order.
var States = []State{Pending, Approved, Running, Succeeded, Failed, Skipped}

// Terminal reports whether nothing more happens to a row in state s.
func (s State) Terminal() bool { return s == Succeeded || s == Skipped }

// Row is one journal row: an action and what became of it. Times are
// nanoseconds of the time input the loop was given, never read from a clock
// inside the core.
type Row struct {
	Action
	State State `json:"state"`
	// Seq orders rows by import.
	Seq uint64 `json:"seq"`
	// Reason says why a row was skipped or failed.
	Reason     string `json:"reason,omitempty"`
	ApprovedBy string `json:"approvedBy,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
	// ImportedAt, ClaimedAt and DoneAt are times from the loop's input.
	ImportedAt int64 `json:"importedAt,omitempty"`
	ClaimedAt  int64 `json:"claimedAt,omitempty"`
	DoneAt     int64 `json:"doneAt,omitempty"`
	// Observed is the provider's state of the address after the call.
	Observed string `json:"observed,omitempty"`
	// LineRevision is the fencing token the last call carried for a key
	// on the etcd epoch line: the etcd revision of the epoch record the
	// node confirmed right before it. Zero off the etcd line, and in rows
	// written before the token existed.
	LineRevision int64 `json:"lineRevision,omitempty"`
}

// Held is a capture this node may have made and has not released. It is
// recorded when an acquire is claimed, before the provider call, because a
// crash can leave the call's effect unknown: then the node must still
// release the address if it is no longer desired. Confirmed says the
// acquire at Epoch succeeded.
type Held struct {
	Key       Key    `json:"key"`
	Provider  string `json:"provider"`
	Target    string `json:"target"`
	Epoch     Epoch  `json:"epoch"`
	Confirmed bool   `json:"confirmed"`
}
