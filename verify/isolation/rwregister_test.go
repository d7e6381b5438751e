package isolation

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// rwHistory builds an rw-register history from lines "process type mops", mops
// like "wx1 rx2 rx_" (r of x = nil is "rx_"), in order; "!" before a
// type's name fails it.
func rwHistory(t *testing.T, lines ...string) *history.History {
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
			var v history.Value
			if m[2] != '_' {
				v = int64(m[2] - '0')
			}
			if typ == history.Invoke && m[0] == 'r' {
				v = nil
			}
			mops = append(mops, []history.Value{string(m[0]), string(m[1]), v})
		}
		evs = append(evs, history.Event{Index: int64(i), Process: history.Process(proc), Type: typ, F: "txn", Value: mops})
	}
	return &history.History{Format: history.JSONL, Events: evs}
}

func TestRWRegister(t *testing.T) {
	cases := []struct {
		name        string
		h           []string
		o           Options
		valid       linear.Verdict
		types       []string
		explanation string
	}{
		{"a read of the initial state and of a write", []string{
			"0 invoke wx1", "0 ok wx1",
			"1 invoke rx_", "1 ok rx1"}, Options{}, linear.True, []string{}, ""},
		{"garbage read", []string{
			"0 invoke wx2", "0 ok wx2",
			"1 invoke rx_", "1 ok rx3"}, Options{}, linear.False, []string{"garbage-read"}, "T3 read key \"x\" = 3, but nobody wrote 3"},
		{"aborted read", []string{
			"0 invoke wx2", "0 fail wx2",
			"1 invoke rx_", "1 ok rx2"}, Options{}, linear.False, []string{"G1a", "empty-transaction-graph"}, "T3 read key \"x\" = 2, written by T1 which aborted"},
		{"intermediate read", []string{
			"0 invoke wx1 wx2", "1 invoke rx_", "1 ok rx1", "0 ok wx1 wx2"}, Options{}, linear.False, []string{"G1b", "empty-transaction-graph"}, "T2 read key \"x\" = 1, which T3 overwrote within the same transaction: an intermediate state"},
		{"internal inconsistency", []string{
			"0 invoke wx1", "0 ok wx1",
			"1 invoke wx2 rx_", "1 ok wx2 rx1"}, Options{}, linear.False, []string{"internal"}, "T3 read key \"x\" = 1, but its own earlier read or write means it must have seen 2"},
		// Write skew: T1 reads x = nil and writes y; T2 reads y = nil and
		// writes x. Each read the initial version the other overwrote.
		{"write skew", []string{
			"0 invoke rx_ wy1", "1 invoke ry_ wx1", "0 ok rx_ wy1", "1 ok ry_ wx1"},
			Options{Consistency: "serializable"}, linear.False, []string{"G2-item"}, ""},
		{"write skew is snapshot isolation", []string{
			"0 invoke rx_ wy1", "1 invoke ry_ wx1", "0 ok rx_ wy1", "1 ok ry_ wx1"},
			Options{Consistency: "snapshot-isolation"}, linear.True, []string{}, ""},
		{"lost update", []string{
			"0 invoke rx_ wx1", "1 invoke rx_ wx2", "0 ok rx_ wx1", "1 ok rx_ wx2"},
			Options{Consistency: "serializable"}, linear.False, []string{"G2-item", "lost-update"}, "2 transactions read key \"x\" = nil and then wrote it: each update was made without seeing the others"},
		// Process 0 wrote 1 then 2; process 1 read 2 then 1. Nothing is
		// wrong unless versions follow process order, which makes the
		// second read stale: 1 < 2 from process 0, yet process 1 saw 2
		// before 1.
		{"stale read without assumptions", []string{
			"0 invoke wx1", "0 ok wx1", "0 invoke wx2", "0 ok wx2",
			"1 invoke rx_", "1 ok rx2", "1 invoke rx_", "1 ok rx1"},
			Options{Consistency: "serializable"}, linear.True, []string{}, ""},
		{"sequential keys: cyclic versions", []string{
			"0 invoke wx1", "0 ok wx1", "0 invoke wx2", "0 ok wx2",
			"1 invoke rx_", "1 ok rx2", "1 invoke rx_", "1 ok rx1"},
			Options{Consistency: "serializable", SequentialKeys: true}, linear.False, []string{"cyclic-versions"}, "the versions of key \"x\", inferred from process order (sequential keys), form a cycle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Workload = RWRegister
			res, err := Check(context.Background(), rwHistory(t, c.h...), c.o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != c.valid || !slices.Equal(res.AnomalyTypes, c.types) {
				t.Fatalf("valid %v types %v, want %v %v: %v", res.Valid, res.AnomalyTypes, c.valid, c.types, firstExplanations(res))
			}
			if c.explanation != "" {
				found := false
				for _, typ := range res.AnomalyTypes {
					for _, a := range res.Anomalies[typ] {
						found = found || strings.HasPrefix(a.Explanation, c.explanation)
					}
				}
				if !found {
					t.Fatalf("no explanation starting %q in %v", c.explanation, firstExplanations(res))
				}
			}
		})
	}
}
