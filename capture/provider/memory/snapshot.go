package memory

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// Snapshot is a Provider's whole state as a value that encodes to JSON and
// back: the visible placement and forwarding of every NIC, the mutations
// acknowledged but not yet visible, and the record of those applied. A
// process that keeps a provider across restarts (the cloud simulator) saves
// one after every change and Restores it on start, so that a restart is
// invisible to callers: what was visible stays visible, what was queued
// still applies at its apply time, and the record keeps its history.
//
// The Options a provider was built with are not state: the clock, the
// delay of future mutations and the fault injector come from the Options
// given to Restore.
type Snapshot struct {
	// NICs are every NIC in name order.
	NICs []NICState `json:"nics"`
	// Queue holds the acknowledged mutations not yet visible, in apply
	// order.
	Queue []Queued `json:"queue"`
	// Mutations is the record (see Provider.Mutations).
	Mutations []provider.Mutation `json:"mutations"`
}

// NICState is one NIC's visible state.
type NICState struct {
	Name       string `json:"name"`
	Forwarding bool   `json:"forwarding"`
	// Addresses are the NIC's addresses in ascending order.
	Addresses []netip.Addr `json:"addresses"`
}

// Queued is a mutation that was acknowledged and becomes visible at At,
// unless by then it is no longer legal or needed (see Provider).
type Queued struct {
	At   time.Time    `json:"at"`
	Call capture.Kind `json:"call"`
	NIC  string       `json:"nic"`
	// Address is informational for forwarding calls, and may be zero.
	Address        netip.Addr    `json:"address"`
	Epoch          capture.Epoch `json:"epoch"`
	IdempotencyKey string        `json:"idempotencyKey"`
	LineRevision   int64         `json:"lineRevision,omitempty"`
	// Reassign is the assign's permission to move the address from
	// another NIC; false for every other call.
	Reassign bool `json:"reassign"`
}

// Snapshot returns the provider's state at Clock(): due mutations are
// applied first, as every other method does.
func (p *Provider) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	return Snapshot{NICs: p.nicStates(), Queue: p.queued(), Mutations: slices.Clone(p.log)}
}

// NICs returns the visible state of every NIC in name order. It is
// Snapshot without the queue and the record, whose copy grows with the
// provider's history: a caller that only needs the placement, on every
// request, asks for this.
func (p *Provider) NICs() []NICState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	return p.nicStates()
}

// Queue returns the mutations acknowledged and not yet visible at Clock(),
// in apply order.
func (p *Provider) Queue() []Queued {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	return p.queued()
}

