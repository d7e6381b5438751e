package capturesuite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture/etcdline"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/plan"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// collected is what the harness reads from the system after the run, for
// the checkers: the simulator's record and whether the nodes converged.
type collected struct {
	mutations []mutationRecord
	// converged says every address sat on the holder all nodes desired
	// before the bound; desired and actual are the last view.
	converged bool
	bound     time.Duration
	waited    time.Duration
	desired   map[string]string
	actual    map[string]string
	err       error
	// calls are the nodes' API calls by operation, when the simulator
	// tells them apart (callsCounted); callsErr why they could not be
	// read.
	calls        map[string]uint64
	callsCounted bool
	callsErr     error
	// wall is what the cloud refused (Azure, OCI; see cloudwall.go).
	wall wallCounts
	// line is the epoch line read from etcd after the run (--epochs
	// etcd), by address; lineErr why it could not be read.
	line    map[string]etcdline.Record
	lineErr error
	// tokens are etcd's records at the revisions the mutations carried
	// (--epochs etcd; see linetoken.go).
	tokens tokenReads
}

// mutationTime is a record entry's time on the history's clock.
func mutationTime(m mutationRecord, startMono int64) int64 { return m.Mono - startMono }

// singleHolder replays the record per address and measures every period in
// which an address was on more than one NIC. The provider contract makes
// that impossible in the cloud, so any such period is a bug in the
// simulator or the driver, never merely slow failover.
func singleHolder(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		if col.err != nil && col.mutations == nil {
			return checker.Errorf("no mutation record: %v", col.err)
		}
		holders := map[string]map[string]bool{}
		since := map[string]int64{}
		var dual time.Duration
		var episodes []string
		open := map[string]int{}      // address → its episode's index while on two NICs
		nics := map[string][]string{} // address → the NICs of its open episode
		end := int64(0)
		for _, m := range col.mutations {
			t := mutationTime(m, r.StartMono)
			end = max(end, t)
			h := holders[m.Address]
			if h == nil {
				h = map[string]bool{}
				holders[m.Address] = h
			}
			before := len(h)
			switch m.Call {
			case "assign-secondary-ip":
				if m.From != "" {
					delete(h, m.From)
				}
				h[m.NIC] = true
			case "unassign-secondary-ip":
				delete(h, m.NIC)
			default:
				continue
			}
			switch {
			case before <= 1 && len(h) > 1:
				since[m.Address] = t
				open[m.Address] = len(episodes)
				nics[m.Address] = slices.Sorted(maps.Keys(h))
				episodes = append(episodes, "")
			case before > 1 && len(h) > 1:
				for n := range h {
					if !slices.Contains(nics[m.Address], n) {
						nics[m.Address] = append(nics[m.Address], n)
					}
				}
			case before > 1 && len(h) <= 1:
				dual += time.Duration(t - since[m.Address])
				episodes[open[m.Address]] = fmt.Sprintf("%s on %s at once from %.3fs to %.3fs (%v)", m.Address,
					strings.Join(nics[m.Address], " and "), float64(since[m.Address])/1e9, float64(t)/1e9,
					time.Duration(t-since[m.Address]).Round(time.Millisecond))
				delete(open, m.Address)
			}
		}
		for a, h := range holders {
			if len(h) > 1 {
				dual += time.Duration(end - since[a])
				episodes[open[a]] = fmt.Sprintf("%s on %s at once from %.3fs to the end of the record", a,
					strings.Join(nics[a], " and "), float64(since[a])/1e9)
			}
		}
		valid := linear.True
		if len(episodes) > 0 {
			valid = linear.False
		}
		return checker.Result{Valid: valid, Fields: map[string]any{
			"dual_holder_ms": float64(dual.Microseconds()) / 1000, "dual_holder_episodes": len(episodes),
			"examples": first(episodes, 10), "findings": first(episodes, 10), "findings_total": len(episodes),
			"mutations": len(col.mutations)}}
	})
}

