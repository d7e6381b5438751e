package workload

import (
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/linear"
)

// counterErrors returns the [lower value upper] of each error.
func counterErrors(t *testing.T, r *Report) [][3]int64 {
	t.Helper()
	var out [][3]int64
	for _, e := range r.Fields["errors"].([]CounterError) {
		out = append(out, [3]int64{e.Lower, e.Value, e.Upper})
	}
	return out
}

func wantCounterErrors(t *testing.T, r *Report, want ...[3]int64) {
	t.Helper()
	got := counterErrors(t, r)
	if len(got) != len(want) {
		t.Fatalf("errors %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("errors %v, want %v", got, want)
		}
	}
	wantField(t, r, "error_count", len(want))
}

// A read concurrent with an add may see it or not: bounds [1, 3].
func TestCounterBounds(t *testing.T) {
	for _, c := range []struct {
		read  string
		valid linear.Verdict
	}{{"1", linear.True}, {"3", linear.True}, {"0", linear.False}, {"4", linear.False}, {"2", linear.True}} {
		r := check(t, Counter, Options{},
			"0 :invoke :add 1", "0 :ok :add 1",
			"1 :invoke :read nil",
			"0 :invoke :add 2",
			"1 :ok :read "+c.read,
			"0 :ok :add 2",
		)
		wantVerdict(t, r, c.valid)
		if c.valid == linear.False {
			v := map[string]int64{"0": 0, "4": 4}[c.read]
			wantCounterErrors(t, r, [3]int64{1, v, 3})
			if e := r.Fields["errors"].([]CounterError)[0]; e.Read.Index != 4 || e.Read.InvokeIndex != 2 {
				t.Fatalf("error names %+v", e.Read)
			}
		}
	}
}

// The lower bound is taken when the read begins: an add that completes
// while the read runs may not have happened yet when the read took effect.
func TestCounterLowerAtInvoke(t *testing.T) {
	r := check(t, Counter, Options{},
		"0 :invoke :add 2",
		"1 :invoke :read nil",
		"0 :ok :add 2",
		"1 :ok :read 0",
	)
	wantVerdict(t, r, linear.True)
}

// The upper bound is taken when the read completes: an add invoked later
// cannot show.
func TestCounterUpperAtCompletion(t *testing.T) {
	r := check(t, Counter, Options{},
		"1 :invoke :read nil",
		"1 :ok :read 3",
		"0 :invoke :add 3", "0 :ok :add 3",
	)
	wantVerdict(t, r, linear.False)
	wantCounterErrors(t, r, [3]int64{0, 3, 0})
	if s := r.Summary(); s != "counter: INVALID (2 ops): 1 read out of bounds; first: the read completed at index 1 returned 3, but the counter was between 0 and 0 while it ran" {
		t.Fatalf("summary %q", s)
	}
}

// A failed add never counts; a crashed one may or may not, forever.
func TestCounterFailAndInfo(t *testing.T) {
	r := check(t, Counter, Options{},
		"0 :invoke :add 5", "0 :fail :add 5",
		"1 :invoke :read nil", "1 :ok :read 5",
	)
	wantVerdict(t, r, linear.False)
	wantCounterErrors(t, r, [3]int64{0, 5, 0})

	r = check(t, Counter, Options{},
		"0 :invoke :add 5", "0 :info :add 5",
		"1 :invoke :read nil", "1 :ok :read 5",
		"1 :invoke :read nil", "1 :ok :read 0",
		"1 :invoke :read nil", "1 :ok :read 6",
	)
	wantVerdict(t, r, linear.False)
	wantCounterErrors(t, r, [3]int64{0, 6, 5})
	wantField(t, r, "read_count", 3)
}

// Negative deltas widen the bounds downwards.
func TestCounterNegative(t *testing.T) {
	r := check(t, Counter, Options{},
		"0 :invoke :add -2", "0 :ok :add -2",
		"1 :invoke :read nil", "1 :ok :read -2",
		"0 :invoke :add -3", "0 :info :add -3",
		"2 :invoke :add 4", "2 :ok :add 4",
		"1 :invoke :read nil", "1 :ok :read -1",
		"1 :invoke :read nil", "1 :ok :read 2",
		"1 :invoke :read nil", "1 :ok :read 3",
	)
	wantVerdict(t, r, linear.False)
	wantCounterErrors(t, r, [3]int64{-1, 3, 2})
}

// Reads that crashed or failed are not checked; with no ok read the
// history is valid, as in Jepsen.
func TestCounterNoReads(t *testing.T) {
	r := check(t, Counter, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :info :read :timeout",
		"2 :invoke :read nil", "2 :fail :read nil",
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "read_count", 0)
	wantField(t, r, "add_count", 1)
}

func TestCounterMalformed(t *testing.T) {
	e := checkErr(t, Counter, Options{}, "0 :invoke :add 1", "0 :ok :add 1", "0 :invoke :add \"x\"", "0 :ok :add \"x\"")
	if e.Index != 2 || !strings.Contains(e.Msg, `integer delta, found "x"`) {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, Counter, Options{}, "0 :invoke :read nil", "0 :ok :read [1]")
	if e.Index != 0 || !strings.Contains(e.Msg, "integer value, found [1]") {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, Counter, Options{}, "0 :invoke :add 9223372036854775807", "0 :ok :add 9223372036854775807", "0 :invoke :add 1", "0 :ok :add 1")
	if e.Index != 2 || !strings.Contains(e.Msg, "overflows") {
		t.Fatalf("%v", e)
	}
}
