package workload

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// hist parses events written as Jepsen log lines without their prefix,
// "<process> :<type> :<f> <value>", one a line; events are numbered from 0
// in order, which is also their position.
func hist(t testing.TB, lines ...string) *history.History {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("INFO  jepsen.util - " + l + "\n")
	}
	h, err := history.Parse("test", []byte(b.String()), history.JepsenLog)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// check runs a model that must accept the history.
func check(t testing.TB, model string, o Options, lines ...string) *Report {
	t.Helper()
	r, err := Check(model, hist(t, lines...), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkErr runs a model that must refuse the history, and returns the error.
func checkErr(t testing.TB, model string, o Options, lines ...string) *OpError {
	t.Helper()
	_, err := Check(model, hist(t, lines...), o)
	var oe *OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T), want an *OpError", err, err)
	}
	return oe
}

func wantVerdict(t testing.TB, r *Report, want linear.Verdict) {
	t.Helper()
	if r.Valid != want {
		t.Fatalf("valid = %v, want %v: %s", r.Valid, want, r.Summary())
	}
}

// wantField compares one field with a value written as Go literals (ints,
// []history.Value of int64, ...).
func wantField(t testing.TB, r *Report, key string, want any) {
	t.Helper()
	got, ok := r.Fields[key]
	if !ok {
		t.Fatalf("no field %q in %v", key, r.Fields)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %#v, want %#v", key, got, want)
	}
}

