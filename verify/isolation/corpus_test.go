package isolation

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

func readCorpus(t *testing.T, rel string) *history.History {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(testenv.Corpus(t), rel), "")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The transactional files of the shared corpus, with the verdicts their
// authors published (../shared/corpus/README.md).
func TestCorpus(t *testing.T) {
	cases := []struct {
		file, workload, consistency string
		valid                       linear.Verdict
		types                       []string // exactly, when set
		contains                    string   // at least, when set
		not                         []string
	}{
		{"elle/si-without-g-single.edn", ListAppend, "snapshot-isolation", linear.True, []string{}, "", []string{}},
		{"elle/si-without-g-single.edn", ListAppend, "serializable", linear.False, []string{"G2-item"}, "", []string{"repeatable-read"}},
		{"elle/si-without-g-single.edn", ListAppend, "repeatable-read", linear.False, []string{"G2-item"}, "", []string{"repeatable-read"}},
		{"elle/paper-example.edn", ListAppend, "serializable", linear.False, []string{"G-single-item"}, "", []string{"consistent-view", "repeatable-read"}},
		{"elle-cli/elle/paper-example.edn", ListAppend, "serializable", linear.False, nil, "G-single-item", nil},
		{"elle-cli/elle/paper-example.json", ListAppend, "serializable", linear.False, nil, "G-single-item", nil},
		{"elle-cli/elle/list-append-gh-30.edn", ListAppend, "serializable", linear.False, nil, "G2-item", nil},
		{"elle/huge-scc.edn", ListAppend, "strict-serializable", linear.False, nil, "G2-item-realtime", nil},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.consistency, func(t *testing.T) {
			start := time.Now()
			res, err := Check(context.Background(), readCorpus(t, c.file), Options{Workload: c.workload, Consistency: c.consistency})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v %v not %v in %v", c.file, res.Valid, res.AnomalyTypes, res.Not, time.Since(start))
			if res.Valid != c.valid {
				t.Fatalf("valid %v, want %v: %v %+v", res.Valid, c.valid, res.AnomalyTypes, res.Incomplete)
			}
			if c.types != nil && !slices.Equal(nonNil(res.AnomalyTypes), c.types) {
				t.Fatalf("types %v, want %v", res.AnomalyTypes, c.types)
			}
			if c.contains != "" && !slices.Contains(res.AnomalyTypes, c.contains) {
				t.Fatalf("types %v lack %s", res.AnomalyTypes, c.contains)
			}
			if c.not != nil && !slices.Equal(nonNil(res.Not), c.not) {
				t.Fatalf("not %v, want %v", res.Not, c.not)
			}
			for _, a := range res.Anomalies[c.contains] {
				if len(a.Cycle) == 0 || a.Explanation == "" {
					t.Fatalf("%s without its cycle: %+v", c.contains, a)
				}
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
