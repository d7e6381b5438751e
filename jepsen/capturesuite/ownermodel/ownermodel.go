// Package ownermodel is the capture owner as a sequential specification
// for the linearizability checker: per mobile address, the NIC that holds
// it and the highest fencing epoch the provider applied to it. It lives
// beside the capture test, which checks the provider's record against it,
// rather than in verify/model, whose models know nothing of ipfence; the
// toolkit's binary registers it (model.Register) so that
// `check --model capture-owner` reads the capture test's files.
package ownermodel

import (
	"fmt"
	"math"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// Model is the capture owner of mobile addresses at a provider: per
// address, the NIC that holds it (or none) and the highest fencing epoch
// applied to it. Reads observe the holder; assign, unassign and forward are
// the provider's mutations, each carrying the epoch of the action that made
// it. A mutation whose epoch is lower than one already applied to its
// address is impossible: that is the fence, and a history where a stale
// action took effect has no linearization. Each address is a partition.
//
// Values are maps: a read is invoked with {"address": A} and completes with
// {"address": A, "holder": NIC or nil}; assign, unassign and forward take
// {"address": A, "nic": NIC, "epoch": E} (forward also "enabled", which the
// model does not need). An assign moves the address to the NIC; an unassign
// takes it off the NIC if the NIC holds it and changes nothing otherwise; a
// forward on the holder's NIC changes no holder, only the epoch, and a
// forward on another NIC changes nothing and is not fenced.
type Model struct{}

// Name is the model's name on the command line: capture-owner.
func (Model) Name() string { return "capture-owner" }

// Doc describes the operations the model accepts.
func (Model) Doc() string {
	return "holder and fencing epoch per address: read, assign, unassign, forward on {address, nic, epoch}; partitioned by address"
}

type capKind uint8

const (
	capRead capKind = iota
	capAssign
	capUnassign
	capForward
)

type capOp struct {
	kind  capKind
	nic   uint32 // interned NIC (the read's observed holder); 0 is none
	epoch uint32
}

// captureSpec is one address. Its state packs the holder's interned id in
// the high 32 bits and the highest applied epoch in the low 32.
type captureSpec struct {
	addr string
	ops  []capOp
	nics *nics
}

func capState(holder, epoch uint32) linear.State {
	return linear.State(holder)<<32 | linear.State(epoch)
}

func (s *captureSpec) Init() linear.State { return 0 }

func (s *captureSpec) Step(st linear.State, i int) (linear.State, bool) {
	o := &s.ops[i]
	holder, epoch := uint32(st>>32), uint32(st)
	switch o.kind {
	case capRead:
		return st, holder == o.nic
	case capAssign:
		if o.epoch < epoch {
			return st, false
		}
		return capState(o.nic, o.epoch), true
	case capUnassign:
		if o.epoch < epoch {
			return st, false
		}
		if holder == o.nic {
			holder = 0
		}
		return capState(holder, o.epoch), true
	default: // capForward
		// Forwarding is the NIC's: a change on a NIC that does not hold
		// the address touches nothing of its capture (a former holder's
		// late clean-up), so only the holder's is fenced.
		if o.nic != holder {
			return st, true
		}
		if o.epoch < epoch {
			return st, false
		}
		return capState(holder, o.epoch), true
	}
}

func (s *captureSpec) Neutral(i int) bool { return s.ops[i].kind == capRead }

func (s *captureSpec) DescribeState(st linear.State) string {
	return fmt.Sprintf("held by %s at epoch %d", s.nics.show(uint32(st>>32)), uint32(st))
}

func (s *captureSpec) DescribeOp(i int) string {
	o := &s.ops[i]
	switch o.kind {
	case capRead:
		return "read → " + s.nics.show(o.nic)
	case capAssign:
		return fmt.Sprintf("assign to %s at epoch %d", s.nics.show(o.nic), o.epoch)
	case capUnassign:
		return fmt.Sprintf("unassign from %s at epoch %d", s.nics.show(o.nic), o.epoch)
	}
	return fmt.Sprintf("forwarding on %s at epoch %d", s.nics.show(o.nic), o.epoch)
}

// Compile makes one partition per address; an operation it cannot read is
// refused with a *model.OpError naming it.
func (m Model) Compile(ops []history.Op, _ model.Options) ([]linear.Partition, error) {
	index := map[string]int{}
	var specs []*captureSpec
	var parts []linear.Partition
	for id := range ops {
		o := &ops[id]
		if o.Type == history.Fail {
			continue
		}
		in, ok := o.Input.(map[string]history.Value)
		if !ok {
			return nil, opErr(o, "capture-owner value must be a map with an address, found %s", history.Show(o.Input))
		}
		addr, ok := in["address"].(string)
		if !ok {
			return nil, opErr(o, "capture-owner value needs a string address, found %s", history.Show(o.Input))
		}
		pi, seen := index[addr]
		if !seen {
			pi = len(specs)
			index[addr] = pi
			specs = append(specs, &captureSpec{addr: addr, nics: newNICs()})
			parts = append(parts, linear.Partition{Label: "address " + addr, Spec: specs[pi]})
		}
		spec := specs[pi]
		var co capOp
		switch o.F {
		case "read":
			if o.Pending() {
				// A read whose answer never came constrains nothing.
				continue
			}
			out, ok := o.Output.(map[string]history.Value)
			if !ok {
				return nil, opErr(o, "read result must be a map with a holder, found %s", history.Show(o.Output))
			}
			h, present := out["holder"]
			if !present {
				return nil, opErr(o, "read result has no holder: %s", history.Show(o.Output))
			}
			hs, isStr := h.(string)
			if h != nil && !isStr {
				return nil, opErr(o, "read holder must be a string or nil, found %s", history.Show(h))
			}
			var holder uint32 // none
			if isStr {
				holder = spec.nics.id(hs)
			}
			co = capOp{kind: capRead, nic: holder}
		case "assign", "unassign", "forward":
			nic, ok := in["nic"].(string)
			if !ok || nic == "" {
				return nil, opErr(o, "%s needs a non-empty string nic, found %s", o.F, history.Show(o.Input))
			}
			e, ok := in["epoch"].(int64)
			if !ok || e < 0 || e > math.MaxUint32 {
				return nil, opErr(o, "%s needs an epoch from 0 to %d, found %s", o.F, uint32(math.MaxUint32), history.Show(in["epoch"]))
			}
			co = capOp{kind: map[string]capKind{"assign": capAssign, "unassign": capUnassign, "forward": capForward}[o.F], nic: spec.nics.id(nic), epoch: uint32(e)}
		default:
			return nil, opErr(o, "model %s has no operation %q (valid: read, assign, unassign, forward)", m.Name(), o.F)
		}
		spec.ops = append(spec.ops, co)
		parts[pi].Ops = append(parts[pi].Ops, interval(o, id))
	}
	return parts, nil
}

// StateValue is the holder's NIC and the epoch, for pages that show
// states in JSON.
func (s *captureSpec) StateValue(st linear.State) (history.Value, bool) {
	return map[string]history.Value{"holder": s.nics.value(uint32(st >> 32)), "epoch": int64(uint32(st))}, true
}

// nics interns NIC names as small integers; 0 is none (nil).
type nics struct {
	ids   map[string]uint32
	names []string
}

func newNICs() *nics { return &nics{ids: map[string]uint32{}, names: []string{""}} }

// id is the NIC's number (never 0: an empty name read back is not "none").
func (n *nics) id(name string) uint32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	id := uint32(len(n.names))
	n.ids[name] = id
	n.names = append(n.names, name)
	return id
}

// value is the NIC as a history value: its name, or nil for none.
func (n *nics) value(id uint32) history.Value {
	if id == 0 {
		return nil
	}
	return n.names[id]
}

// show renders the NIC as the checkers' texts do.
func (n *nics) show(id uint32) string { return history.Show(n.value(id)) }

// interval is the operation as the search sees it: a pending one returns
// never (-1).
func interval(o *history.Op, id int) linear.Op {
	r := o.Return
	if o.Pending() {
		r = -1
	}
	return linear.Op{Call: o.Call, Return: r, ID: id}
}

func opErr(o *history.Op, format string, args ...any) error {
	return &model.OpError{Index: o.Index, Msg: fmt.Sprintf(format, args...)}
}
