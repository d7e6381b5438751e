package model

import (
	"fmt"
	"math"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// captureModel is the capture owner of mobile addresses at a provider: per
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
type captureModel struct{}

func (captureModel) Name() string { return "capture-owner" }
func (captureModel) Doc() string {
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
	nics *values
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

func (m captureModel) Compile(ops []history.Op, _ Options) ([]linear.Partition, error) {
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
			specs = append(specs, &captureSpec{addr: addr, nics: newValues()})
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
			if _, isStr := h.(string); h != nil && !isStr {
				return nil, opErr(o, "read holder must be a string or nil, found %s", history.Show(h))
			}
			co = capOp{kind: capRead, nic: spec.nics.id(h)}
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
			return nil, unknownF(o, m.Name(), "read", "assign", "unassign", "forward")
		}
		spec.ops = append(spec.ops, co)
		parts[pi].Ops = append(parts[pi].Ops, interval(o, id))
	}
	return parts, nil
}
