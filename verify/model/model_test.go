package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

func check(t *testing.T, modelName string, format history.Format, opt *Options, text string) (linear.Result, []linear.Partition, error) {
	t.Helper()
	h, err := history.Parse("case", []byte(text), format)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	m, err := Lookup(modelName)
	if err != nil {
		t.Fatal(err)
	}
	o := OptionsFor(h.Format)
	if opt != nil {
		o = *opt
	}
	parts, err := m.Compile(ops, o)
	if err != nil {
		return linear.Result{}, nil, err
	}
	res, err := linear.Check(context.Background(), parts, linear.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res, parts, nil
}

// Scenarios per model: a history in EDN (Knossos semantics unless options
// say otherwise) and the verdict it must get.
func TestScenarios(t *testing.T) {
	zero := &Options{Initial: int64(0), NilReadsAny: true}
	porcupine := &Options{FailedCASObserved: true}
	cases := []struct {
		name, model string
		opt         *Options
		want        linear.Verdict
		history     string
	}{
		{"read initial", "register", zero, linear.True, `
{:process 0 :type :invoke :f :read} {:process 0 :type :ok :f :read :value 0}`},
		{"read absent without an initial value", "register", &Options{}, linear.True, `
{:process 0 :type :invoke :f :read} {:process 0 :type :ok :f :read :value nil}`},
		{"nil read matches anything under Knossos", "register", zero, linear.True, `
{:process 0 :type :invoke :f :write :value 3} {:process 0 :type :ok :f :write :value 3}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value nil}`},
		{"nil read means absent otherwise", "register", &Options{}, linear.False, `
{:process 0 :type :invoke :f :write :value 3} {:process 0 :type :ok :f :write :value 3}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value nil}`},
		{"stale read", "register", zero, linear.False, `
{:process 0 :type :invoke :f :write :value 1} {:process 0 :type :ok :f :write :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 0}`},
		{"concurrent read may see either", "register", zero, linear.True, `
{:process 0 :type :invoke :f :write :value 1} {:process 1 :type :invoke :f :read}
{:process 1 :type :ok :f :read :value 0} {:process 0 :type :ok :f :write :value 1}`},
		{"failed write never happened", "register", zero, linear.False, `
{:process 0 :type :invoke :f :write :value 1} {:process 0 :type :fail :f :write :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 1}`},
		{"crashed write may happen later", "register", zero, linear.True, `
{:process 0 :type :invoke :f :write :value 1} {:process 0 :type :info :f :write :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 0}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 1}`},
		{"crashed write cannot be undone", "register", zero, linear.False, `
{:process 0 :type :invoke :f :write :value 1} {:process 0 :type :info :f :write :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 1}
{:process 1 :type :invoke :f :read} {:process 1 :type :ok :f :read :value 0}`},
		{"cas chain", "cas-register", zero, linear.True, `
{:process 0 :type :invoke :f :cas :value [0 1]} {:process 0 :type :ok :f :cas :value [0 1]}
{:process 1 :type :invoke :f :cas :value [1 2]} {:process 1 :type :ok :f :cas :value [1 2]}
{:process 2 :type :invoke :f :read} {:process 2 :type :ok :f :read :value 2}`},
		{"cas on a wrong value", "cas-register", zero, linear.False, `
{:process 0 :type :invoke :f :cas :value [5 1]} {:process 0 :type :ok :f :cas :value [5 1]}`},
		{"failed cas is removed under Jepsen semantics", "cas-register", zero, linear.True, `
{:process 0 :type :invoke :f :cas :value [0 1]} {:process 0 :type :fail :f :cas :value [0 1]}`},
		{"failed cas observes a mismatch under Porcupine semantics", "cas-register", porcupine, linear.False, `
{:process 0 :type :invoke :f :cas :value [nil 1]} {:process 0 :type :fail :f :cas :value [nil 1]}`},
		{"failed cas mismatch is fine when the value differs", "cas-register", porcupine, linear.True, `
{:process 0 :type :invoke :f :cas :value [4 1]} {:process 0 :type :fail :f :cas :value [4 1]}`},
		{"multi-register txn reads its own snapshot", "multi-register", zero, linear.True, `
{:process 0 :type :invoke :f :txn :value [[:write :x 1] [:write :y 1]]} {:process 0 :type :ok :f :txn :value [[:write :x 1] [:write :y 1]]}
{:process 1 :type :invoke :f :txn :value [[:read :x nil] [:read :y nil]]} {:process 1 :type :ok :f :txn :value [[:read :x 1] [:read :y 1]]}`},
		{"multi-register torn read", "multi-register", zero, linear.False, `
{:process 0 :type :invoke :f :txn :value [[:write :x 1] [:write :y 1]]} {:process 0 :type :ok :f :txn :value [[:write :x 1] [:write :y 1]]}
{:process 1 :type :invoke :f :txn :value [[:read :x nil] [:read :y nil]]} {:process 1 :type :ok :f :txn :value [[:read :x 1] [:read :y 0]]}`},
		{"kv append and get", "kv", nil, linear.True, `
{:process 0 :type :invoke :f :append :key "a" :value "x"} {:process 0 :type :ok :f :append :key "a" :value "x"}
{:process 0 :type :invoke :f :append :key "a" :value "y"} {:process 0 :type :ok :f :append :key "a" :value "y"}
{:process 1 :type :invoke :f :get :key "a" :value nil} {:process 1 :type :ok :f :get :key "a" :value "xy"}
{:process 1 :type :invoke :f :get :key "b" :value nil} {:process 1 :type :ok :f :get :key "b" :value ""}`},
		{"kv lost append", "kv", nil, linear.False, `
{:process 0 :type :invoke :f :append :key "a" :value "x"} {:process 0 :type :ok :f :append :key "a" :value "x"}
{:process 0 :type :invoke :f :put :key "b" :value "z"} {:process 0 :type :ok :f :put :key "b" :value "z"}
{:process 0 :type :invoke :f :append :key "a" :value "y"} {:process 0 :type :ok :f :append :key "a" :value "y"}
{:process 1 :type :invoke :f :get :key "a" :value nil} {:process 1 :type :ok :f :get :key "a" :value "y"}`},
		{"mutex", "mutex", nil, linear.True, `
{:process 0 :type :invoke :f :acquire} {:process 0 :type :ok :f :acquire}
{:process 0 :type :invoke :f :release} {:process 0 :type :ok :f :release}
{:process 1 :type :invoke :f :acquire} {:process 1 :type :ok :f :acquire}`},
		{"mutex held twice", "mutex", nil, linear.False, `
{:process 0 :type :invoke :f :acquire} {:process 0 :type :ok :f :acquire}
{:process 1 :type :invoke :f :acquire} {:process 1 :type :ok :f :acquire}`},
		{"mutex failed acquire", "mutex", nil, linear.True, `
{:process 0 :type :invoke :f :acquire} {:process 0 :type :ok :f :acquire}
{:process 1 :type :invoke :f :acquire} {:process 1 :type :fail :f :acquire}`},
		{"set", "set", nil, linear.True, `
{:process 0 :type :invoke :f :add :value 1} {:process 0 :type :ok :f :add :value 1}
{:process 1 :type :invoke :f :add :value 2} {:process 2 :type :invoke :f :read}
{:process 2 :type :ok :f :read :value #{1}} {:process 1 :type :ok :f :add :value 2}
{:process 2 :type :invoke :f :read} {:process 2 :type :ok :f :read :value [2 1]}`},
		{"set lost element", "set", nil, linear.False, `
{:process 0 :type :invoke :f :add :value 1} {:process 0 :type :ok :f :add :value 1}
{:process 2 :type :invoke :f :read} {:process 2 :type :ok :f :read :value #{}}`},
		{"fifo queue", "fifo-queue", nil, linear.True, `
{:process 0 :type :invoke :f :enqueue :value 1} {:process 0 :type :ok :f :enqueue :value 1}
{:process 0 :type :invoke :f :enqueue :value 2} {:process 0 :type :ok :f :enqueue :value 2}
{:process 1 :type :invoke :f :dequeue} {:process 1 :type :ok :f :dequeue :value 1}
{:process 1 :type :invoke :f :dequeue} {:process 1 :type :ok :f :dequeue :value 2}
{:process 1 :type :invoke :f :dequeue} {:process 1 :type :ok :f :dequeue :value nil}`},
		{"fifo queue out of order", "fifo-queue", nil, linear.False, `
{:process 0 :type :invoke :f :enqueue :value 1} {:process 0 :type :ok :f :enqueue :value 1}
{:process 0 :type :invoke :f :enqueue :value 2} {:process 0 :type :ok :f :enqueue :value 2}
{:process 1 :type :invoke :f :dequeue} {:process 1 :type :ok :f :dequeue :value 2}`},
		{"fifo queue crashed dequeue may have taken the head", "fifo-queue", nil, linear.True, `
{:process 0 :type :invoke :f :enqueue :value 1} {:process 0 :type :ok :f :enqueue :value 1}
{:process 0 :type :invoke :f :enqueue :value 2} {:process 0 :type :ok :f :enqueue :value 2}
{:process 1 :type :invoke :f :dequeue} {:process 1 :type :info :f :dequeue}
{:process 2 :type :invoke :f :dequeue} {:process 2 :type :ok :f :dequeue :value 2}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _, err := check(t, c.model, history.EDN, c.opt, c.history)
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != c.want {
				t.Fatalf("got %v, want %v", res.Valid, c.want)
			}
		})
	}
}

func TestPartitioning(t *testing.T) {
	res, parts, err := check(t, "kv", history.EDN, nil, `
{:process 0 :type :invoke :f :put :key "a" :value "1"} {:process 0 :type :ok :f :put :key "a" :value "1"}
{:process 0 :type :invoke :f :put :key "b" :value "2"} {:process 0 :type :ok :f :put :key "b" :value "2"}
{:process 0 :type :invoke :f :get :key "a"} {:process 0 :type :ok :f :get :key "a" :value "1"}`)
	if err != nil || res.Valid != linear.True {
		t.Fatalf("%v %v", res.Valid, err)
	}
	if len(parts) != 2 || parts[0].Label != `key "a"` || len(parts[0].Ops) != 2 || parts[1].Label != `key "b"` {
		t.Fatalf("partitions %+v", parts)
	}
	// multi-register: x and y are joined by a transaction, z is alone.
	_, parts, err = check(t, "multi-register", history.EDN, &Options{Initial: int64(0)}, `
{:process 0 :type :invoke :f :txn :value [[:write :x 1] [:write :y 1]]} {:process 0 :type :ok :f :txn :value [[:write :x 1] [:write :y 1]]}
{:process 0 :type :invoke :f :txn :value [[:write :z 1]]} {:process 0 :type :ok :f :txn :value [[:write :z 1]]}
{:process 0 :type :invoke :f :txn :value [[:read :y nil]]} {:process 0 :type :ok :f :txn :value [[:read :y 1]]}`)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, p := range parts {
		labels = append(labels, fmt.Sprintf("%s:%d", p.Label, len(p.Ops)))
	}
	if got := strings.Join(labels, ","); got != `keys "x" "y":2,keys "z":1` {
		t.Fatalf("partitions %s", got)
	}
}

// independent-cas-register checks each key as its own cas-register: a
// history valid per key passes although it would fail as one register, a
// stale read on one key fails that key alone, and the failing operation is
// reported by its index in the whole history.
func TestIndependent(t *testing.T) {
	// Per key fine; as one register, reading 1 after writing 2 would not be.
	res, parts, err := check(t, "independent-cas-register", history.JSONL, nil, `{"process":0,"type":"invoke","f":"write","value":["a",1]}
{"process":0,"type":"ok","f":"write","value":["a",1]}
{"process":0,"type":"invoke","f":"write","value":["b",2]}
{"process":0,"type":"ok","f":"write","value":["b",2]}
{"process":1,"type":"invoke","f":"read","value":["a",null]}
{"process":1,"type":"ok","f":"read","value":["a",1]}
{"process":1,"type":"invoke","f":"cas","value":["b",[2,3]]}
{"process":1,"type":"ok","f":"cas","value":["b",[2,3]]}
{"process":2,"type":"invoke","f":"cas","value":["a",[5,6]]}
{"process":2,"type":"fail","f":"cas","value":["a",[5,6]]}
`)
	if err != nil || res.Valid != linear.True {
		t.Fatalf("%v %v", res.Valid, err)
	}
	var labels []string
	for _, p := range parts {
		labels = append(labels, fmt.Sprintf("%s:%d", p.Label, len(p.Ops)))
	}
	if got := strings.Join(labels, ","); got != `key "a":2,key "b":2` {
		t.Fatalf("partitions %s", got)
	}
	res, parts, err = check(t, "independent-cas-register", history.JSONL, nil, `{"process":0,"type":"invoke","f":"write","value":["a",1]}
{"process":0,"type":"ok","f":"write","value":["a",1]}
{"process":0,"type":"invoke","f":"write","value":["b",1]}
{"process":0,"type":"ok","f":"write","value":["b",1]}
{"process":0,"type":"invoke","f":"write","value":["b",2]}
{"process":0,"type":"ok","f":"write","value":["b",2]}
{"process":1,"type":"invoke","f":"read","value":["b",null]}
{"process":1,"type":"ok","f":"read","value":["b",1]}
`)
	if err != nil || res.Valid != linear.False {
		t.Fatalf("stale read: %v %v", res.Valid, err)
	}
	var failed []string
	for i, pr := range res.Partitions {
		if pr.Valid == linear.False {
			failed = append(failed, fmt.Sprintf("%s op %d", parts[i].Label, parts[i].Ops[pr.Failed].ID))
		}
	}
	if got := strings.Join(failed, ","); got != `key "b" op 3` {
		t.Fatalf("failed %s, want the read of b (operation 3 of the whole history)", got)
	}
	for _, c := range []struct{ history, want string }{
		{`{"process":0,"type":"invoke","f":"write","value":3}`, "independent-cas-register value must be [key value], found 3"},
		{`{"process":0,"type":"invoke","f":"read","value":["a",null]}
{"process":0,"type":"ok","f":"read","value":["b",1]}`, `independent-cas-register result must be [key value] for key "a", found ["b" 1]`},
		{`{"process":0,"type":"invoke","f":"read","value":[1,null]}
{"process":0,"type":"ok","f":"read","value":[2,1]}`, `independent-cas-register result must be [key value] for key 1, found [2 1]`},
		{`{"process":0,"type":"invoke","f":"read","value":[1,null]}
{"process":0,"type":"ok","f":"read","value":["1",1]}`, `independent-cas-register result must be [key value] for key 1, found ["1" 1]`},
		{`{"process":0,"type":"invoke","f":"lock","value":["a",null]}`, `model cas-register has no operation "lock"`},
		{`{"process":0,"type":"invoke","f":"cas","value":["a",7]}`, "cas value must be [old new], found 7"},
	} {
		if _, _, err := check(t, "independent-cas-register", history.JSONL, nil, c.history); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.history, err, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ model, history, want string }{
		{"cas-register", `{:process 0 :type :invoke :f :acquire :index 4}`, `operation invoked at index 4: model cas-register has no operation "acquire" (valid: read, write, cas)`},
		{"register", `{:process 0 :type :invoke :f :cas :value [1 2]}`, `model register has no operation "cas" (valid: read, write)`},
		{"cas-register", `{:process 0 :type :invoke :f :cas :value 3}`, "cas value must be [old new], found 3"},
		{"kv", `{:process 0 :type :invoke :f :put :value 3}`, "kv value must be [key value], found 3"},
		{"kv", `{:process 0 :type :invoke :f :append :key "k" :value 3}`, "append value must be a string, found 3"},
		{"multi-register", `{:process 0 :type :invoke :f :txn :value [[:inc :x 1]]}`, `micro-op 0 has function "inc" (valid: read, write)`},
		{"multi-register", `{:process 0 :type :invoke :f :txn :value 7}`, "txn value must be a list of [f key value]"},
		{"set", `{:process 0 :type :invoke :f :read} {:process 0 :type :ok :f :read :value 3}`, "set read must return a collection, found 3"},
		{"fifo-queue", `{:process 0 :type :invoke :f :enqueue :value nil}`, "enqueue of nil"},
		{"mutex", `{:process 0 :type :invoke :f :lock}`, `model mutex has no operation "lock" (valid: acquire, release)`},
	}
	for _, c := range cases {
		_, _, err := check(t, c.model, history.EDN, nil, c.history)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: got %v, want %q", c.model, c.history, err, c.want)
		}
	}
	saved := registered
	registered = nil // the built-in models alone (ExampleRegister may have run before, under -count)
	defer func() { registered = saved }()
	if _, err := Lookup("knossos"); err == nil || err.Error() != `unknown model "knossos"; valid models: register, cas-register, multi-register, kv, mutex, set, fifo-queue, independent-register, independent-cas-register` {
		t.Errorf("Lookup: %v", err)
	}
}

func TestOptionsFor(t *testing.T) {
	if o := OptionsFor(history.EDN); !o.NilReadsAny || o.FailedCASObserved {
		t.Errorf("edn: %+v", o)
	}
	if o := OptionsFor(history.JSON); !o.NilReadsAny {
		t.Errorf("json: %+v", o)
	}
	if o := OptionsFor(history.JepsenLog); o.NilReadsAny || !o.FailedCASObserved {
		t.Errorf("jepsen-log: %+v", o)
	}
	if o := OptionsFor(history.JSONL); o.NilReadsAny || o.FailedCASObserved {
		t.Errorf("jsonl: %+v", o)
	}
}

// reference is an independent, direct statement of a model's semantics over
// history values, for the brute-force comparison below.
type reference struct {
	init func() any
	step func(state any, o *history.Op) (any, bool)
}

var references = map[string]reference{
	"cas-register": {
		init: func() any { return int64(0) },
		step: func(s any, o *history.Op) (any, bool) {
			v := s.(int64)
			switch o.F {
			case "read":
				return v, o.Pending() || o.Output == v
			case "write":
				return o.Input.(int64), true
			}
			l := o.Input.([]history.Value)
			if l[0] == v {
				return l[1].(int64), true
			}
			return v, false
		},
	},
	"fifo-queue": {
		init: func() any { return "" },
		step: func(s any, o *history.Op) (any, bool) {
			q := s.(string)
			if o.F == "enqueue" {
				return q + fmt.Sprint(o.Input), true
			}
			if q == "" {
				return q, o.Pending() || o.Output == nil
			}
			return q[1:], o.Pending() || fmt.Sprint(o.Output) == q[:1]
		},
	},
	"mutex": {
		init: func() any { return false },
		step: func(s any, o *history.Op) (any, bool) {
			held := s.(bool)
			if o.F == "acquire" {
				return true, !held
			}
			return false, held
		},
	},
}

// bruteForce tries every real-time-respecting order, pending ops anywhere
// after their invoke or never, with the reference semantics.
func bruteForce(ops []history.Op, ref reference) bool {
	var live []*history.Op
	for i := range ops {
		if ops[i].Type != history.Fail {
			live = append(live, &ops[i])
		}
	}
	used := make([]bool, len(live))
	var try func(state any, left int) bool
	try = func(state any, left int) bool {
		if left == 0 {
			return true
		}
		for i, o := range live {
			if used[i] {
				continue
			}
			blocked := false
			for j, p := range live {
				if j != i && !used[j] && !p.Pending() && p.Return < o.Call {
					blocked = true
					break
				}
			}
			if blocked {
				continue
			}
			used[i] = true
			if next, ok := ref.step(state, o); ok && try(next, left-1) {
				return true
			}
			if o.Pending() && try(state, left-1) {
				return true
			}
			used[i] = false
		}
		return false
	}
	return try(ref.init(), len(live))
}

// randomOps makes a small concurrent history for a model, with results that
// are often right and sometimes wrong.
func randomOps(r *rand.Rand, modelName string, n int) []history.Event {
	var events []history.Event
	open := map[int]history.Event{}
	procs := 3
	nextProc := procs
	idle := []int{0, 1, 2}
	emitted := 0
	for emitted < n || len(open) > 0 {
		if emitted < n && len(idle) > 0 && (len(open) == 0 || r.IntN(2) == 0) {
			k := r.IntN(len(idle))
			p := idle[k]
			idle = append(idle[:k], idle[k+1:]...)
			var e history.Event
			switch modelName {
			case "cas-register":
				switch r.IntN(3) {
				case 0:
					e = history.Event{F: "read"}
				case 1:
					e = history.Event{F: "write", Value: int64(r.IntN(3))}
				default:
					e = history.Event{F: "cas", Value: []history.Value{int64(r.IntN(3)), int64(r.IntN(3))}}
				}
			case "fifo-queue":
				if r.IntN(2) == 0 {
					e = history.Event{F: "enqueue", Value: int64(r.IntN(3))}
				} else {
					e = history.Event{F: "dequeue"}
				}
			case "mutex":
				e = history.Event{F: []string{"acquire", "release"}[r.IntN(2)]}
			}
			e.Process, e.Type = history.Process(p), history.Invoke
			open[p] = e
			events = append(events, e)
			emitted++
			continue
		}
		keys := make([]int, 0, len(open))
		for p := range open {
			keys = append(keys, p)
		}
		// Deterministic choice among open processes.
		for i := 1; i < len(keys); i++ {
			for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
				keys[j], keys[j-1] = keys[j-1], keys[j]
			}
		}
		p := keys[r.IntN(len(keys))]
		inv := open[p]
		delete(open, p)
		c := history.Event{Process: inv.Process, F: inv.F, Value: inv.Value, Type: history.OK}
		switch x := r.IntN(10); {
		case x == 0:
			c.Type = history.Info
		case x == 1:
			c.Type = history.Fail
		}
		if c.Type == history.OK && (inv.F == "read" || inv.F == "dequeue") {
			if r.IntN(4) == 0 {
				c.Value = nil
			} else {
				c.Value = int64(r.IntN(3))
			}
		}
		events = append(events, c)
		if c.Type == history.Info {
			idle = append(idle, nextProc) // a crashed process is never reused
			nextProc++
		} else {
			idle = append(idle, p)
		}
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	return events
}

// The compiled models, checked by the search, agree with the reference
// semantics checked by brute force.
func TestModelsAgreeWithBruteForce(t *testing.T) {
	for name, ref := range references {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(len(name))))
			m, _ := Lookup(name)
			counts := map[bool]int{}
			for round := range 1500 {
				events := randomOps(r, name, 1+r.IntN(6))
				ops, _, err := history.Pair(events)
				if err != nil {
					t.Fatal(err)
				}
				parts, err := m.Compile(ops, Options{Initial: int64(0)})
				if err != nil {
					t.Fatal(err)
				}
				res, _ := linear.Check(context.Background(), parts, linear.Options{})
				want := bruteForce(ops, ref)
				if (res.Valid == linear.True) != want || res.Valid == linear.Unknown {
					var b strings.Builder
					_ = history.WriteAll(&b, events)
					t.Fatalf("round %d: checker %v, brute force %v\n%s", round, res.Valid, want, b.String())
				}
				counts[want]++
			}
			if counts[true] < 200 || counts[false] < 200 {
				t.Fatalf("lopsided: %v", counts)
			}
		})
	}
}

// A registered model is found by name and listed after the built-in ones;
// a second model of a name already known, built-in or registered, is
// refused, and the first stays.
func TestRegister(t *testing.T) {
	saved := registered
	registered = nil // as at a program's start (ExampleRegister may have run before, under -count)
	t.Cleanup(func() { registered = saved })
	mine := Funcs[int]{Name: "counter-of-mine", Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s + 1, true }}.Model()
	if err := Register(mine); err != nil {
		t.Fatal(err)
	}
	if m, err := Lookup("counter-of-mine"); err != nil || m.Name() != "counter-of-mine" {
		t.Fatalf("Lookup: %v %v", m, err)
	}
	if got := Names(); got[len(got)-1] != "counter-of-mine" || len(got) != len(models)+1 {
		t.Fatalf("Names: %v", got)
	}
	other := Funcs[int]{Name: "counter-of-mine", Doc: "another", Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s, true }}.Model()
	if err := Register(other); err == nil || err.Error() != `model.Register: a model named "counter-of-mine" is already known` {
		t.Fatalf("second of a name: %v", err)
	}
	if err := Register(Funcs[int]{Name: "cas-register", Init: func() int { return 0 }, Step: func(s int, _ history.Op) (int, bool) { return s, true }}.Model()); err == nil {
		t.Fatal("a built-in name was taken")
	}
	if m, _ := Lookup("counter-of-mine"); m.Doc() != "a model written as functions" {
		t.Fatalf("the first was replaced: %q", m.Doc())
	}
	if len(All()) != len(models)+1 {
		t.Fatalf("All: %d models", len(All()))
	}
}
