package workload

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// corpusReport checks one file of the shared corpus's elle-cli/jepsen
// folder.
func corpusReport(t *testing.T, model, file string, o Options) *Report {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(testenv.Corpus(t), "elle-cli", "jepsen", file), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(model, h, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return r
}

// Every workload history of the corpus gets the verdict elle-cli publishes
// (corpus README), with elle-cli's options: default bank options (total
// from the first read, negative balances refused) and group size 3 for
// long-fork.
func TestCorpusVerdicts(t *testing.T) {
	for _, c := range []struct {
		model, file string
		o           Options
		want        linear.Verdict
	}{
		{Set, "set.edn", Options{}, linear.True},
		{SetFull, "set_full.edn", Options{}, linear.False},
		{SetFull, "set_full.json", Options{}, linear.False},
		{Counter, "counter.edn", Options{}, linear.True},
		{Counter, "counter.json", Options{}, linear.True},
		{Bank, "bank.edn", Options{}, linear.True},
		{Bank, "bank.json", Options{}, linear.True},
		{Bank, "bank-tidb.edn", Options{}, linear.False},
		{Bank, "bank-neg.edn", Options{}, linear.True},
		{Bank, "bank-negative-balances.json", Options{}, linear.False},
		{LongFork, "long-fork.edn", Options{LongForkGroupSize: 3}, linear.False},
	} {
		r := corpusReport(t, c.model, c.file, c.o)
		if r.Valid != c.want {
			t.Errorf("%s as %s: %v, want %v: %s", c.file, c.model, r.Valid, c.want, r.Summary())
		}
	}
}

// set.edn: three adds, all in the final read.
func TestCorpusSet(t *testing.T) {
	r := corpusReport(t, Set, "set.edn", Options{})
	wantField(t, r, "acknowledged_count", 3)
	wantField(t, r, "ok_count", 3)
	wantField(t, r, "lost_count", 0)
}

// set_full: the adds carry [0 i] tuples but the one read returns bare
// integers 0..292, so all 293 acknowledged tuples are lost (elle-cli's
// lost-count 293 and lost list) and the integers are unexpected.
func TestCorpusSetFull(t *testing.T) {
	for _, file := range []string{"set_full.edn", "set_full.json"} {
		r := corpusReport(t, SetFull, file, Options{})
		wantField(t, r, "attempt_count", 293)
		wantField(t, r, "lost_count", 293)
		wantField(t, r, "stable_count", 0)
		wantField(t, r, "never_read_count", 0)
		wantField(t, r, "duplicated_count", 0)
		wantField(t, r, "unexpected_count", 293)
		lost := r.Fields["lost"].([]history.Value)
		if !reflect.DeepEqual(lost[0], vals(0, 0)) || !reflect.DeepEqual(lost[292], vals(0, 292)) {
			t.Fatalf("%s: lost runs %v .. %v", file, lost[0], lost[292])
		}
		d := r.Fields["lost_detail"].([]LostElement)[0]
		if d.Known.Index != 1 || d.Missing.Index != 587 || d.LastSeen != nil {
			t.Fatalf("%s: evidence %+v", file, d)
		}
		if s := r.Summary(); !strings.Contains(s, "293 elements lost ([0 0], [0 1], [0 2], and 290 more)") {
			t.Fatalf("%s: summary %q", file, s)
		}
	}
}

// counter: 287 adds of 1 and no read; elle-cli reports valid with no reads.
func TestCorpusCounter(t *testing.T) {
	for _, file := range []string{"counter.edn", "counter.json"} {
		r := corpusReport(t, Counter, file, Options{})
		wantField(t, r, "read_count", 0)
		wantField(t, r, "add_count", 287)
		wantField(t, r, "error_count", 0)
	}
}

// bank: elle-cli's figures (read-count 168; tidb: read-count 1805,
// error-count 1731, first error at index 258 with total 105, lowest 97 at
// index 656, highest 267 at index 6142).
func TestCorpusBank(t *testing.T) {
	for _, file := range []string{"bank.edn", "bank.json"} {
		r := corpusReport(t, Bank, file, Options{})
		wantField(t, r, "read_count", 168)
		wantField(t, r, "total", int64(100))
		wantField(t, r, "error_count", 0)
	}

	r := corpusReport(t, Bank, "bank-tidb.edn", Options{})
	wantField(t, r, "read_count", 1805)
	wantField(t, r, "total", int64(100))
	wantField(t, r, "error_count", 1731)
	wantField(t, r, "error_kinds", map[string]int{WrongTotal: 1731})
	wantField(t, r, "lowest_total", int64(97))
	wantField(t, r, "highest_total", int64(267))
	errs := bankErrors(t, r)
	if errs[0].Read.Index != 258 || errs[0].Total != 105 || errs[len(errs)-1].Read.Index != 7125 || errs[len(errs)-1].Total != 226 {
		t.Fatalf("first %+v last %+v", errs[0], errs[len(errs)-1])
	}
	if s := r.Summary(); !strings.Contains(s, "first: the read completed at index 258 sums to 105, not 100") {
		t.Fatalf("summary %q", s)
	}

	// One read of 3 × 10: the total is 30 by inference, and no balance is
	// negative.
	r = corpusReport(t, Bank, "bank-neg.edn", Options{})
	wantField(t, r, "total", int64(30))
	wantField(t, r, "read_count", 1)

	// The second read keeps the total of 100 but account 7 is at -1.
	r = corpusReport(t, Bank, "bank-negative-balances.json", Options{})
	errs = bankErrors(t, r)
	if len(errs) != 1 || errs[0].Read.Index != 3 || errs[0].Total != 100 || !reflect.DeepEqual(errs[0].Negative, map[string]int64{"7": -1}) {
		t.Fatalf("errors %+v", errs)
	}
	if r := corpusReport(t, Bank, "bank-negative-balances.json", Options{BankAllowNegative: true}); r.Valid != linear.True {
		t.Fatalf("with negatives allowed: %s", r.Summary())
	}
}

// long-fork: the reads completed at indexes 1 and 3 fork (elle-cli lists
// the same pair): one saw keys 0 and 1, the other 0 and 2.
func TestCorpusLongFork(t *testing.T) {
	r := corpusReport(t, LongFork, "long-fork.edn", Options{LongForkGroupSize: 3})
	fs := forks(t, r)
	if len(fs) != 1 || fs[0].A.Index != 1 || fs[0].B.Index != 3 || fs[0].AOnly != int64(1) || fs[0].BOnly != int64(2) || fs[0].A.Process != nil {
		t.Fatalf("forks %+v", fs)
	}
	wantField(t, r, "read_count", 2)
	wantField(t, r, "early_read_count", 0)
	wantField(t, r, "late_read_count", 0)

	// With a group size the reads do not have, the history is refused.
	h, err := history.ReadFile(filepath.Join(testenv.Corpus(t), "elle-cli", "jepsen", "long-fork.edn"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(LongFork, h, Options{LongForkGroupSize: 2}); err == nil || !strings.Contains(err.Error(), "should read 2 keys") {
		t.Fatalf("error %v", err)
	}
}
