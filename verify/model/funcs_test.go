package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// The models below are written the way a user writes one, with Funcs and
// nothing of the package's internals, and are checked against the built-in
// models and the brute-force references.

// casFuncs is a register with compare-and-set; nilAny is Knossos's "an ok
// read of nil matches anything".
func casFuncs(initial history.Value, nilAny bool) Funcs[history.Value] {
	return Funcs[history.Value]{
		Name: "cas-register-funcs",
		Init: func() history.Value { return initial },
		Step: func(s history.Value, op history.Op) (history.Value, bool) {
			switch op.F {
			case "read":
				return s, (nilAny && op.Output == nil) || Returned(op, s)
			case "write":
				return op.Input, true
			}
			l := op.Input.([]history.Value)
			if op.Type == history.Fail { // observed under FailedCASObserved
				return s, !history.Equal(s, l[0])
			}
			if history.Equal(s, l[0]) {
				return l[1], true
			}
			return s, false
		},
	}
}

// kvFuncs is Porcupine's key-value store, partitioned by key.
func kvFuncs(nilAny bool) Funcs[string] {
	return Funcs[string]{
		Name: "kv-funcs",
		Init: func() string { return "" },
		Step: func(s string, op history.Op) (string, bool) {
			v, _ := op.Input.([]history.Value)[1].(string)
			switch op.F {
			case "put":
				return v, true
			case "append":
				return s + v, true
			}
			out, _ := op.Output.([]history.Value)
			if len(out) != 2 || out[1] == nil {
				return s, nilAny && op.Type == history.OK
			}
			return s, out[1] == s
		},
		Partition: func(ops []history.Op) [][]history.Op {
			byKey := map[string]int{}
			var parts [][]history.Op
			for _, o := range ops {
				k := history.Key(o.Input.([]history.Value)[0])
				i, ok := byKey[k]
				if !ok {
					i = len(parts)
					byKey[k] = i
					parts = append(parts, nil)
				}
				parts[i] = append(parts[i], o)
			}
			return parts
		},
	}
}

// mutexFuncs is a lock.
var mutexFuncs = Funcs[bool]{
	Init: func() bool { return false },
	Step: func(held bool, op history.Op) (bool, bool) {
		if op.F == "acquire" {
			return true, !held
		}
		return false, held
	},
}

// queueFuncs is a FIFO queue whose state is a slice, interned with Equal.
var queueFuncs = Funcs[[]history.Value]{
	Init: func() []history.Value { return nil },
	Step: func(q []history.Value, op history.Op) ([]history.Value, bool) {
		if op.F == "enqueue" {
			return append(slices.Clip(q), op.Input), true
		}
		if len(q) == 0 {
			return q, Returned(op, nil)
		}
		return q[1:], Returned(op, q[0])
	},
	Equal: func(a, b []history.Value) bool { return slices.EqualFunc(a, b, history.Equal) },
}

// multiFuncs is Knossos's multi-register: txns of [read k v] and
// [write k v], every key starting at initial; its state is a map, interned
// with Equal.
func multiFuncs(initial history.Value, nilAny bool) Funcs[map[string]history.Value] {
	return Funcs[map[string]history.Value]{
		Init: func() map[string]history.Value { return map[string]history.Value{} },
		Step: func(s map[string]history.Value, op history.Op) (map[string]history.Value, bool) {
			src, _ := op.Output.([]history.Value)
			if op.Type != history.OK || src == nil {
				src = op.Input.([]history.Value)
			}
			next := s
			for _, m := range src {
				l := m.([]history.Value)
				k := history.Key(l[1])
				cur, ok := next[k]
				if !ok {
					cur = initial
				}
				if l[0] == "read" || l[0] == "r" {
					if op.Type == history.OK && !(nilAny && l[2] == nil) && !history.Equal(cur, l[2]) {
						return s, false
					}
					continue
				}
				c := make(map[string]history.Value, len(next)+1)
				for kk, vv := range next {
					c[kk] = vv
				}
				c[k] = l[2]
				next = c
			}
			return next, true
		},
		Equal: func(a, b map[string]history.Value) bool { return history.Equal(a, b) },
	}
}

func checkModel(t *testing.T, m Model, ops []history.Op, opt Options) linear.Result {
	t.Helper()
	parts, err := m.Compile(ops, opt)
	if err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
	res, err := linear.Check(context.Background(), parts, linear.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := SpecError(parts); err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
	return res
}

func readOps(t *testing.T, file string) (*history.History, []history.Op) {
	t.Helper()
	h, err := history.ReadFile(file, "")
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		t.Fatal(err)
	}
	return h, ops
}

