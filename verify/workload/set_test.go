package workload

import (
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/linear"
)

// Ok, info and fail adds, and the final read: the info add that was read is
// recovered, nothing is lost.
func TestSetValid(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :add 2", "1 :ok :add 2",
		"2 :invoke :add 3", "2 :info :add 3",
		"3 :invoke :add 4", "3 :fail :add 4",
		"4 :invoke :add 5", // never completes
		"0 :invoke :read nil", "0 :ok :read [1 2 3]",
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "attempt_count", 5)
	wantField(t, r, "acknowledged_count", 2)
	wantField(t, r, "ok_count", 3)
	wantField(t, r, "recovered", vals(3))
	wantField(t, r, "lost", vals())
	wantField(t, r, "unexpected", vals())
	if r.Ops != 6 {
		t.Fatalf("ops = %d", r.Ops)
	}
	if got := r.Summary(); got != "set-final: valid (6 ops): 2 acknowledged elements, all present in 1 final read; 1 recovered from crashed adds" {
		t.Fatalf("summary %q", got)
	}
}

// An acknowledged add missing from the final read is lost.
func TestSetLost(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"0 :invoke :add 2", "0 :ok :add 2",
		"1 :invoke :read nil", "1 :ok :read [1]",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "lost", vals(2))
	wantField(t, r, "lost_count", 1)
	if s := r.Summary(); !strings.Contains(s, "1 element lost (2)") || !strings.Contains(s, "final read completed at index 5") {
		t.Fatalf("summary %q", s)
	}
}

// Elements no add could have put there are unexpected: never added, added
// only by a failed add, or added only after the read completed.
func TestSetUnexpected(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 4", "0 :fail :add 4",
		"1 :invoke :read nil", "1 :ok :read [4 9 6]",
		"0 :invoke :add 6", "0 :ok :add 6",
		"1 :invoke :read nil", "1 :ok :read [6]",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "unexpected", vals(4, 6, 9))
	wantField(t, r, "lost", vals())
	if s := r.Summary(); !strings.Contains(s, "3 elements unexpected (4, 6, 9)") || !strings.Contains(s, "index 3") {
		t.Fatalf("summary %q", s)
	}
}

// Only reads that began after every acknowledgement are final: an earlier
// read that missed an element proves nothing about the set's end.
func TestSetOnlyFinalReads(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :ok :read []",
		"0 :invoke :add 2", "0 :ok :add 2",
		"1 :invoke :read nil", "1 :ok :read [1 2]",
		"2 :invoke :read nil", "2 :ok :read [2 1]",
	)
	wantVerdict(t, r, linear.True)
	refs := r.Fields["final_reads"].([]OpRef)
	if len(refs) != 2 || refs[0].Index != 7 || refs[1].Index != 9 {
		t.Fatalf("final reads %+v", refs)
	}

	// Every final read must hold every acknowledged element.
	r = check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :ok :read [1]",
		"2 :invoke :read nil", "2 :ok :read []",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "lost", vals(1))
}

// With no read after the last acknowledgement, the last read is final, and
// held only to the adds acknowledged before it began.
func TestSetFallbackRead(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil",
		"0 :invoke :add 2",
		"1 :ok :read [1]",
		"0 :ok :add 2",
	)
	wantVerdict(t, r, linear.True)
	refs := r.Fields["final_reads"].([]OpRef)
	if len(refs) != 1 || refs[0].Index != 4 {
		t.Fatalf("final reads %+v", refs)
	}

	r = check(t, Set, Options{},
		"0 :invoke :add 0", "0 :ok :add 0",
		"1 :invoke :read nil",
		"0 :invoke :add 2",
		"1 :ok :read []",
		"0 :ok :add 2",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "lost", vals(0))
}

// Reads that crashed or failed are not reads of the set.
func TestSetNeverRead(t *testing.T) {
	r := check(t, Set, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :info :read :timeout",
		"2 :invoke :read nil", "2 :fail :read :refused",
	)
	wantVerdict(t, r, linear.Unknown)
	if r.Reason != "the set was never read: no read completed ok" {
		t.Fatalf("reason %q", r.Reason)
	}
	wantField(t, r, "read_count", 0)
}

func TestSetMalformed(t *testing.T) {
	e := checkErr(t, Set, Options{}, "0 :invoke :read nil", "0 :ok :read 3")
	if e.Index != 0 || !strings.Contains(e.Msg, "list or set of elements, found 3") {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, SetFull, Options{}, "0 :invoke :add 1", "0 :ok :add 1", "0 :invoke :add nil", "0 :ok :add nil")
	if e.Index != 2 || !strings.Contains(e.Msg, "found nil") {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, Set, Options{}, "0 :invoke :read nil", "0 :ok :read nil")
	if e.Index != 0 || !strings.Contains(e.Msg, "found nil") {
		t.Fatalf("%v", e)
	}
}
