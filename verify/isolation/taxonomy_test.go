package isolation

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// events builds a history from lines "process type mops", in order, mops
// in the notation of notation and rwHistory: "ax1" appends 1 to x, "rx12"
// reads x = [1 2] and "rx" x = [] (list-append); "wx1" writes 1, "rx_"
// reads nil (rw-register). An invoke's reads carry no value.
func events(t *testing.T, lines ...string) *history.History {
	t.Helper()
	var evs []history.Event
	for i, l := range lines {
		f := strings.Fields(l)
		var proc int64
		for _, c := range f[0] {
			proc = proc*10 + int64(c-'0')
		}
		typ, ok := history.ParseType(f[1])
		if !ok {
			t.Fatalf("line %d: type %q", i, f[1])
		}
		var mops []history.Value
		for _, m := range f[2:] {
			key := string(m[1])
			var v history.Value
			switch m[0] {
			case 'a', 'w':
				v = int64(m[2] - '0')
				if m[0] == 'a' {
					mops = append(mops, []history.Value{"append", key, v})
				} else {
					mops = append(mops, []history.Value{"w", key, v})
				}
				continue
			case 'r':
				if typ != history.Invoke {
					if len(m) > 2 && m[2] == '_' {
						v = nil
					} else {
						l := []history.Value{}
						for _, d := range m[2:] {
							l = append(l, int64(d-'0'))
						}
						v = l
					}
				}
				mops = append(mops, []history.Value{"r", key, v})
			default:
				t.Fatalf("line %d: mop %q", i, m)
			}
		}
		evs = append(evs, history.Event{Index: int64(i), Process: history.Process(proc), Type: typ, F: "txn", Value: mops})
	}
	return &history.History{Format: history.JSONL, Events: evs}
}

// rwEvents is events for rw-register, where a one-digit read is a single
// value: "rx1" reads x = 1.
func rwEvents(t *testing.T, lines ...string) *history.History {
	h := events(t, lines...)
	for i := range h.Events {
		for _, m := range h.Events[i].Value.([]history.Value) {
			mm := m.([]history.Value)
			if l, ok := mm[2].([]history.Value); ok && mm[0] == "r" {
				if len(l) == 1 {
					mm[2] = l[0]
				} else {
					mm[2] = nil
				}
			}
		}
	}
	return h
}

