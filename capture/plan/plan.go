// Package plan is the pure core of a node's reconcile: from the config, the
// current epochs, what the node holds and the release intents it persisted,
// it computes the provider actions the node needs. It reads no clock and does
// no I/O; the same inputs give byte-identical output.
//
// Acquires are planned for the addresses this node should hold and does not
// hold at the current epoch. Releases are the de-provision projection:
// (held by this node − desired for this node), evaluated at the current
// epoch, plus the persisted markers the gate still accepts. Nothing is ever
// cancelled: when an address becomes desired again its epoch moves on, it
// falls out of the projection, and the gate skips what was planned before.
package plan

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
)

// MaxEpoch is the highest epoch a record may hold. Epochs grow by one per
// change of holder, so a real line never comes near it (2^63−1 changes at
// a million a second take 292,000 years); a value above it can only come
// from a bug, a bit flip or a forger, and is refused wherever it is met:
// federation refuses such events at the door, and Epochs neither adopts
// nor bumps to such a record. Keeping the top half of uint64 unused means
// that no epoch + 1 anywhere can wrap.
const MaxEpoch capture.Epoch = 1<<63 - 1

// Epochs reconciles epoch records with the desired holders: each key starts
// from its local record, adopts a peer's record when that epoch is higher
// (max(local, seen)), and then bumps when its holder is not the desired one.
// It returns the records of every key in desired and the keys whose record
// changed, sorted.
//
// A seen record at the local epoch with another holder is a conflict (two
// nodes bumped at once): the key bumps past it.
//
// No record it returns is lower than the local one: a seen record above
// MaxEpoch is ignored, and a key whose epoch is already MaxEpoch is not
// bumped (it keeps its holder, which fences every other node's acquires)
// rather than wrapped to 0.
func Epochs(desired map[capture.Key]string, local, seen map[capture.Key]capture.EpochRecord) (map[capture.Key]capture.EpochRecord, []capture.Key) {
	out := make(map[capture.Key]capture.EpochRecord, len(desired))
	var changed []capture.Key
	for k, holder := range desired {
		rec := local[k]
		next := rec
		s, ok := seen[k]
		if ok && s.Epoch > next.Epoch && (s.Epoch <= MaxEpoch || wrapEpochs) {
			next = s
		}
		// Two nodes that bumped at once may hold the same epoch for two
		// holders: the line moves past it, so that no epoch means two
		// holders.
		conflict := ok && s.Epoch == next.Epoch && s.Holder != next.Holder
		if (next.Holder != holder || conflict) && (next.Epoch < MaxEpoch || wrapEpochs) {
			next = capture.EpochRecord{Epoch: next.Epoch + 1, Holder: holder}
		}
		out[k] = next
		if next != rec {
			changed = append(changed, k)
		}
	}
	slices.SortFunc(changed, capture.Key.Compare)
	return out, changed
}

// Input is everything a plan depends on.
type Input struct {
	// Node is the node planning.
	Node  string
	Pools []capture.Pool
	// Epochs are the current records, after Epochs has run.
	Epochs map[capture.Key]capture.EpochRecord
	// Held is what this node holds.
	Held map[capture.Key]capture.Held
	// Markers are the release intents persisted so far.
	Markers []capture.Action
}

// Plan is what a node should do.
type Plan struct {
	Acquires []capture.Action `json:"acquires"`
	Releases []capture.Action `json:"releases"`
	// Markers are the releases not persisted yet: the shell writes them
	// before it imports, so that the intent survives a crash.
	Markers []capture.Action `json:"markers"`
	// Drop lists the idempotency keys of persisted markers that the gate
	// calls stale (dropStaleDeprovisionMarkers).
	Drop []string `json:"drop"`
}

// Actions returns the acquires, then the releases.
func (p *Plan) Actions() []capture.Action {
	return append(slices.Clone(p.Acquires), p.Releases...)
}

// Encode renders the plan canonically, for comparing plans byte for byte.
func (p *Plan) Encode() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Only plain strings, numbers and addresses are encoded.
		panic(err)
	}
	return b
}

