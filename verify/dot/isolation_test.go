package dot

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// TestIsolationCycles reads and draws every cycle the transactional
// checker finds in a simulated snapshot-isolation database checked as
// serializable: the files the store keeps are what this package reads.
func TestIsolationCycles(t *testing.T) {
	events, err := txnsim.Generate(txnsim.Config{DB: "si", Workload: isolation.ListAppend, Ops: 2000, Concurrency: 10, Keys: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := isolation.Check(context.Background(), &history.History{Format: history.JSONL, Events: events},
		isolation.Options{Workload: isolation.ListAppend, Consistency: "serializable"})
	if err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for _, typ := range res.AnomalyTypes {
		for _, a := range res.Anomalies[typ] {
			src := a.DOT()
			if src == "" {
				continue
			}
			g, err := Parse([]byte(src))
			if err != nil {
				t.Fatalf("%s: %v\n%s", typ, err, src)
			}
			if len(g.Nodes) < 1 || len(g.Edges) != len(a.Cycle) || g.Label != typ {
				t.Errorf("%s: %d nodes, %d edges (cycle of %d), label %q", typ, len(g.Nodes), len(g.Edges), len(a.Cycle), g.Label)
			}
			svg := g.SVG()
			texts := strings.Join(texts(t, svg), "\n")
			for _, st := range a.Cycle {
				if !strings.Contains(texts, "T"+itoa(st.From.Index)+" (") {
					t.Errorf("%s: T%d is not drawn", typ, st.From.Index)
				}
			}
			drawn++
		}
	}
	if drawn == 0 {
		t.Fatalf("snapshot isolation checked as serializable gave no cycle to draw; anomalies: %v", res.AnomalyTypes)
	}
	t.Logf("%d cycles drawn (%v)", drawn, res.AnomalyTypes)
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
