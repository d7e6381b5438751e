package capturesuite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/report"
)

// outageBound is how long an address may go without a holder while no
// fault is active before the availability checker calls it a failure.
// Short outages are part of the design: a vacating node's release may run
// before the new holder's acquire (each node acts on its own reconcile
// pass, 500 ms apart), which fenced runs show as periods of 100 to 250 ms
// on this machine, and longer ones happen when a drain's release runs
// just before the final undrains (one fenced run: 8.2 s, reported on the
// summary line). The bound is the quiet time a default run gives the
// cluster to settle at its end (10 s): an address left on no NIC for that
// long while nothing is broken is a failure of the cluster, not of the
// schedule. Inside fault windows an outage is the fault's doing (the
// desired holder paused, the provider failing calls) and is only
// reported.
const outageBound = 10 * time.Second

// outage is one period in which an address was on no NIC.
type outage struct {
	Address string `json:"address"`
	// Start and End are ns on the history's clock; Open says the record
	// ended with the address still on no NIC (End is then the record's
	// end).
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
	Open  bool  `json:"open,omitempty"`
	// Inside and Outside split the period by the fault windows.
	Inside  time.Duration `json:"inside_faults_ns"`
	Outside time.Duration `json:"outside_faults_ns"`
	// Reads counts the client reads of the address that completed during
	// the period and found no holder.
	Reads int `json:"reads_found_none"`
}

// words says what the outage was, for the terminal.
func (o outage) words() string {
	end := fmt.Sprintf("to %.3fs", float64(o.End)/1e9)
	if o.Open {
		end = "to the end of the record"
	}
	s := fmt.Sprintf("%s had no holder from %.3fs %s (%v: %v outside fault windows)", o.Address, float64(o.Start)/1e9, end,
		time.Duration(o.End-o.Start).Round(time.Millisecond), o.Outside.Round(time.Millisecond))
	if o.Reads > 0 {
		s += fmt.Sprintf("; %d reads found none", o.Reads)
	}
	return s
}

// outages replays the record per address: a period without a holder
// begins when the last NIC holding the address lets it go and ends with
// the next assign. An address that no mutation ever touched is not in the
// record and has no periods (the convergence checker judges whether it
// ended up held). end is the end of the record; faults split each period.
func outages(ms []mutationRecord, startMono, end int64, faults []report.Fault) []outage {
	holders := map[string]map[string]bool{}
	open := map[string]int64{}
	var out []outage
	for _, m := range ms {
		if m.Call != "assign-secondary-ip" && m.Call != "unassign-secondary-ip" || m.Address == "" {
			continue
		}
		t := mutationTime(m, startMono)
		h := holders[m.Address]
		if h == nil {
			h = map[string]bool{}
			holders[m.Address] = h
		}
		if m.Call == "assign-secondary-ip" {
			if m.From != "" {
				delete(h, m.From)
			}
			h[m.NIC] = true
			if s, ok := open[m.Address]; ok {
				out = append(out, outage{Address: m.Address, Start: s, End: t})
				delete(open, m.Address)
			}
			continue
		}
		if h[m.NIC] {
			delete(h, m.NIC)
			if len(h) == 0 {
				open[m.Address] = t
			}
		}
	}
	for a, s := range open {
		out = append(out, outage{Address: a, Start: s, End: max(end, s), Open: true})
	}
	slices.SortFunc(out, func(a, b outage) int {
		if a.Start != b.Start {
			return int(min(max(a.Start-b.Start, -1), 1))
		}
		return compareStrings(a.Address, b.Address)
	})
	for i := range out {
		inside := overlap(out[i].Start, out[i].End, faults)
		out[i].Inside = inside
		out[i].Outside = time.Duration(out[i].End-out[i].Start) - inside
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// overlap is how much of [start, end) the union of the fault windows
// covers (a window without an end runs to the end of time).
func overlap(start, end int64, faults []report.Fault) time.Duration {
	type span struct{ a, b int64 }
	var spans []span
	for _, f := range faults {
		a, b := int64(f.Start), int64(f.End)
		if f.End == 0 {
			b = end
		}
		a, b = max(a, start), min(b, end)
		if a < b {
			spans = append(spans, span{a, b})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return int(min(max(x.a-y.a, -1), 1)) })
	var total, reach int64
	reach = start
	for _, s := range spans {
		if s.b <= reach {
			continue
		}
		total += s.b - max(s.a, reach)
		reach = s.b
	}
	return time.Duration(total)
}

// availability measures, per address, the time it was on no NIC (no
// client could reach it), per period, inside and outside the fault
// windows, and counts the reads that found no holder. A period with more
// than outageBound outside fault windows is a failure: the cluster was
// whole and still left the address unreachable.
func availability(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		if col.err != nil && col.mutations == nil {
			return checker.Errorf("no mutation record: %v", col.err)
		}
		end := int64(0)
		for _, e := range r.Events {
			end = max(end, e.Time)
		}
		for _, m := range col.mutations {
			end = max(end, mutationTime(m, r.StartMono))
		}
		outs := outages(col.mutations, r.StartMono, end, r.Faults)
		countReads(outs, r)
		var total, inside, outside time.Duration
		var findings, reported []string
		perAddr := map[string]float64{}
		for _, o := range outs {
			d := time.Duration(o.End - o.Start)
			total += d
			inside += o.Inside
			outside += o.Outside
			perAddr[o.Address] += float64(d.Microseconds()) / 1000
			if o.Outside > outageBound {
				findings = append(findings, o.words()+fmt.Sprintf(", over the %v bound", outageBound))
			} else {
				reported = append(reported, o.words())
			}
		}
		valid := linear.True
		if len(findings) > 0 {
			valid = linear.False
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		longest := ""
		if i := longestOutage(outs); i >= 0 {
			longest = outs[i].words()
		}
		return checker.Result{Valid: valid, Fields: map[string]any{
			"no_holder_ms": ms(total), "inside_faults_ms": ms(inside), "outside_faults_ms": ms(outside),
			"episodes": len(outs), "failed_episodes": len(findings), "bound_s": outageBound.Seconds(),
			"no_holder_ms_by_address": perAddr, "periods": outs,
			"findings": first(findings, 10), "findings_total": len(findings),
			"examples": first(reported, 10), "longest": longest}}
	})
}

// countReads counts, for each outage, the completed reads of its address
// that found no holder and returned within it.
func countReads(outs []outage, r *checker.Run) {
	for _, op := range r.Ops {
		if op.F != "read" || op.Type != history.OK || op.Return < 0 {
			continue
		}
		out, _ := op.Output.(map[string]history.Value)
		if out == nil || out["holder"] != nil {
			continue
		}
		a, _ := out["address"].(string)
		t := r.Events[op.Return].Time
		for i := range outs {
			if outs[i].Address == a && outs[i].Start <= t && (t <= outs[i].End || outs[i].Open) {
				outs[i].Reads++
				break
			}
		}
	}
}

// longestOutage is the index of the longest period, -1 for none.
func longestOutage(outs []outage) int {
	best := -1
	for i, o := range outs {
		if best < 0 || o.End-o.Start > outs[best].End-outs[best].Start {
			best = i
		}
	}
	return best
}
