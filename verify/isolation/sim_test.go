package isolation

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/txnsim"
)

func simulate(t testing.TB, db, workload string, ops int, seed uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := txnsim.Write(&b, txnsim.Config{DB: db, Workload: workload, Ops: ops, Concurrency: 10, Keys: 10, InfoRate: 0.01, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Simulated databases get the verdicts their isolation levels promise:
// the model they implement holds, and the next stronger one is refuted by
// the anomalies the level allows.
func TestSimulatedDatabases(t *testing.T) {
	cases := []struct {
		db, workload, consistency string
		valid                     linear.Verdict
		contains                  string
	}{
		{"serializable", ListAppend, "strict-serializable", linear.True, ""},
		{"serializable", RWRegister, "strict-serializable", linear.True, ""},
		{"ssi", ListAppend, "serializable", linear.True, ""},
		{"ssi", RWRegister, "serializable", linear.True, ""},
		{"si", ListAppend, "snapshot-isolation", linear.True, ""},
		{"si", ListAppend, "serializable", linear.False, "G2-item"},
		{"si", RWRegister, "snapshot-isolation", linear.True, ""},
		{"read-committed", ListAppend, "read-committed", linear.True, ""},
		{"read-committed", ListAppend, "repeatable-read", linear.False, "lost-update"},
		{"read-committed", RWRegister, "read-committed", linear.True, ""},
		{"prefix", ListAppend, "snapshot-isolation", linear.True, ""},
		{"prefix", ListAppend, "strong-snapshot-isolation", linear.False, ""},
	}
	for _, c := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/%s/%s/%d", c.db, c.workload, c.consistency, seed), func(t *testing.T) {
				data := simulate(t, c.db, c.workload, 3000, seed)
				res, err := CheckJSONL(context.Background(), "sim", data, Options{Workload: c.workload, Consistency: c.consistency})
				if err != nil {
					t.Fatal(err)
				}
				if res.Valid != c.valid {
					t.Fatalf("valid %v, want %v: %v %v", res.Valid, c.valid, res.AnomalyTypes, firstExplanations(res))
				}
				if c.contains != "" && !slices.Contains(res.AnomalyTypes, c.contains) {
					t.Fatalf("types %v lack %s", res.AnomalyTypes, c.contains)
				}
			})
		}
	}
}

func firstExplanations(r *Result) []string {
	var out []string
	for _, typ := range r.AnomalyTypes {
		if as := r.Anomalies[typ]; len(as) > 0 {
			out = append(out, typ+": "+as[0].Explanation)
		}
	}
	return out
}

// The fast JSON Lines reader and the general one agree on every verdict,
// anomaly type and count.
func TestFastReaderAgrees(t *testing.T) {
	for _, db := range txnsim.DBs {
		for _, w := range []string{ListAppend, RWRegister} {
			data := simulate(t, db, w, 2000, 7)
			for _, model := range []string{"serializable", "strict-serializable", "read-committed"} {
				o := Options{Workload: w, Consistency: model}
				fast, err := CheckJSONL(context.Background(), "sim", data, o)
				if err != nil {
					t.Fatal(err)
				}
				h, err := history.Parse("sim", data, history.JSONL)
				if err != nil {
					t.Fatal(err)
				}
				slow, err := Check(context.Background(), h, o)
				if err != nil {
					t.Fatal(err)
				}
				if fast.Valid != slow.Valid || !slices.Equal(fast.AnomalyTypes, slow.AnomalyTypes) || fmt.Sprint(fast.Counts) != fmt.Sprint(slow.Counts) || fast.Txns != slow.Txns {
					t.Fatalf("%s %s %s: fast %v %v %v, general %v %v %v", db, w, model, fast.Valid, fast.AnomalyTypes, fast.Counts, slow.Valid, slow.AnomalyTypes, slow.Counts)
				}
				// Reports name the same transactions with the same values.
				for typ, as := range fast.Anomalies {
					for i, a := range as {
						b := slow.Anomalies[typ][i]
						if fmt.Sprint(a.Ops) != fmt.Sprint(b.Ops) || a.Explanation != b.Explanation {
							t.Fatalf("%s %d differs:\n%+v\n%+v", typ, i, a, b)
						}
					}
				}
			}
		}
	}
}