// Compute plans the actions of node in.Node.
func Compute(in Input) Plan {
	var p Plan
	// Targets this node keeps using after the plan: forwarding stays on for
	// them, whatever is released beside.
	keep := map[string]bool{}

	for i := range in.Pools {
		pool := &in.Pools[i]
		me, member := pool.Member(in.Node)
		domain := pool.Domain(in.Node)
		for _, addr := range pool.Addresses {
			key := capture.Key{Pool: pool.Name, Address: addr, Domain: domain}
			rec, ok := in.Epochs[key]
			if !ok || !member || rec.Holder != in.Node {
				continue
			}
			keep[me.Target] = true
			if h, held := in.Held[key]; held && h.Confirmed && h.Epoch == rec.Epoch && h.Target == me.Target {
				continue
			}
			if pool.OnPrem() {
				p.Acquires = append(p.Acquires, capture.NewAction(capture.ProxyARPStart, key, pool.Provider, me.Target, in.Node, rec.Epoch, nil))
				continue
			}
			p.Acquires = append(p.Acquires,
				capture.NewAction(capture.Assign, key, pool.Provider, me.Target, in.Node, rec.Epoch, map[string]string{capture.ParamAllowReassignment: "true"}),
				capture.NewAction(capture.EnableForwarding, key, pool.Provider, me.Target, in.Node, rec.Epoch, nil))
		}
	}
	onPrem := map[string]bool{}
	for i := range in.Pools {
		onPrem[in.Pools[i].Name] = in.Pools[i].OnPrem()
	}

	// Held, or maybe held (an acquire whose outcome a crash hid), but no
	// longer desired here: release at the current epoch. Releases are
	// NIC-scoped and idempotent, so releasing what was never taken is
	// harmless. A key that left the config has its record moved to holder
	// "" by the shell, so it is released too.
	heldKeys := make([]capture.Key, 0, len(in.Held))
	for k := range in.Held {
		heldKeys = append(heldKeys, k)
	}
	slices.SortFunc(heldKeys, capture.Key.Compare)
	for _, k := range heldKeys {
		h := in.Held[k]
		rec, ok := in.Epochs[k]
		if !ok || rec.Holder == in.Node {
			continue
		}
		if onPrem[k.Pool] {
			p.Releases = append(p.Releases, capture.NewAction(capture.ProxyARPStop, k, h.Provider, h.Target, in.Node, rec.Epoch, nil))
			continue
		}
		p.Releases = append(p.Releases, capture.NewAction(capture.Unassign, k, h.Provider, h.Target, in.Node, rec.Epoch, nil))
		if !keep[h.Target] {
			p.Releases = append(p.Releases, capture.NewAction(capture.DisableForwarding, k, h.Provider, h.Target, in.Node, rec.Epoch, nil))
		}
	}

	// Persisted intents: re-emitted while the gate accepts them, dropped
	// once it calls them stale.
	planned := map[string]bool{}
	for _, a := range p.Releases {
		planned[a.IdempotencyKey] = true
	}
	marked := map[string]bool{}
	for _, m := range in.Markers {
		marked[m.IdempotencyKey] = true
		rec, ok := in.Epochs[m.Key]
		if gate.Check(&m, rec, ok) != "" {
			p.Drop = append(p.Drop, m.IdempotencyKey)
			continue
		}
		if !planned[m.IdempotencyKey] {
			planned[m.IdempotencyKey] = true
			p.Releases = append(p.Releases, m)
		}
	}
	for _, a := range p.Releases {
		if !marked[a.IdempotencyKey] {
			p.Markers = append(p.Markers, a)
		}
	}
	sortActions(p.Acquires)
	sortActions(p.Releases)
	sortActions(p.Markers)
	slices.Sort(p.Drop)
	return p
}

// kindOrder puts the address before its forwarding on acquire, and the
// address before its forwarding on release too: forwarding goes off only
// once the address is gone.
func kindOrder(k capture.Kind) int { return k.Order() }

func sortActions(as []capture.Action) {
	slices.SortFunc(as, func(a, b capture.Action) int {
		if c := a.Key.Compare(b.Key); c != 0 {
			return c
		}
		if c := cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)); c != 0 {
			return c
		}
		return cmp.Compare(a.IdempotencyKey, b.IdempotencyKey)
	})
}
