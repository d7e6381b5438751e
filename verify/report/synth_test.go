package report

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// builder writes a history by hand, an event at a time.
type builder struct{ events []history.Event }

func ms(x float64) int64 { return int64(x * float64(time.Millisecond)) }

func (b *builder) add(p history.Process, typ history.Type, f string, v history.Value, at int64, errv history.Value) {
	b.events = append(b.events, history.Event{
		Index: int64(len(b.events)), Process: p, Type: typ, F: f, Value: v, Time: at, Error: errv,
	})
}

func (b *builder) invoke(p history.Process, f string, v history.Value, atMS float64) {
	b.add(p, history.Invoke, f, v, ms(atMS), nil)
}

func (b *builder) done(p history.Process, typ history.Type, f string, v history.Value, atMS float64) {
	b.add(p, typ, f, v, ms(atMS), nil)
}

func (b *builder) doneErr(p history.Process, typ history.Type, f string, v, errv history.Value, atMS float64) {
	b.add(p, typ, f, v, ms(atMS), errv)
}

// synthetic generates a history of n client operations by workers
// concurrent clients against a register, shaped like a real run: latencies
// spread log-normally around a few ms, a schedule of faults during which
// operations slow down, fail or time out (info, after which the worker goes
// on as process + workers), the nemesis's operations at the faults' edges,
// and operations still in flight when the history ends. The same seed gives
// the same history.
func synthetic(seed uint64, n, workers int) ([]history.Event, []Fault) {
	rng := rand.New(rand.NewPCG(seed, 7))
	// Each worker issues about 30 ops a second, so n ops take
	// n / (30·workers) seconds; the faults are placed in proportion.
	total := time.Duration(float64(n) / float64(30*workers) * float64(time.Second))
	at := func(frac float64) time.Duration { return time.Duration(frac * float64(total)) }
	faults := []Fault{
		{Name: "partition halves", Start: at(0.20), End: at(0.30)},
		{Name: "pause n1", Start: at(0.45), End: at(0.50)},
		{Name: "kill n2", Start: at(0.48), End: at(0.56)},
		{Name: "partition halves", Start: at(0.70), End: at(0.74)},
		{Name: "clock skew", Start: at(0.93)},
	}
	during := func(t int64) bool {
		for _, f := range faults {
			if t >= int64(f.Start) && (f.End == 0 || t < int64(f.End)) {
				return true
			}
		}
		return false
	}

	type ev struct {
		history.Event
		order int // ties: a completion before a later invoke
	}
	var evs []ev
	emit := func(e history.Event) { evs = append(evs, ev{e, len(evs)}) }

	procs := make([]history.Process, workers)
	next := make([]int64, workers)
	for w := range procs {
		procs[w] = history.Process(w)
		next[w] = int64(rng.IntN(20)) * int64(time.Millisecond)
	}
	value := int64(0)
	var lastInvoke int64
	type flight struct {
		p    history.Process
		f    string
		end  int64
		typ  history.Type
		v    history.Value
		errv history.Value
	}
	var flights []flight
	for range n {
		w := 0
		for i := range next {
			if next[i] < next[w] {
				w = i
			}
		}
		start := next[w]
		lastInvoke = max(lastInvoke, start)
		lat := time.Duration(math.Exp(rng.NormFloat64()*0.6+math.Log(4)) * float64(time.Millisecond))
		typ := history.OK
		var errv history.Value
		faulty := during(start)
		if faulty {
			lat *= 3
			switch r := rng.Float64(); {
			case r < 0.02:
				typ, errv, lat = history.Info, "timeout", time.Second
			case r < 0.25:
				typ, errv = history.Fail, "unavailable"
			}
		}
		var f string
		var in, out history.Value
		switch r := rng.IntN(20); {
		case r < 10:
			f, out = "read", value
		case r < 17:
			value++
			f, in, out = "write", value, value
		default:
			f, in = "cas", []history.Value{value, value + 1}
			if rng.IntN(3) == 0 {
				typ, errv = history.Fail, nil
			} else {
				value++
			}
			out = in
		}
		if typ != history.OK {
			out = in
		}
		emit(history.Event{Process: procs[w], Type: history.Invoke, F: f, Value: in, Time: start})
		end := start + int64(lat)
		flights = append(flights, flight{procs[w], f, end, typ, out, errv})
		if typ == history.Info {
			procs[w] += history.Process(workers)
		}
		next[w] = end + int64(rng.ExpFloat64()*float64(25*time.Millisecond))
	}
	// The history ends just after the last invoke: whatever is still in
	// flight then never completes.
	stop := lastInvoke + int64(time.Millisecond)
	for _, fl := range flights {
		if fl.end <= stop {
			emit(history.Event{Process: fl.p, Type: fl.typ, F: fl.f, Value: fl.v, Time: fl.end, Error: fl.errv})
		}
	}
	for _, f := range faults {
		start, stopF := "start-"+f.Name, "stop-"+f.Name
		emit(history.Event{Process: history.Nemesis, Type: history.Invoke, F: start, Time: int64(f.Start)})
		emit(history.Event{Process: history.Nemesis, Type: history.Info, F: start, Value: f.Name, Time: int64(f.Start) + ms(3)})
		if f.End != 0 {
			emit(history.Event{Process: history.Nemesis, Type: history.Invoke, F: stopF, Time: int64(f.End)})
			emit(history.Event{Process: history.Nemesis, Type: history.Info, F: stopF, Value: "healed", Time: int64(f.End) + ms(2)})
		}
	}
	slices.SortStableFunc(evs, func(a, b ev) int {
		// A completion and an invoke of one process at the same time:
		// the completion comes first.
		ka, kb := 1, 1
		if a.Type != history.Invoke {
			ka = 0
		}
		if b.Type != history.Invoke {
			kb = 0
		}
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(ka, kb), cmp.Compare(a.order, b.order))
	})
	events := make([]history.Event, len(evs))
	for i, e := range evs {
		e.Index = int64(i)
		events[i] = e.Event
	}
	return events, faults
}