// fence checks that no mutation the provider applied to an address's
// capture carries an epoch lower than one already applied for the address:
// every such mutation is a stale action that executed. It also counts the
// stale forwarding changes on NICs that no longer held the address
// (provider.Stale explains why those are harmless), apart.
//
// provider.StaleMutations does not judge epoch 0 (a change made outside a
// journal), but in this test every change comes from a node's journal,
// whose epochs start at 1: a mutation at epoch 0 is an epoch line that
// wrapped (issue 14: 2^64−1 + 1), and one above plan.MaxEpoch an epoch no
// line may reach. Both are findings, the first counted as a stale action
// (the line went down).
func fence(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		if col.err != nil && col.mutations == nil {
			return checker.Errorf("no mutation record: %v", col.err)
		}
		var effective, harmless, unbounded []string
		high := map[string]uint64{}
		for i, m := range col.mutations {
			if m.Address == "" {
				continue
			}
			at := float64(mutationTime(m, r.StartMono)) / 1e9
			switch {
			case m.Epoch == 0:
				effective = append(effective, fmt.Sprintf("mutation %d at %.3fs: %s %s on %s at epoch 0, which no journal makes (a wrapped epoch), after epoch %d",
					i, at, m.Call, m.Address, m.NIC, high[m.Address]))
			case m.Epoch > uint64(plan.MaxEpoch):
				unbounded = append(unbounded, fmt.Sprintf("mutation %d at %.3fs: %s %s on %s at epoch %d, above the bound %d",
					i, at, m.Call, m.Address, m.NIC, m.Epoch, uint64(plan.MaxEpoch)))
			}
			high[m.Address] = max(high[m.Address], m.Epoch)
		}
		for _, s := range provider.StaleMutations(toMutations(col.mutations)) {
			m := s.Mutation
			line := fmt.Sprintf("mutation %d at %.3fs: %s %s on %s at epoch %d, after epoch %d",
				s.Index, float64(mutationTime(col.mutations[s.Index], r.StartMono))/1e9, m.Call, m.Address, m.NIC, m.Epoch, s.High)
			if s.Effective {
				effective = append(effective, line)
			} else {
				harmless = append(harmless, line)
			}
		}
		valid := linear.True
		if len(effective) > 0 || len(unbounded) > 0 {
			valid = linear.False
		}
		findings := append(slices.Clone(effective), unbounded...)
		fields := map[string]any{}
		if col.wall.on {
			fields["stale_actions_refused_by_cloud"] = col.wall.refused
			fields["refused_examples"] = first(col.wall.examples, 10)
			fields["stale_writes_refused_412"] = col.wall.writes412
			if col.wall.err != nil {
				fields["refused_error"] = col.wall.err.Error()
			}
		}
		res := checker.Result{Valid: valid, Fields: map[string]any{
			"stale_actions_executed": len(effective), "examples": first(effective, 10),
			"epochs_above_bound": len(unbounded),
			"findings":           first(findings, 10), "findings_total": len(findings),
			"stale_forwarding_on_former_holders": len(harmless), "former_holder_examples": first(harmless, 10),
			"mutations": len(col.mutations)}}
		maps.Copy(res.Fields, fields)
		return res
	})
}

// toMutations converts the simulator's record as the admin API shows it.
func toMutations(rs []mutationRecord) []provider.Mutation {
	out := make([]provider.Mutation, len(rs))
	for i, m := range rs {
		a, _ := netip.ParseAddr(m.Address)
		out[i] = provider.Mutation{Call: capture.Kind(m.Call), NIC: m.NIC, Address: a, Epoch: capture.Epoch(m.Epoch), From: m.From, Enabled: m.Enabled}
	}
	return out
}