func check(t *testing.T, h *history.History, workload, model string) *Result {
	t.Helper()
	res, err := Check(context.Background(), h, Options{Workload: workload, Consistency: model})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func expect(t *testing.T, res *Result, valid linear.Verdict, types, not []string) {
	t.Helper()
	if res.Valid != valid || !slices.Equal(res.AnomalyTypes, types) || (not != nil && !slices.Equal(res.Not, not)) {
		t.Fatalf("valid %v types %v not %v allowed %v, want %v %v %v\n%v", res.Valid, res.AnomalyTypes, res.Not, res.AllowedTypes, valid, types, not, firstExplanations(res))
	}
}

// A transaction that reads an element it appends only later: Elle's
// future read, which read committed already forbids (it is a trivial G1c).
func TestFutureRead(t *testing.T) {
	h := events(t, "0 invoke ax0", "0 ok ax0", "1 invoke rx ax1", "1 ok rx01 ax1")
	res := check(t, h, ListAppend, "read-committed")
	expect(t, res, linear.False, []string{"future-read"}, []string{"read-committed"})
	want := `T3 read key "x" as [0 1], which holds 1, an element T3 appends only later in the same transaction`
	if got := res.Anomalies["future-read"][0].Explanation; got != want {
		t.Fatalf("explanation %q, want %q", got, want)
	}
	// Elle's internal form: after appending 1 the read [0 1] agrees with
	// the transaction's own appends, but 0 is appended only afterwards.
	h = events(t, "0 invoke ax1 rx ax0 ax3", "0 ok ax1 rx01 ax0 ax3")
	expect(t, check(t, h, ListAppend, "read-atomic"), linear.False, []string{"empty-transaction-graph", "future-read"}, nil)
	// Read uncommitted allows it.
	res = check(t, h, ListAppend, "read-uncommitted")
	if res.Valid == linear.False || !slices.Equal(res.AllowedTypes, []string{"future-read"}) {
		t.Fatalf("read-uncommitted: %v %v allowed %v", res.Valid, res.AnomalyTypes, res.AllowedTypes)
	}
	// rw-register: a read of the value written later.
	h = rwEvents(t, "0 invoke wy1", "0 ok wy1", "1 invoke ry rx wx1", "1 ok ry1 rx1 wx1")
	expect(t, check(t, h, RWRegister, "read-committed"), linear.False, []string{"future-read"}, []string{"read-committed"})
}

// G-nonadjacent: T1 rw T2 wr T3 rw T4 wr T1, no two rw edges adjacent.
// Snapshot isolation and repeatable read forbid it; the cycle search must
// find it whatever edge it starts from.
func TestGNonadjacent(t *testing.T) {
	concurrent := []string{
		"1 invoke rx rw", "2 invoke ax1 ay1", "3 invoke ry rz", "4 invoke az1 aw1",
		"1 ok rx rw1", "2 ok ax1 ay1", "3 ok ry1 rz", "4 ok az1 aw1",
		"5 invoke rx rz", "5 ok rx1 rz1"}
	for _, model := range []string{"serializable", "snapshot-isolation", "repeatable-read", "strict-serializable"} {
		res := check(t, events(t, concurrent...), ListAppend, model)
		expect(t, res, linear.False, []string{"G-nonadjacent-item"}, []string{"repeatable-read", "snapshot-isolation"})
		c := res.Anomalies["G-nonadjacent-item"][0].Cycle
		var rels []string
		for _, st := range c {
			rels = append(rels, st.Rel)
		}
		if len(c) != 4 || strings.Count(strings.Join(rels, " "), "rw") != 2 {
			t.Fatalf("%s: cycle %v", model, rels)
		}
	}
	// Parallel snapshot isolation allows it (it forbids no such cycle).
	expect(t, check(t, events(t, concurrent...), ListAppend, "parallel-snapshot-isolation"), linear.True, []string{}, []string{})

	// The -process form: process 3 runs T4 (appending z) and then T1,
	// which reads x = [] and nothing of T4's.
	proc := []string{
		"1 invoke ax1 ay1", "2 invoke ry rz", "3 invoke az1", "3 ok az1", "3 invoke rx",
		"3 ok rx", "1 ok ax1 ay1", "2 ok ry1 rz", "5 invoke rx rz", "5 ok rx1 rz1"}
	res := check(t, events(t, proc...), ListAppend, "strong-session-snapshot-isolation")
	expect(t, res, linear.False, []string{"G-nonadjacent-item-process"}, []string{"strong-session-snapshot-isolation"})
	expect(t, check(t, events(t, proc...), ListAppend, "snapshot-isolation"), linear.True, []string{}, []string{})

	// The -realtime form: T4 completes before T1 is invoked, on another
	// process; T2 and T3 began before T4 completed.
	rt := []string{
		"1 invoke ax1 ay1", "2 invoke ry rz", "3 invoke az1", "3 ok az1", "4 invoke rx",
		"4 ok rx", "1 ok ax1 ay1", "2 ok ry1 rz", "5 invoke rx rz", "5 ok rx1 rz1"}
	res = check(t, events(t, rt...), ListAppend, "strong-snapshot-isolation")
	expect(t, res, linear.False, []string{"G-nonadjacent-item-realtime"}, []string{"strong-snapshot-isolation"})
	expect(t, check(t, events(t, rt...), ListAppend, "strong-session-snapshot-isolation"), linear.True, []string{}, []string{})
}

// When the named searches run out of budget, the fallback names Elle's
// cycle-exists anomaly of the weakest model it rules out; the SI family
// has one too (the extension of ww and wr by one rw step).
func TestCycleExistsFallback(t *testing.T) {
	h := events(t,
		"1 invoke rx rw", "2 invoke ax1 ay1", "3 invoke ry rz", "4 invoke az1 aw1",
		"1 ok rx rw1", "2 ok ax1 ay1", "3 ok ry1 rz", "4 ok az1 aw1",
		"5 invoke rx rz", "5 ok rx1 rz1")
	res, err := Check(context.Background(), h, Options{Workload: ListAppend, Consistency: "snapshot-isolation", SearchBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != linear.False || !slices.Contains(res.AnomalyTypes, "PL-SI-cycle-exists") || !slices.Contains(res.AnomalyTypes, "cycle-search-timeout") {
		t.Fatalf("valid %v types %v", res.Valid, res.AnomalyTypes)
	}
	if !slices.Equal(res.Not, []string{"snapshot-isolation"}) {
		t.Fatalf("not %v", res.Not)
	}
	res, err = Check(context.Background(), h, Options{Workload: ListAppend, Consistency: "repeatable-read", SearchBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != linear.False || !slices.Contains(res.AnomalyTypes, "PL-2.99-cycle-exists") {
		t.Fatalf("repeatable-read: valid %v types %v", res.Valid, res.AnomalyTypes)
	}
	// Write skew has rw edges next to each other: no SI cycle exists.
	res, err = Check(context.Background(), notation(t, "ax1ry | ay1rx", false), Options{Workload: ListAppend, Consistency: "snapshot-isolation", SearchBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid == linear.False {
		t.Fatalf("write skew under SI: %v %v", res.Valid, res.AnomalyTypes)
	}
}

// Elle's semantics: nothing to check is unknown, a reused value breaks
// the test rather than showing an anomaly, and what the model allows is
// kept apart from what it forbids.
func TestVerdictSemantics(t *testing.T) {
	// One transaction: no dependency at all.
	res := check(t, notation(t, "ax1rx1", false), ListAppend, "serializable")
	expect(t, res, linear.Unknown, []string{"empty-transaction-graph"}, nil)
	// Writes nobody read.
	res = check(t, notation(t, "ax1 | ay1", false), ListAppend, "serializable")
	expect(t, res, linear.Unknown, []string{"empty-transaction-graph"}, nil)

	// A value appended twice: unknown, and not a database anomaly.
	res = check(t, notation(t, "ax1 | ax1 | rx1", false), ListAppend, "serializable")
	if res.Valid != linear.Unknown || slices.Contains(res.AnomalyTypes, "duplicate-appends") || len(res.Assumptions["duplicate-appends"]) != 1 {
		t.Fatalf("duplicate appends: %v %v %v", res.Valid, res.AnomalyTypes, res.Assumptions)
	}
	if s := res.Summary("h"); !strings.Contains(s, "UNKNOWN") || !strings.Contains(s, "breaks the test's assumptions: duplicate-appends") {
		t.Fatalf("summary %q", s)
	}
	h := rwEvents(t, "0 invoke wx1", "0 ok wx1", "1 invoke wx1", "1 ok wx1", "2 invoke rx", "2 ok rx1")
	res = check(t, h, RWRegister, "serializable")
	if res.Valid != linear.Unknown || len(res.Assumptions["duplicate-writes"]) != 1 || slices.Contains(res.AnomalyTypes, "duplicate-writes") {
		t.Fatalf("duplicate writes: %v %v %v", res.Valid, res.AnomalyTypes, res.Assumptions)
	}

	// Lost update is allowed by read committed: valid, with the finding
	// under allowed, not anomalies.
	res = check(t, notation(t, "rxax1 | rxax2 | rx12", false), ListAppend, "read-committed")
	if res.Valid != linear.True || len(res.AnomalyTypes) != 0 || len(res.Anomalies) != 0 || !slices.Equal(res.AllowedTypes, []string{"lost-update"}) || len(res.Not) != 0 {
		t.Fatalf("lost update under read committed: %v %v allowed %v not %v", res.Valid, res.AnomalyTypes, res.AllowedTypes, res.Not)
	}
	if s := res.Summary("h"); !strings.HasPrefix(s, "h: VALID") || !strings.Contains(s, "allowed by read-committed: lost-update") {
		t.Fatalf("summary %q", s)
	}
	// Under serializable it rules out update-atomic (Elle's name for what
	// was ROLA) and cursor stability.
	res = check(t, notation(t, "ax0 | rx0ax1 | rx0ax2", true), ListAppend, "serializable")
	expect(t, res, linear.False, []string{"G2-item", "lost-update"}, []string{"cursor-stability", "update-atomic"})
}

// Old and canonical names are accepted as inputs and mean the same.
func TestModelNames(t *testing.T) {
	for alias, model := range map[string]string{"ROLA": "update-atomic", "PL-2": "read-committed", "PL-SI": "snapshot-isolation", "PL-3": "serializable", "PL-SS": "strict-serializable", "strong-serializable": "strict-serializable", "PL-2.99": "repeatable-read"} {
		if err := ValidModel(alias); err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		res := check(t, notation(t, "ax1ry | ay1rx", false), ListAppend, alias)
		if res.Consistency != model {
			t.Fatalf("%s checked as %s", alias, res.Consistency)
		}
	}
	if slices.Contains(Models(), "ROLA") || !slices.Contains(Models(), "update-atomic") {
		t.Fatalf("models %v", Models())
	}
	// Old cycle-exists names still rule out their models.
	for old, model := range map[string]string{"serializable-cycle-exists": "serializable", "snapshot-isolation-cycle-exists": "snapshot-isolation", "read-committed-cycle-exists": "read-committed"} {
		if not, _ := Boundary([]string{old}); !slices.Equal(not, []string{model}) {
			t.Fatalf("%s: not %v", old, not)
		}
	}
}
