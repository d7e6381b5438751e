package checker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/report"
)

func nem(f string, typ history.Type, v history.Value, t int64) history.Event {
	return history.Event{Process: history.Nemesis, Type: typ, F: f, Value: v, Time: t}
}

func TestFaults(t *testing.T) {
	events := []history.Event{
		nem("start-partition", history.Invoke, map[string]any{"shape": "halves"}, 100),
		nem("start-partition", history.Info, "halves n1 | n2", 110),
		nem("start-pause", history.Invoke, nil, 150),
		nem("start-pause", history.Info, "n3", 151),
		nem("stop-partition", history.Invoke, nil, 200),
		nem("stop-partition", history.Info, "healed", 210),
		nem("start-clock", history.Invoke, nil, 300),
		nem("start-clock", history.Info, "skew n1 +2s", 301),
		nem("teardown", history.Invoke, nil, 400),
		nem("teardown", history.Info, "healed", 420),
		nem("start-kill", history.Invoke, nil, 500),
		nem("start-kill", history.Info, "n2", 501),
	}
	got := Faults(events)
	want := []report.Fault{
		{Name: "partition halves n1 | n2", Start: 100, End: 210},
		{Name: "pause n3", Start: 150, End: 420},
		{Name: "clock skew n1 +2s", Start: 300, End: 420},
		{Name: "kill n2", Start: 500}, // never healed: to the end
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fault %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func verdict(v linear.Verdict) Checker {
	return Func(func(context.Context, *Run) Result { return Result{Valid: v, Fields: map[string]any{"n": 1}} })
}

func TestCompose(t *testing.T) {
	r := &Run{}
	cases := []struct {
		checkers map[string]Checker
		want     linear.Verdict
	}{
		{map[string]Checker{"a": verdict(linear.True), "b": verdict(linear.True)}, linear.True},
		{map[string]Checker{"a": verdict(linear.True), "b": verdict(linear.Unknown)}, linear.Unknown},
		{map[string]Checker{"a": verdict(linear.False), "b": verdict(linear.Unknown), "c": verdict(linear.True)}, linear.False},
		{map[string]Checker{}, linear.True},
	}
	for i, c := range cases {
		if got := Compose(c.checkers).Check(context.Background(), r); got.Valid != c.want {
			t.Errorf("case %d: %v, want %v", i, got.Valid, c.want)
		}
	}
	// A panicking checker is unknown and does not hide the others.
	res := Compose(map[string]Checker{
		"boom": Func(func(context.Context, *Run) Result { panic("index out of range") }),
		"bad":  verdict(linear.False),
	}).Check(context.Background(), r)
	by := res.Fields["checkers"].(map[string]Result)
	if res.Valid != linear.False || by["boom"].Valid != linear.Unknown || !strings.Contains(by["boom"].Fields["error"].(string), "checker boom panicked: index out of range") {
		t.Fatalf("%+v", res)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"valid":false`) || !strings.Contains(string(b), `"boom":{"error":"checker boom panicked: index out of range","valid":"unknown"}`) {
		t.Fatalf("json %s", b)
	}
}

func op(p history.Process, f string, typ history.Type, v history.Value, errv history.Value) []history.Event {
	return []history.Event{{Process: p, Type: history.Invoke, F: f, Value: v}, {Process: p, Type: typ, F: f, Value: v, Error: errv}}
}

func newRun(t *testing.T, evs ...[]history.Event) *Run {
	var all []history.Event
	for _, e := range evs {
		all = append(all, e...)
	}
	for i := range all {
		all[i].Index = int64(i)
		all[i].Time = int64(i) * int64(time.Millisecond)
	}
	r, err := NewRun("t", all, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStatsAndErrors(t *testing.T) {
	r := newRun(t,
		op(0, "read", history.OK, int64(1), nil),
		op(1, "write", history.Fail, int64(2), "timeout"),
		op(1, "write", history.Info, int64(3), "timeout"),
		op(2, "read", history.Fail, nil, "refused"),
	)
	s := Stats().Check(context.Background(), r)
	by := s.Fields["by_f"].(map[string]Counts)
	if s.Valid != linear.False || by["read"] != (Counts{Count: 2, OK: 1, Fail: 1}) || by["write"] != (Counts{Count: 2, Fail: 1, Info: 1}) ||
		s.Fields["never_ok"].([]string)[0] != "write" {
		t.Fatalf("%+v", s)
	}
	e := UnhandledErrors().Check(context.Background(), r)
	list := e.Fields["errors"].([]ErrorCount)
	if e.Valid != linear.True || len(list) != 2 || list[0].Error != `"timeout"` || list[0].Count != 2 || list[0].First != "process 1 fail write at index 2" {
		t.Fatalf("%+v", e)
	}
}

func TestLinearizable(t *testing.T) {
	m, _ := model.Lookup("cas-register")
	good := newRun(t, op(0, "write", history.OK, int64(1), nil), op(1, "read", history.OK, int64(1), nil))
	bad := newRun(t, op(0, "write", history.OK, int64(1), nil), op(1, "read", history.OK, int64(2), nil))
	lin := Linearizable(LinearOptions{Model: m, Semantics: model.Options{Initial: int64(0)}})
	if res := lin.Check(context.Background(), good); res.Valid != linear.True || res.Fields["ops"] != 2 {
		t.Fatalf("%+v", res)
	}
	if res := lin.Check(context.Background(), bad); res.Valid != linear.False || res.Fields["failure"] == nil {
		t.Fatalf("%+v", res)
	}
	broken := Linearizable(LinearOptions{Model: m, History: func(*Run) ([]history.Event, error) { return nil, errors.New("no record") }})
	if res := broken.Check(context.Background(), good); res.Valid != linear.Unknown || !strings.Contains(res.Fields["error"].(string), "no record") {
		t.Fatalf("%+v", res)
	}
	// A model that cannot read the operations: unknown, with the reason.
	if res := lin.Check(context.Background(), newRun(t, op(0, "frob", history.OK, nil, nil))); res.Valid != linear.Unknown {
		t.Fatalf("%+v", res)
	}
}

// Transactional finds write skew in a list-append history, names it as
// Elle does, and writes the anomalies and their cycles into the run's
// folder; a serial history passes.
func TestTransactional(t *testing.T) {
	mops := func(m ...[]any) history.Value {
		out := make([]history.Value, len(m))
		for i, x := range m {
			out[i] = []history.Value(x)
		}
		return out
	}
	skew := newRun(t,
		op(0, "txn", history.OK, mops([]any{"r", "x", []history.Value{}}, []any{"append", "y", int64(1)}), nil),
		op(1, "txn", history.OK, mops([]any{"r", "y", []history.Value{}}, []any{"append", "x", int64(1)}), nil),
		op(2, "txn", history.OK, mops([]any{"r", "x", []history.Value{int64(1)}}, []any{"r", "y", []history.Value{int64(1)}}), nil))
	skew.Dir = t.TempDir()
	c := Transactional(TransactionalOptions{Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "serializable"}})
	res := c.Check(context.Background(), skew)
	if res.Valid != linear.False || !slices.Equal(res.Fields["anomaly_types"].([]string), []string{"G2-item"}) ||
		!slices.Equal(res.Fields["not"].([]string), []string{"repeatable-read"}) || res.Fields["txns"] != 3 || res.Fields["page"] != "anomalies.json" {
		t.Fatalf("%+v", res)
	}
	b, err := os.ReadFile(filepath.Join(skew.Dir, "anomalies.json"))
	if err != nil || !strings.Contains(string(b), `"G2-item"`) || !strings.Contains(string(b), "explanation") {
		t.Fatalf("anomalies.json: %v %s", err, b)
	}
	if dot, err := os.ReadFile(filepath.Join(skew.Dir, "cycles", "G2-item-0.dot")); err != nil || !strings.HasPrefix(string(dot), "digraph") {
		t.Fatalf("cycle file: %v %s", err, dot)
	}
	serial := newRun(t,
		op(0, "txn", history.OK, mops([]any{"r", "x", []history.Value{}}, []any{"append", "y", int64(1)}), nil),
		op(1, "txn", history.OK, mops([]any{"r", "y", []history.Value{int64(1)}}, []any{"append", "x", int64(1)}), nil))
	if res := c.Check(context.Background(), serial); res.Valid != linear.True || res.Fields["txns"] != 2 {
		t.Fatalf("serial: %+v", res)
	}
	// A history that is not transactions: unknown, with the reason.
	if res := c.Check(context.Background(), newRun(t, op(0, "read", history.OK, int64(1), nil))); res.Valid != linear.Unknown ||
		!strings.Contains(res.Fields["error"].(string), "not a transaction") {
		t.Fatalf("%+v", res)
	}
}

// The transactional checker's failure is typed too, and its OpRefs mean
// what the linearizability checker's do: Index is the completion's.
func TestTransactionalFailureIsTyped(t *testing.T) {
	// T1 appends 1 to x and reads y empty; T2 appends 1 to y and reads x
	// empty: each read misses the other's write, a G2 cycle.
	events := []history.Event{
		{Index: 10, Process: 0, Type: history.Invoke, F: "txn", Value: []history.Value{[]history.Value{"append", "x", int64(1)}, []history.Value{"r", "y", nil}}},
		{Index: 11, Process: 1, Type: history.Invoke, F: "txn", Value: []history.Value{[]history.Value{"append", "y", int64(1)}, []history.Value{"r", "x", nil}}},
		{Index: 12, Process: 0, Type: history.OK, F: "txn", Value: []history.Value{[]history.Value{"append", "x", int64(1)}, []history.Value{"r", "y", []history.Value{}}}},
		{Index: 13, Process: 1, Type: history.OK, F: "txn", Value: []history.Value{[]history.Value{"append", "y", int64(1)}, []history.Value{"r", "x", []history.Value{}}}},
	}
	run, err := NewRun("txn", events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	res := Compose(map[string]Checker{"append": Transactional(TransactionalOptions{
		Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "serializable"}})}).Check(t.Context(), run)
	f := res.FirstFailure()
	if res.Valid != linear.False || f == nil || f.Checker != "append" || len(f.Anomalies) == 0 || len(f.Ops) != 2 {
		t.Fatalf("%v, failure %+v", res.Valid, f)
	}
	got := map[int64]int64{}
	for _, o := range f.Ops {
		got[o.InvokeIndex] = o.Index
		if o.F != "txn" || o.Type != "ok" {
			t.Fatalf("op %+v", o)
		}
	}
	if got[10] != 12 || got[11] != 13 {
		t.Fatalf("invoke → completion indexes %v, want 10 → 12 and 11 → 13", got)
	}
	if !strings.Contains(f.Error(), "append: serializable is ruled out by") {
		t.Fatalf("summary %q", f.Error())
	}
}

// A model whose Step panics makes the linearizability verdict unknown,
// with the panic's text, whatever the search concluded.
func TestLinearizableWithAPanickingModel(t *testing.T) {
	events := []history.Event{
		{Index: 0, Process: 0, Type: history.Invoke, F: "read"},
		{Index: 1, Process: 0, Type: history.OK, F: "read", Value: int64(0)},
	}
	run, err := NewRun("boom", events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := model.Funcs[int64]{Name: "boom", Init: func() int64 { return 0 },
		Step: func(int64, history.Op) (int64, bool) { panic("broken model") }}
	res := Linearizable(LinearOptions{Model: boom.Model()}).Check(t.Context(), run)
	if res.Valid != linear.Unknown || !strings.Contains(res.Panic, "model boom: Step panicked: broken model") {
		t.Fatalf("%v, panic %q, fields %v", res.Valid, res.Panic, res.Fields)
	}
	if p := (Result{Checkers: map[string]Result{"linear": res}}).Panicked(); len(p) != 1 || !strings.Contains(p[0], "linear: model boom: Step panicked") {
		t.Fatalf("panicked: %q", p)
	}
}