// convergence reports whether, after the final heal, every address came to
// rest on the holder every node desired, and how long after the heal the
// last holder change came.
func convergence(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		fields := map[string]any{"bound_s": col.bound.Seconds(), "desired": col.desired, "actual": col.actual}
		heal := lastHeal(r.Nemesis)
		last := int64(-1)
		for _, m := range col.mutations {
			if m.Call == "assign-secondary-ip" || m.Call == "unassign-secondary-ip" {
				if t := mutationTime(m, r.StartMono); t >= heal {
					last = t
				}
			}
		}
		conv := 0.0
		if last >= 0 {
			conv = float64(last-heal) / 1e9
		}
		fields["heal_s"] = float64(heal) / 1e9
		fields["convergence_s"] = conv
		fields["waited_after_run_s"] = col.waited.Seconds()
		if col.err != nil {
			fields["error"] = col.err.Error()
		}
		valid := linear.True
		if !col.converged {
			valid = linear.False
		}
		return checker.Result{Valid: valid, Fields: fields}
	})
}

// lastHeal is when the last nemesis stop completed (0 without faults).
func lastHeal(nem []history.Event) int64 {
	var t int64
	for _, e := range nem {
		if e.Type != history.Invoke && strings.HasPrefix(e.F, "stop-") {
			t = e.Time
		}
	}
	return t
}

// failover measures, for every fault that took out the holder of an
// address (killed, paused or isolated it), the time from the fault's start
// to the moment the provider showed the address on another NIC. Faults
// that healed before any move are counted apart: the holder came back
// before it was given up.
func failover(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		type fault struct {
			node        string
			start, stop int64
		}
		var faults []fault
		open := map[string]int{}
		for _, e := range r.Nemesis {
			kind := ""
			switch {
			case e.Type == history.Invoke && (e.F == "start-kill" || e.F == "start-pause" || e.F == "start-partition"):
				v, _ := e.Value.(map[string]any)
				if e.F == "start-partition" && v["shape"] != "isolate" {
					continue
				}
				n, _ := v["node"].(string)
				if n == "" {
					continue
				}
				kind = strings.TrimPrefix(e.F, "start-")
				open[kind] = len(faults)
				faults = append(faults, fault{node: n, start: e.Time, stop: -1})
			case e.Type != history.Invoke && strings.HasPrefix(e.F, "stop-"):
				kind = strings.TrimPrefix(e.F, "stop-")
				if i, ok := open[kind]; ok {
					faults[i].stop = e.Time
					delete(open, kind)
				}
			}
		}
		var lat []time.Duration
		notMoved := 0
		for _, f := range faults {
			// Who held each address when the fault began.
			holder := map[string]string{}
			for _, m := range col.mutations {
				if mutationTime(m, r.StartMono) > f.start {
					break
				}
				switch m.Call {
				case "assign-secondary-ip":
					holder[m.Address] = m.NIC
				case "unassign-secondary-ip":
					if holder[m.Address] == m.NIC {
						delete(holder, m.Address)
					}
				}
			}
			for addr, h := range holder {
				if nodeOf(h) != f.node {
					continue
				}
				moved := false
				for _, m := range col.mutations {
					t := mutationTime(m, r.StartMono)
					if t <= f.start || m.Address != addr || m.Call != "assign-secondary-ip" || m.NIC == h {
						continue
					}
					if f.stop >= 0 && t > f.stop {
						break
					}
					lat = append(lat, time.Duration(t-f.start))
					moved = true
					break
				}
				if !moved {
					notMoved++
				}
			}
		}
		fields := map[string]any{"failovers": len(lat), "healed_before_failover": notMoved}
		if len(lat) > 0 {
			slices.Sort(lat)
			q := func(p int) float64 { return lat[(p*len(lat)+99)/100-1].Seconds() }
			fields["median_s"], fields["p99_s"], fields["max_s"] = q(50), q(99), lat[len(lat)-1].Seconds()
		}
		return checker.Result{Valid: linear.True, Fields: fields}
	})
}

// ownerFile is the merged history in the run's folder.
const ownerFile = "capture-owner.jsonl"

// MutationProcess numbers the provider's record in the merged history
// (capture-owner.jsonl): far above any client process, so the two never
// meet.
const MutationProcess = 1 << 40

const mutationProcess = MutationProcess

