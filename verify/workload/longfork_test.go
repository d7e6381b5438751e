package workload

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

func forks(t *testing.T, r *Report) []Fork {
	t.Helper()
	return r.Fields["forks"].([]Fork)
}

// Inserts of x and y seen in opposite orders by two reads of {x, y}: a fork,
// however many reads saw each order.
func TestLongForkFork(t *testing.T) {
	r := check(t, LongFork, Options{LongForkGroupSize: 2},
		"0 :invoke :write [[:w 0 1]]", "0 :ok :write [[:w 0 1]]",
		"1 :invoke :write [[:w 1 1]]", "1 :ok :write [[:w 1 1]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 nil]]", // 4-5
		"3 :invoke :read [[:r 1 nil] [:r 0 nil]]", "3 :ok :read [[:r 1 1] [:r 0 nil]]", // 6-7
		"3 :invoke :read [[:r 1 nil] [:r 0 nil]]", "3 :ok :read [[:r 1 1] [:r 0 nil]]", // 8-9
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 1]]", // 10-11
	)
	wantVerdict(t, r, linear.False)
	fs := forks(t, r)
	if len(fs) != 1 || fs[0].A.Index != 5 || fs[0].B.Index != 7 || fs[0].AOnly != int64(0) || fs[0].BOnly != int64(1) || fs[0].Pairs != 2 {
		t.Fatalf("forks %+v", fs)
	}
	wantField(t, r, "fork_count", 2)
	wantField(t, r, "read_count", 4)
	wantField(t, r, "late_read_count", 1)
	wantField(t, r, "early_read_count", 0)
	wantField(t, r, "write_count", 2)
	if s := r.Summary(); s != "long-fork: INVALID (6 ops): 2 forking pairs of reads; first: the read completed at index 5 saw key 0 inserted but not key 1, the read completed at index 7 saw key 1 but not key 0" {
		t.Fatalf("summary %q", s)
	}
}

// Reads whose inserts nest are compatible, and reads of different groups
// are never compared.
func TestLongForkNoFork(t *testing.T) {
	r := check(t, LongFork, Options{},
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 nil] [:r 1 nil]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 nil]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 1]]",
		"3 :invoke :read [[:r 1 nil] [:r 2 nil]]", "3 :ok :read [[:r 1 1] [:r 2 nil]]",
		"3 :invoke :read [[:r 0 nil] [:r 1 nil] [:r 2 nil]]", "3 :ok :read [[:r 0 nil] [:r 1 1] [:r 2 nil]]",
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "group_count", 3)
	wantField(t, r, "early_read_count", 1)
	wantField(t, r, "fork_count", 0)
}

// A read of a value other than the key's one write is a bad value; without
// a write, two reads disagreeing on a key are.
func TestLongForkBadValues(t *testing.T) {
	r := check(t, LongFork, Options{},
		"0 :invoke :write [[:w 0 1]]", "0 :ok :write [[:w 0 1]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 2] [:r 1 nil]]",
	)
	wantVerdict(t, r, linear.False)
	b := r.Fields["bad_values"].([]BadValue)
	if len(b) != 1 || b[0].Value != int64(2) || b[0].Expected != int64(1) || b[0].Source != "write" || b[0].From.Index != 1 || b[0].Read.Index != 3 {
		t.Fatalf("bad values %+v", b)
	}

	r = check(t, LongFork, Options{},
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 nil]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 3] [:r 1 nil]]",
	)
	wantVerdict(t, r, linear.False)
	b = r.Fields["bad_values"].([]BadValue)
	if len(b) != 1 || b[0].Source != "read" || b[0].From.Index != 1 || b[0].Read.Index != 3 {
		t.Fatalf("bad values %+v", b)
	}
	if s := r.Summary(); !strings.Contains(s, "the read completed at index 3 saw key 0 = 3, but the read at index 1 has 1") {
		t.Fatalf("summary %q", s)
	}
}