func (p *Provider) nicStates() []NICState {
	out := make([]NICState, len(p.names))
	for i, name := range p.names {
		n := p.nics[name]
		addrs := make([]netip.Addr, 0, len(n.addrs))
		for a := range n.addrs {
			addrs = append(addrs, a)
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		out[i] = NICState{Name: name, Forwarding: n.forwarding, Addresses: addrs}
	}
	return out
}

func (p *Provider) queued() []Queued {
	out := make([]Queued, len(p.queue))
	for i, m := range p.queue {
		out[i] = Queued{
			At: m.at, Call: m.call, NIC: m.req.NIC, Address: m.req.Address,
			Epoch: m.req.Epoch, IdempotencyKey: m.req.IdempotencyKey, LineRevision: m.req.LineRevision, Reassign: m.reassign,
		}
	}
	return out
}

// Restore builds a provider in the state s describes, with o's clock,
// delay and fault injector. The NICs are the snapshot's; o.NICs must be
// empty or name the same set, so that a caller that expects certain NICs
// learns that a saved state disagrees.
//
// A snapshot read from a file is outside input, so Restore checks
// everything the provider relies on and returns an error naming the first
// violation, never a provider that breaks its own rules: NIC names unique
// and not empty; an address valid and on at most one NIC; queued calls of
// a cloud kind, naming a known NIC and (for assign and unassign) a valid
// address, reassignment only on assigns, in non-decreasing apply order;
// recorded mutations of a cloud kind on a known NIC.
func Restore(o Options, s Snapshot) (*Provider, error) {
	names := make([]string, len(s.NICs))
	seen := make(map[string]bool, len(s.NICs))
	for i, n := range s.NICs {
		switch {
		case n.Name == "":
			return nil, fmt.Errorf("memory: restore: nics[%d]: empty name", i)
		case seen[n.Name]:
			return nil, fmt.Errorf("memory: restore: nics[%d]: NIC %q appears twice", i, n.Name)
		}
		seen[n.Name] = true
		names[i] = n.Name
	}
	if len(o.NICs) > 0 {
		want := slices.Clone(o.NICs)
		slices.Sort(want)
		want = slices.Compact(want)
		got := slices.Sorted(slices.Values(names))
		if !slices.Equal(got, want) {
			return nil, fmt.Errorf("memory: restore: the snapshot has NICs %v, the options name %v", got, want)
		}
	}
	o.NICs = names
	p := New(o)
	holder := make(map[netip.Addr]string)
	for i, n := range s.NICs {
		st := p.nics[n.Name]
		st.forwarding = n.Forwarding
		for j, a := range n.Addresses {
			if !a.IsValid() {
				return nil, fmt.Errorf("memory: restore: nics[%d] (%s): addresses[%d]: invalid address", i, n.Name, j)
			}
			if h, ok := holder[a]; ok {
				return nil, fmt.Errorf("memory: restore: nics[%d] (%s): address %s is already on %s", i, n.Name, a, h)
			}
			holder[a] = n.Name
			st.addrs[a] = true
		}
	}
	for i, q := range s.Queue {
		where := fmt.Sprintf("queue[%d] (%s %s on %s)", i, q.Call, q.Address, q.NIC)
		if err := checkCall(p, q.Call, q.NIC, q.Address); err != nil {
			return nil, fmt.Errorf("memory: restore: %s: %w", where, err)
		}
		if q.Reassign && q.Call != capture.Assign {
			return nil, fmt.Errorf("memory: restore: %s: reassign is for assigns only", where)
		}
		if i > 0 && q.At.Before(s.Queue[i-1].At) {
			return nil, fmt.Errorf("memory: restore: %s: apply time %s is before the previous one's, %s",
				where, q.At.Format(time.RFC3339Nano), s.Queue[i-1].At.Format(time.RFC3339Nano))
		}
		p.queue = append(p.queue, pending{
			at: q.At, call: q.Call, reassign: q.Reassign,
			req: provider.Request{NIC: q.NIC, Address: q.Address, Epoch: q.Epoch, IdempotencyKey: q.IdempotencyKey, LineRevision: q.LineRevision},
		})
	}
	for i, m := range s.Mutations {
		if err := checkCall(p, m.Call, m.NIC, m.Address); err != nil {
			return nil, fmt.Errorf("memory: restore: mutations[%d] (%s %s on %s): %w", i, m.Call, m.Address, m.NIC, err)
		}
		if m.From != "" && (m.Call != capture.Assign || p.nics[m.From] == nil || m.From == m.NIC) {
			return nil, fmt.Errorf("memory: restore: mutations[%d] (%s %s on %s): from %q is not another known NIC of an assign",
				i, m.Call, m.Address, m.NIC, m.From)
		}
	}
	p.log = slices.Clone(s.Mutations)
	return p, nil
}

// checkCall rejects a call this provider could not have queued or
// recorded: an assign or unassign always names its address, a forwarding
// change may not.
func checkCall(p *Provider, call capture.Kind, nic string, addr netip.Addr) error {
	switch call {
	case capture.Assign, capture.Unassign:
		if !addr.IsValid() {
			return errors.New("invalid address")
		}
	case capture.EnableForwarding, capture.DisableForwarding:
	default:
		return fmt.Errorf("call %q is not one this provider makes", call)
	}
	if p.nics[nic] == nil {
		return fmt.Errorf("%w %q", provider.ErrUnknownNIC, nic)
	}
	return nil
}
