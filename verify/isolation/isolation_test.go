package isolation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// notation builds a list-append history from Elle's test notation: "ax1"
// appends 1 to x, "rx12" reads x = [1 2], "rx" reads x = [], transactions
// separated by "|", each its own process. Concurrent histories invoke
// every transaction before any completes; sequential ones run them one
// after another. A transaction prefixed with "!" failed.
func notation(t *testing.T, s string, sequential bool) *history.History {
	t.Helper()
	var txns []struct {
		mops, done []history.Value
		fail       bool
	}
	for _, part := range strings.Split(s, "|") {
		part = strings.TrimSpace(part)
		var tx struct {
			mops, done []history.Value
			fail       bool
		}
		if strings.HasPrefix(part, "!") {
			tx.fail = true
			part = part[1:]
		}
		for i := 0; i < len(part); {
			f, key := part[i], string(part[i+1])
			i += 2
			j := i
			for j < len(part) && part[j] >= '0' && part[j] <= '9' {
				j++
			}
			digits := part[i:j]
			i = j
			switch f {
			case 'a':
				v := int64(digits[0] - '0')
				tx.mops = append(tx.mops, []history.Value{"append", key, v})
				tx.done = append(tx.done, []history.Value{"append", key, v})
			case 'r':
				var l []history.Value
				for _, d := range digits {
					l = append(l, int64(d-'0'))
				}
				tx.mops = append(tx.mops, []history.Value{"r", key, nil})
				tx.done = append(tx.done, []history.Value{"r", key, l})
			default:
				t.Fatalf("bad notation %q", part)
			}
		}
		txns = append(txns, tx)
	}
	var evs []history.Event
	complete := func(i int) {
		typ, v := history.OK, history.Value(txns[i].done)
		if txns[i].fail {
			typ, v = history.Fail, txns[i].mops
		}
		evs = append(evs, history.Event{Process: history.Process(i), Type: typ, F: "txn", Value: v})
	}
	for i := range txns {
		evs = append(evs, history.Event{Process: history.Process(i), Type: history.Invoke, F: "txn", Value: txns[i].mops})
		if sequential {
			complete(i)
		}
	}
	if !sequential {
		for i := range txns {
			complete(i)
		}
	}
	for i := range evs {
		evs[i].Index = int64(i)
	}
	return &history.History{Format: history.JSONL, Events: evs}
}

func TestElleCases(t *testing.T) {
	cases := []struct {
		history     string
		sequential  bool
		consistency string
		valid       linear.Verdict
		types       []string
		not         []string
	}{
		{"ax1ay1 | ax2ay2 | rx12ry21", false, "", linear.False, []string{"G0"}, []string{"read-uncommitted"}},
		{"ax1ry1 | ax2ay1 | rx12ry1", false, "", linear.False, []string{"G1c"}, []string{"read-committed"}},
		{"ax1ay1 | ax2ry | rx12", false, "", linear.False, []string{"G-single-item"}, []string{"consistent-view", "repeatable-read"}},
		{"ax1ry | ay1rx", false, "", linear.False, []string{"G2-item"}, []string{"repeatable-read"}},
		{"!ax1 | ax2 | rx12", false, "", linear.False, []string{"G1a", "dirty-update"}, []string{"read-committed"}},
		// Duplicate elements are ruled out by read uncommitted already,
		// which read committed (ruled out by G1c) implies.
		{"ax1ry1 | ax2ay1 | rx121", false, "", linear.False, []string{"G1c", "duplicate-elements"}, []string{"read-uncommitted"}},
		{"ax1 | ax2 | rx1 | rx12", true, "serializable", linear.True, nil, nil},
		{"ax1 | ax2 | rx1 | rx12", true, "strict-serializable", linear.False, []string{"G-single-item-realtime"}, []string{"strong-snapshot-isolation"}},
		// Write skew is allowed by snapshot isolation.
		{"ax1ry | ay1rx", false, "snapshot-isolation", linear.True, nil, nil},
		{"ax1ay1 | ax2ry | rx12", false, "read-committed", linear.True, nil, nil},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%s/seq=%v", c.history, c.consistency, c.sequential)
		t.Run(name, func(t *testing.T) {
			res, err := Check(context.Background(), notation(t, c.history, c.sequential), Options{Workload: ListAppend, Consistency: c.consistency})
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != c.valid || !slices.Equal(res.AnomalyTypes, c.types) || !slices.Equal(res.Not, c.not) {
				t.Fatalf("valid %v types %v not %v, want %v %v %v\n%+v", res.Valid, res.AnomalyTypes, res.Not, c.valid, c.types, c.not, res.Anomalies)
			}
		})
	}
}

func TestCycleExplanation(t *testing.T) {
	res, err := Check(context.Background(), notation(t, "ax1ay1 | ax2ry | rx12", false), Options{Workload: ListAppend})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Anomalies["G-single-item"]
	// T4 (invoked second, completed at index 4) read y = [] and did not
	// see T3's append of 1; T3 appended to x before T4 did. Transactions
	// are named by their completions' indices, as Elle names operations.
	if len(a) != 1 || len(a[0].Cycle) != 2 {
		t.Fatalf("%+v", a)
	}
	want := `T4 < T3 because T4 read key "y" as [], which does not hold 1, appended by T3 (no read shows it, so it came after every element read). However, T3 < T4 because T4 appended 2 to key "x" after T3 appended 1: a cycle.`
	if a[0].Explanation != want {
		t.Fatalf("explanation\n%s\nwant\n%s", a[0].Explanation, want)
	}
	for _, st := range a[0].Cycle {
		if st.Why == "" || strings.Contains(st.Why, "precedes") {
			t.Fatalf("unexplained step %+v", st)
		}
	}
	if !strings.HasSuffix(a[0].Explanation, ": a cycle.") || !strings.Contains(a[0].Explanation, "However, ") {
		t.Fatalf("explanation %q", a[0].Explanation)
	}
	t.Log(a[0].Explanation)
}
