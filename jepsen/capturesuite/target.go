package capturesuite

import (
	"maps"
	"slices"

	"github.com/ipfence/ipfence/verify/gen"
)

// atHolder makes the faults that take a node out (kill, pause, and a
// partition that isolates one node) take out the node the clients' latest
// read found holding an address, once a read has found one; before that,
// and for every other fault, the node the seed drew stands. A drawn node
// holds nothing two times in three, and a fault of a node that holds
// nothing tests no failover: with the draw alone most runs of the default
// length saw none. The kinds and their order still come from the seed
// alone; only the node follows the run, as the flaps' drains do. A drawn
// etcd member (--epochs etcd) stands too: those faults are there to take
// out a member, not a node.
//
// It wraps the whole nemesis generator (gen.Nemesis inside), outside the
// route, so that it hears the client threads' reads, which the nemesis
// route does not pass on.
type atHolder struct {
	g      gen.Generator
	holder string
	// keep are the drawn targets that stand: the etcd members.
	keep []string
}

func targetHolder(g gen.Generator, keep ...string) gen.Generator {
	return &atHolder{g: g, keep: keep}
}

func (a *atHolder) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	op, next, st := a.g.Next(ctx)
	if st == gen.Ready && a.holder != "" {
		op.Value = retarget(op.F, op.Value, a.holder, a.keep)
	}
	if next == a.g {
		return op, a, st
	}
	return op, &atHolder{g: next, holder: a.holder, keep: a.keep}, st
}

func (a *atHolder) Update(ctx gen.Context, ev gen.Event) gen.Generator {
	n := &atHolder{g: a.g.Update(ctx, ev), holder: a.holder, keep: a.keep}
	if ev.Kind == gen.Completed && ev.F == "read" {
		v, _ := ev.Value.(map[string]any)
		if h, _ := v["holder"].(string); h != "" {
			n.holder = nodeOf(h)
		}
	}
	if n.g == a.g && n.holder == a.holder {
		return a
	}
	return n
}

// retarget returns a fault's value with its node replaced by holder, for
// the faults that take one node out, unless the drawn node is in keep;
// other values come back as they are. The value is copied: the drawn one
// may be shared with the history.
func retarget(f string, value any, holder string, keep []string) any {
	v, ok := value.(map[string]any)
	if !ok {
		return value
	}
	switch f {
	case "start-kill", "start-pause":
	case "start-partition":
		if v["shape"] != "isolate" {
			return value
		}
	default:
		return value
	}
	drawn, ok := v["node"].(string)
	if !ok || slices.Contains(keep, drawn) {
		return value
	}
	out := maps.Clone(v)
	out["node"] = holder
	return out
}