// A key written twice (even by a write that failed) breaks the workload's
// premise: unknown, unless a fork or bad value proves the history wrong
// anyway.
func TestLongForkMultipleWrites(t *testing.T) {
	r := check(t, LongFork, Options{},
		"0 :invoke :write [[:w 0 1]]", "0 :ok :write [[:w 0 1]]",
		"1 :invoke :write [[:w 0 2]]", "1 :fail :write [[:w 0 2]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 2] [:r 1 nil]]",
	)
	wantVerdict(t, r, linear.Unknown)
	wantField(t, r, "multiple_writes", vals(0))
	if !strings.Contains(r.Reason, "written more than once (0)") {
		t.Fatalf("reason %q", r.Reason)
	}

	r = check(t, LongFork, Options{},
		"0 :invoke :write [[:w 0 1]]", "0 :ok :write [[:w 0 1]]",
		"1 :invoke :write [[:w 0 2]]", "1 :ok :write [[:w 0 2]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 2] [:r 1 nil]]",
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 nil] [:r 1 1]]",
	)
	wantVerdict(t, r, linear.False)
}

// Reads that crashed or failed are not compared.
func TestLongForkIgnoresIncompleteReads(t *testing.T) {
	r := check(t, LongFork, Options{},
		"2 :invoke :read [[:r 0 nil] [:r 1 nil]]", "2 :ok :read [[:r 0 1] [:r 1 nil]]",
		"3 :invoke :read [[:r 0 nil] [:r 1 nil]]", "3 :info :read [[:r 0 nil] [:r 1 1]]",
		"4 :invoke :read [[:r 0 nil] [:r 1 nil]]", "4 :fail :read [[:r 0 nil] [:r 1 1]]",
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "read_count", 1)
}

func TestLongForkMalformed(t *testing.T) {
	for _, c := range []struct {
		lines []string
		index int64
		msg   string
	}{
		{[]string{"0 :invoke :read [[:r 0 nil] [:r 1 nil]]", "0 :ok :read [[:r 0 1]]"}, 0, "read 1: [0]"},
		{[]string{"0 :invoke :txn [[:r 0 nil] [:w 1 1]]", "0 :ok :txn [[:r 0 nil] [:w 1 1]]"}, 0, "either reads keys or writes one key"},
		{[]string{"0 :invoke :read [[:r 0 nil] [:r 0 nil]]", "0 :ok :read [[:r 0 1] [:r 0 1]]"}, 0, "reads key 0 twice"},
		{[]string{"0 :invoke :read [[:x 0 nil] [:r 1 nil]]", "0 :ok :read [[:r 0 1] [:r 1 1]]"}, 0, "expected r (read) or w (write)"},
		{[]string{"0 :invoke :read [0 1]", "0 :ok :read [0 1]"}, 0, "expected [f key value]"},
		{[]string{"0 :invoke :read nil", "0 :ok :read nil"}, 0, "carries no value"},
		{[]string{"0 :invoke :read [[:r 0 nil] [:r 1 nil]]", "0 :ok :read {0 1}"}, 0, "a list of micro-operations"},
		{[]string{"0 :invoke :read [[:r 0 nil] [:r 1 nil]]", "0 :ok :read [[:w 0 1] [:r 1 1]]"}, 0, "not all reads"},
	} {
		e := checkErr(t, LongFork, Options{LongForkGroupSize: 2}, c.lines...)
		if e.Index != c.index || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%v: error %v, want %q", c.lines, e, c.msg)
		}
	}
}

// The group's keys are compared as values: "0" and 0 are different keys.
func TestLongForkKeysAreValues(t *testing.T) {
	r := check(t, LongFork, Options{},
		`2 :invoke :read [[:r "0" nil] [:r 1 nil]]`, `2 :ok :read [[:r "0" 1] [:r 1 nil]]`,
		`2 :invoke :read [[:r 0 nil] [:r 1 nil]]`, `2 :ok :read [[:r 0 nil] [:r 1 1]]`,
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "group_count", 2)
	if !reflect.DeepEqual(r.Fields["multiple_writes"], []history.Value{}) {
		t.Fatalf("multiple writes %v", r.Fields["multiple_writes"])
	}
}