// On every linearizability history of the shared corpus, a model written
// with Funcs gets the built-in model's verdict, which is the published one.
func TestFuncsAgreeOnCorpus(t *testing.T) {
	corpus := testenv.Corpus(t)
	cases := []struct {
		glob, builtin string
		funcs         func(nilAny bool) Model
		want          linear.Verdict
		count         int
	}{
		{"knossos/cas-register/good/*.edn", "cas-register", func(n bool) Model { return casFuncs(int64(0), n).Model() }, linear.True, 113},
		{"knossos/cas-register/bad/*.edn", "cas-register", func(n bool) Model { return casFuncs(int64(0), n).Model() }, linear.False, 7},
		{"elle-cli/knossos/cas-register/good/*", "cas-register", func(n bool) Model { return casFuncs(int64(0), n).Model() }, linear.True, 2},
		{"elle-cli/knossos/cas-register/bad/*", "cas-register", func(n bool) Model { return casFuncs(int64(0), n).Model() }, linear.False, 6},
		{"knossos/multi-register/good/*.edn", "multi-register", func(n bool) Model { return multiFuncs(int64(0), n).Model() }, linear.True, 1},
		{"knossos/mutex/bad/*.edn", "mutex", func(bool) Model { return mutexFuncs.Model() }, linear.False, 1},
		{"elle-cli/knossos/mutex/bad/*", "mutex", func(bool) Model { return mutexFuncs.Model() }, linear.False, 2},
	}
	total := 0
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(corpus, c.glob))
		if len(files) != c.count {
			t.Errorf("%s: %d files, want %d", c.glob, len(files), c.count)
		}
		builtin, _ := Lookup(c.builtin)
		for _, f := range files {
			h, ops := readOps(t, f)
			opt := OptionsFor(h.Format)
			opt.Initial = int64(0)
			want := checkModel(t, builtin, ops, opt).Valid
			got := checkModel(t, c.funcs(opt.NilReadsAny), ops, opt).Valid
			if want != c.want || got != want {
				t.Errorf("%s: funcs %v, built-in %v, published %v", f, got, want, c.want)
			}
			total++
		}
	}
	if total != 132 {
		t.Errorf("checked %d corpus files, want 132", total)
	}
}

// On Porcupine's test data (its etcd and key-value histories), the same.
func TestFuncsAgreeOnPorcupineData(t *testing.T) {
	dir := filepath.Join(testenv.ModuleDir(t, "github.com/anishathalye/porcupine"), "test_data")
	cas, _ := Lookup("cas-register")
	kv, _ := Lookup("kv")
	counts := map[linear.Verdict]int{}
	for i := 0; i <= 102; i++ {
		if i == 95 { // empty
			continue
		}
		if testing.Short() && i%10 != 0 {
			continue
		}
		f := filepath.Join(dir, "jepsen", fmt.Sprintf("etcd_%03d.log", i))
		h, ops := readOps(t, f)
		opt := OptionsFor(h.Format)
		want := checkModel(t, cas, ops, opt).Valid
		got := checkModel(t, casFuncs(nil, false).Model(), ops, opt).Valid
		if got != want || want == linear.Unknown {
			t.Errorf("%s: funcs %v, built-in %v", f, got, want)
		}
		counts[want]++
	}
	for _, name := range []string{"c01-ok", "c01-bad", "c10-ok", "c10-bad", "c50-ok", "c50-bad"} {
		f := filepath.Join(dir, "kv", name+".txt")
		h, ops := readOps(t, f)
		opt := OptionsFor(h.Format)
		want := checkModel(t, kv, ops, opt).Valid
		got := checkModel(t, kvFuncs(opt.NilReadsAny).Model(), ops, opt).Valid
		exp := linear.True
		if strings.HasSuffix(name, "bad") {
			exp = linear.False
		}
		if got != want || want != exp {
			t.Errorf("%s: funcs %v, built-in %v, published %v", f, got, want, exp)
		}
	}
	if !testing.Short() && (counts[linear.True] != 23 || counts[linear.False] != 79) {
		t.Errorf("etcd verdicts %v, want 23 true and 79 false", counts)
	}
}

// On small random histories, the Funcs models agree with the built-in
// models and with the brute-force references (model_test.go).
func TestFuncsAgreeWithBruteForce(t *testing.T) {
	funcs := map[string]Model{
		"cas-register": casFuncs(int64(0), false).Model(),
		"fifo-queue":   queueFuncs.Model(),
		"mutex":        mutexFuncs.Model(),
	}
	for name, fm := range funcs {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(len(name))))
			builtin, _ := Lookup(name)
			counts := map[bool]int{}
			for round := range 1500 {
				events := randomOps(r, name, 1+r.IntN(6))
				ops, _, err := history.Pair(events)
				if err != nil {
					t.Fatal(err)
				}
				want := bruteForce(ops, references[name])
				b := checkModel(t, builtin, ops, Options{Initial: int64(0)}).Valid
				f := checkModel(t, fm, ops, Options{Initial: int64(0)}).Valid
				if (f == linear.True) != want || f == linear.Unknown || b != f {
					var sb strings.Builder
					_ = history.WriteAll(&sb, events)
					t.Fatalf("round %d: funcs %v, built-in %v, brute force %v\n%s", round, f, b, want, sb.String())
				}
				counts[want]++
			}
			if counts[true] < 200 || counts[false] < 200 {
				t.Fatalf("lopsided: %v", counts)
			}
		})
	}
}

