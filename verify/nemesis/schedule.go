package nemesis

import (
	"time"

	"github.com/ipfence/ipfence/verify/gen"
)

// Choose draws the value that starts one fault of a kind, from the seeded
// source the schedule carries.
type Choose func(r *gen.Rand) any

// Choices are the kinds a schedule may start, each with how to draw its
// value. Kinds are tried in the order of Kinds.
type Choices struct {
	Kinds  []string
	Values map[string]Choose
}

// schedule starts a fault, lets it act, stops it, lets the system recover,
// and so on: "start-K" after Quiet, "stop-K" after Active, with K and its
// value drawn from the seed.
type schedule struct {
	c             Choices
	quiet, active time.Duration
	r             gen.Rand
	stream        uint64        // r is the stream's source in the run once asked
	at            time.Duration // when the next op is due; <0: not yet asked
	activeKind    string        // the kind started and not yet stopped
	started       bool
}

// Schedule returns the nemesis generator: quiet for quiet, then a fault of
// a kind drawn from choices for active, then quiet again, forever (wrap it
// in gen.TimeLimit). The same seed gives the same faults in the same order.
// It hands out ops only to the nemesis thread; put it under gen.Nemesis.
func Schedule(seed uint64, choices Choices, quiet, active time.Duration) gen.Generator {
	return &schedule{c: choices, quiet: quiet, active: active, stream: seed, at: -1}
}

func (s *schedule) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	if s.at < 0 {
		// The first quiet period starts when the schedule is first asked.
		first := *s
		first.at = ctx.Time + s.quiet
		first.r = ctx.Rand(s.stream) // the test's seed and this stream
		s = &first
	}
	if ctx.Time < s.at {
		return gen.Op{Time: s.at}, s, gen.Pending
	}
	if len(s.c.Kinds) == 0 {
		return gen.Op{}, s, gen.Exhausted
	}
	if len(ctx.Free) == 0 || ctx.Free[0] != gen.NemesisThread {
		// The nemesis is busy with the last op: wait for it to complete.
		return gen.Op{}, s, gen.Pending
	}
	n := *s
	var op gen.Op
	if s.started {
		op = gen.NemesisOp("stop-"+s.activeKind, nil)
		n.started, n.activeKind = false, ""
		n.at = ctx.Time + s.quiet
	} else {
		kind := s.c.Kinds[n.r.IntN(len(s.c.Kinds))]
		var v any
		if choose := s.c.Values[kind]; choose != nil {
			v = choose(&n.r)
		}
		op = gen.NemesisOp("start-"+kind, v)
		n.started, n.activeKind = true, kind
		n.at = ctx.Time + s.active
	}
	op.Time = ctx.Time
	return op, &n, gen.Ready
}

func (s *schedule) Update(gen.Context, gen.Event) gen.Generator { return s }

// Heal is a nemesis generator that stops every kind once: the end of a
// test's fault schedule, before the final quiet period in which the system
// must recover.
func Heal(kinds []string) gen.Generator {
	gs := make([]gen.Generator, len(kinds))
	for i, k := range kinds {
		gs[i] = gen.Once(gen.NemesisOp("stop-"+k, nil))
	}
	return gen.Seq(gs...)
}

// NodeChoice draws a node.
func NodeChoice(nodes []string) Choose {
	return func(r *gen.Rand) any { return map[string]any{"node": nodes[r.IntN(len(nodes))]} }
}

// PartitionChoice draws a partition shape among Shapes (with a seed for
// random halves and a node for isolate).
func PartitionChoice(nodes []string) Choose {
	return func(r *gen.Rand) any {
		shape := Shapes[r.IntN(len(Shapes))]
		v := map[string]any{"shape": shape}
		switch shape {
		case "random-halves":
			v["seed"] = int64(r.IntN(1 << 30))
		case "isolate":
			v["node"] = nodes[r.IntN(len(nodes))]
		}
		return v
	}
}

// SkewChoice draws a node and an offset of up to max either way, in whole
// milliseconds.
func SkewChoice(nodes []string, max time.Duration) Choose {
	return func(r *gen.Rand) any {
		ms := int64(r.IntN(int(2*max/time.Millisecond)+1)) - int64(max/time.Millisecond)
		return map[string]any{"node": nodes[r.IntN(len(nodes))], "offset": (time.Duration(ms) * time.Millisecond).String()}
	}
}

// StrobeChoice draws a node to strobe by delta every period.
func StrobeChoice(nodes []string, delta, period time.Duration) Choose {
	return func(r *gen.Rand) any {
		return map[string]any{"node": nodes[r.IntN(len(nodes))], "delta": delta.String(), "period": period.String()}
	}
}