// vals builds a value list of integers.
func vals(xs ...int64) []history.Value {
	out := make([]history.Value, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func TestNames(t *testing.T) {
	want := []string{"set-final", "set-full", "counter", "bank", "long-fork"}
	if got := Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// A caller changing the slice changes nothing here.
	Names()[0] = "x"
	if Names()[0] != "set-final" {
		t.Fatal("Names shares its slice")
	}
	for _, n := range want {
		if _, ok := checkers[n]; !ok {
			t.Errorf("no checker for %q", n)
		}
	}
}

func TestUnknownModel(t *testing.T) {
	_, err := Check("queue", hist(t, "0 :invoke :add 1"), Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown model "queue"`) || !strings.Contains(err.Error(), "set-full") {
		t.Fatalf("error %v, want one naming the model and the valid ones", err)
	}
	if _, err := Check("set", nil, Options{}); err == nil {
		t.Fatal("nil history accepted")
	}
}

// An operation the model does not have is refused, naming its index, for
// every model.
func TestUnknownFunction(t *testing.T) {
	for _, model := range []string{Set, SetFull, Counter, Bank} {
		e := checkErr(t, model, Options{}, "0 :invoke :read nil", "1 :invoke :cas [1 2]", "1 :ok :cas [1 2]", "0 :info :read nil")
		if e.Index != 1 || e.F != "cas" || e.Model != model || e.Process != 1 {
			t.Errorf("%s: %+v", model, e)
		}
		if !strings.Contains(e.Error(), "op at index 1 (process 1") || !strings.Contains(e.Error(), `"cas"`) {
			t.Errorf("%s: message %q", model, e.Error())
		}
	}
}

// Pairing errors are input errors, not panics.
func TestUnpairable(t *testing.T) {
	_, err := Check(Set, hist(t, "0 :ok :add 1"), Options{})
	var pe *history.PairError
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Fatalf("error %v, want a pairing error at index 0", err)
	}
}

// Events without a process are paired in file order as one process, and
// reports show their process as null.
func TestNoProcess(t *testing.T) {
	h, err := history.Parse("t", []byte(`{:type :invoke, :f :add, :value 1}
{:type :ok, :f :add, :value 1}
{:type :invoke, :f :read, :value nil}
{:type :ok, :f :read, :value [1]}`), history.EDN)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(Set, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantVerdict(t, r, linear.True)
	refs := r.Fields["final_reads"].([]OpRef)
	if len(refs) != 1 || refs[0].Process != nil || refs[0].Index != 3 || refs[0].InvokeIndex != 2 {
		t.Fatalf("final reads %+v", refs)
	}
	b, _ := json.Marshal(refs[0])
	if !strings.Contains(string(b), `"process":null`) {
		t.Fatalf("JSON %s", b)
	}

	// They are a process of their own, apart from the numbered ones.
	h, err = history.Parse("t", []byte(`{:type :invoke, :f :add, :value 1, :process 0}
{:type :invoke, :f :read, :value nil}
{:type :ok, :f :add, :value 1, :process 0}
{:type :ok, :f :read, :value [1 2]}`), history.EDN)
	if err != nil {
		t.Fatal(err)
	}
	r, err = Check(Set, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantField(t, r, "unexpected", vals(2))
	_, err = Check(Counter, h, Options{})
	var oe *OpError
	if !errors.As(err, &oe) || oe.Process != history.NoProcess || !strings.Contains(err.Error(), "op at index 1 (process none") {
		t.Fatalf("error %v", err)
	}

	// Two invokes in a row without processes cannot be paired.
	h, err = history.Parse("t", []byte(`{:type :invoke, :f :add, :value 1}
{:type :invoke, :f :add, :value 2}`), history.EDN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(Set, h, Options{}); err == nil || !strings.Contains(err.Error(), "without a process") {
		t.Fatalf("error %v", err)
	}
}

// A report is one JSON object: the common keys first, then the fields.
func TestReportJSON(t *testing.T) {
	r := check(t, Set, Options{}, "0 :invoke :add 1", "0 :ok :add 1", "0 :invoke :read nil", "0 :ok :read [2]")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"model":"set-final","valid":false,"ops":2,"acknowledged_count":1,`) {
		t.Fatalf("JSON starts %s", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["lost"].([]any)[0].(float64) != 1 || m["unexpected"].([]any)[0].(float64) != 2 {
		t.Fatalf("lists %v %v", m["lost"], m["unexpected"])
	}

	// Unknown carries its reason; a field cannot shadow a common key.
	r = check(t, Set, Options{}, "0 :invoke :add 1", "0 :ok :add 1")
	r.Fields["model"] = "shadow"
	b, err = json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	m = nil
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["valid"] != "unknown" || m["model"] != "set-final" || !strings.Contains(m["reason"].(string), "never read") {
		t.Fatalf("JSON %s", b)
	}
}

func TestSummary(t *testing.T) {
	r := check(t, Set, Options{}, "0 :invoke :add 1", "0 :ok :add 1")
	if got, want := r.Summary(), "set-final: unknown (1 op): the set was never read: no read completed ok"; got != want {
		t.Fatalf("Summary() = %q, want %q", got, want)
	}
	if strings.Contains(r.Summary(), "\n") {
		t.Fatal("summary is more than one line")
	}
}

func TestCompareValues(t *testing.T) {
	in := []history.Value{
		map[string]history.Value{"a": int64(1)}, []history.Value{int64(0), int64(10)}, "b",
		[]history.Value{int64(0), int64(2)}, 2.5, int64(2), true, nil, false, int64(-1), "a", 2.0,
	}
	want := []history.Value{
		nil, false, true, int64(-1), int64(2), 2.0, 2.5, "a", "b",
		[]history.Value{int64(0), int64(2)}, []history.Value{int64(0), int64(10)}, map[string]history.Value{"a": int64(1)},
	}
	if got := sortValues(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}

// Composite values are keyed by their text, never colliding with a string
// of the same text.
func TestKeyOf(t *testing.T) {
	in := newInterner()
	a, _ := in.id([]history.Value{int64(1)})
	b, _ := in.id("[1]")
	c, isNew := in.id([]history.Value{int64(1)})
	if a == b || a != c || isNew {
		t.Fatalf("ids %d %d %d (new %v)", a, b, c, isNew)
	}
	if in.lookup(int64(7)) != -1 {
		t.Fatal("lookup of an unknown value")
	}
}