// A Funcs model's states count against the checker's memory bound
// (linear.Growing): each new state adds to Bytes, a state seen before
// does not.
func TestFuncsStatesAreCharged(t *testing.T) {
	events := []history.Event{
		{Index: 0, Process: 0, Type: history.Invoke, F: "enqueue", Value: int64(1)},
		{Index: 1, Process: 0, Type: history.OK, F: "enqueue", Value: int64(1)},
		{Index: 2, Process: 0, Type: history.Invoke, F: "enqueue", Value: int64(2)},
		{Index: 3, Process: 0, Type: history.OK, F: "enqueue", Value: int64(2)},
	}
	ops, _, err := history.Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := queueFuncs.Model().Compile(ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := parts[0].Spec
	g, ok := spec.(linear.Growing)
	if !ok {
		t.Fatal("a Funcs spec is not linear.Growing")
	}
	s0 := spec.Init()
	b0 := g.Bytes()
	s1, _ := spec.Step(s0, 0)
	b1 := g.Bytes()
	s1again, _ := spec.Step(s0, 0)
	s2, _ := spec.Step(s1, 1)
	b2 := g.Bytes()
	if b0 <= 0 || b1 <= b0 || s1again != s1 || b2 <= b1 || s2 == s1 {
		t.Fatalf("bytes %d, %d, %d; states %d %d %d %d", b0, b1, b2, s0, s1, s1again, s2)
	}
	if _, _ = spec.Step(s0, 0); g.Bytes() != b2 {
		t.Fatalf("a state seen before was charged again: %d, then %d", b2, g.Bytes())
	}
}

// A Funcs model used wrongly fails with an error that says what to do.
func TestFuncsMisuse(t *testing.T) {
	events := []history.Event{
		{Index: 0, Process: 0, Type: history.Invoke, F: "write", Value: int64(1)},
		{Index: 1, Process: 0, Type: history.OK, F: "write", Value: int64(1)},
		{Index: 2, Process: 1, Type: history.Invoke, F: "read"},
		{Index: 3, Process: 1, Type: history.OK, F: "read", Value: int64(1)},
	}
	ops, _, _ := history.Pair(events)
	step := func(s []int, op history.Op) ([]int, bool) { return s, true }
	cases := map[string]struct {
		m    Model
		want string
	}{
		"no step":    {Funcs[int]{Name: "m", Init: func() int { return 0 }}.Model(), "model m: Init and Step are required"},
		"no equal":   {Funcs[[]int]{Init: func() []int { return nil }, Step: step}.Model(), "model custom: states of type []int cannot be compared with ==; give the model an Equal"},
		"lost op":    {Funcs[int]{Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s, true }, Partition: func(ops []history.Op) [][]history.Op { return [][]history.Op{ops[:1]} }}.Model(), "Partition kept 1 of 2 operations"},
		"foreign op": {Funcs[int]{Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s, true }, Partition: func([]history.Op) [][]history.Op { return [][]history.Op{{{F: "x", Call: 99}}} }}.Model(), "Partition returned an operation (x nil invoked at index 0) that is not one of its input or is in two parts"},
		"op twice":   {Funcs[int]{Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s, true }, Partition: func(ops []history.Op) [][]history.Op { return [][]history.Op{ops, ops[:1]} }}.Model(), "is in two parts"},
	}
	for name, c := range cases {
		if _, err := c.m.Compile(ops, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// A Step that panics: the checker goes on, and the spec says why its
	// verdict cannot be trusted.
	boom := Funcs[int64]{Name: "boom", Init: func() int64 { return 0 }, Step: func(s int64, op history.Op) (int64, bool) {
		if op.F == "read" {
			panic("no reads here")
		}
		return op.Input.(int64), true
	}}.Model()
	parts, err := boom.Compile(ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := linear.Check(context.Background(), parts, linear.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := SpecError(parts); err == nil || !strings.Contains(err.Error(), "model boom: Step panicked: no reads here, on read → 1") {
		t.Fatalf("spec error %v", err)
	}
	// A state of an interface type holding a slice is keyed by value.
	lists := Funcs[any]{Init: func() any { return []int{} }, Step: func(s any, op history.Op) (any, bool) {
		return append(slices.Clone(s.([]history.Value)), op.Input), true
	}}.Model()
	if res := checkModel(t, lists, ops[:1], Options{}); res.Valid != linear.True {
		t.Fatalf("list states: %v", res.Valid)
	}
}