// ownerHistory merges the clients' reads with the simulator's record, for
// the capture-owner model: each read as the clients saw it, each mutation
// as an instantaneous operation at the moment the simulator applied it.
func ownerHistory(col *collected) func(r *checker.Run) ([]history.Event, error) {
	return func(r *checker.Run) ([]history.Event, error) {
		if col.err != nil && col.mutations == nil {
			return nil, fmt.Errorf("no mutation record: %v", col.err)
		}
		var reads []history.Event
		for _, e := range r.Events {
			if e.Process >= 0 && e.F == "read" {
				reads = append(reads, e)
			}
		}
		out := make([]history.Event, 0, len(reads)+2*len(col.mutations))
		i := 0
		// Each mutation goes where the clients' reads could first see
		// it: its visibility in the record, or, on ARM, whose reads show
		// a PUT's NIC from its acceptance, its acceptance. The order is
		// the record's either way (ARM makes changes visible in the
		// order it accepted them); the stable sort keeps it so when two
		// share a time.
		ms := slices.Clone(col.mutations)
		readAt := func(m mutationRecord) int64 {
			if m.Accepted != 0 {
				return m.Accepted - r.StartMono
			}
			return mutationTime(m, r.StartMono)
		}
		slices.SortStableFunc(ms, func(a, b mutationRecord) int { return cmp.Compare(readAt(a), readAt(b)) })
		for _, m := range ms {
			t := readAt(m)
			// A mutation goes after every client event recorded at or
			// before its time.
			for i < len(reads) && reads[i].Time <= t {
				out = append(out, reads[i])
				i++
			}
			f := map[string]string{"assign-secondary-ip": "assign", "unassign-secondary-ip": "unassign",
				"ensure-forwarding-enabled": "forward", "ensure-forwarding-disabled": "forward"}[m.Call]
			if f == "" || m.Address == "" {
				continue
			}
			v := map[string]history.Value{"address": m.Address, "nic": m.NIC, "epoch": int64(m.Epoch)}
			out = append(out,
				history.Event{Process: mutationProcess, Type: history.Invoke, F: f, Value: v, Time: t, Node: "provider"},
				history.Event{Process: mutationProcess, Type: history.OK, F: f, Value: v, Time: t, Node: "provider"})
		}
		out = append(out, reads[i:]...)
		for k := range out {
			out[k].Index = int64(k)
		}
		if r.Dir != "" {
			// Saved so that the verdict can be reproduced alone:
			// ipfence-verify check --model capture-owner capture-owner.jsonl
			f, err := os.Create(filepath.Join(r.Dir, ownerFile))
			if err != nil {
				return nil, err
			}
			err = history.WriteAll(f, out)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	if s == nil {
		return []string{}
	}
	return s
}

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// callsPerMove reports what the nodes' work cost in API calls: every call
// the nodes made during the run (reads of their reconcile passes, writes,
// polls, retries, refused and throttled calls alike), against the
// addresses they placed (assigns in the record: first placements and
// moves) and moved (assigns to another NIC than the address's last). It
// judges nothing.
func callsPerMove(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, _ *checker.Run) checker.Result {
		fields := map[string]any{"counted": col.callsCounted}
		if col.callsErr != nil {
			fields["error"] = col.callsErr.Error()
		}
		if !col.callsCounted {
			return checker.Result{Valid: linear.True, Fields: fields}
		}
		last := map[string]string{}
		assigns, moves := 0, 0
		for _, m := range col.mutations {
			if m.Call != "assign-secondary-ip" {
				continue
			}
			assigns++
			if l, ok := last[m.Address]; ok && l != m.NIC {
				moves++
			}
			last[m.Address] = m.NIC
		}
		var total, writes uint64
		for op, n := range col.calls {
			total += n
			if writeOps[op] {
				writes += n
			}
		}
		fields["node_calls"], fields["node_writes"], fields["by_operation"] = total, writes, col.calls
		fields["assigns"], fields["moves"] = assigns, moves
		if assigns > 0 {
			fields["calls_per_assign"] = float64(total) / float64(assigns)
			fields["writes_per_assign"] = float64(writes) / float64(assigns)
		}
		return checker.Result{Valid: linear.True, Fields: fields}
	})
}
