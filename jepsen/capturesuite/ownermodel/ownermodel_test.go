package ownermodel_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/jepsen/capturesuite/ownermodel"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// Scenarios for the capture owner, in JSON Lines: provider mutations are
// instantaneous (invoke and ok together), reads span the client's call.
func TestCaptureOwnerScenarios(t *testing.T) {
	const (
		assignN1e1   = `{"process":9,"type":"invoke","f":"assign","value":{"address":"a","nic":"n1","epoch":1}}` + "\n" + `{"process":9,"type":"ok","f":"assign","value":{"address":"a","nic":"n1","epoch":1}}`
		assignN2e2   = `{"process":9,"type":"invoke","f":"assign","value":{"address":"a","nic":"n2","epoch":2}}` + "\n" + `{"process":9,"type":"ok","f":"assign","value":{"address":"a","nic":"n2","epoch":2}}`
		unassignN1e1 = `{"process":9,"type":"invoke","f":"unassign","value":{"address":"a","nic":"n1","epoch":1}}` + "\n" + `{"process":9,"type":"ok","f":"unassign","value":{"address":"a","nic":"n1","epoch":1}}`
		unassignN2e2 = `{"process":9,"type":"invoke","f":"unassign","value":{"address":"a","nic":"n2","epoch":2}}` + "\n" + `{"process":9,"type":"ok","f":"unassign","value":{"address":"a","nic":"n2","epoch":2}}`
		forwardN1e1  = `{"process":9,"type":"invoke","f":"forward","value":{"address":"a","nic":"n1","epoch":1,"enabled":true}}` + "\n" + `{"process":9,"type":"ok","f":"forward","value":{"address":"a","nic":"n1","epoch":1,"enabled":true}}`
		forwardN2e1  = `{"process":9,"type":"invoke","f":"forward","value":{"address":"a","nic":"n2","epoch":1,"enabled":false}}` + "\n" + `{"process":9,"type":"ok","f":"forward","value":{"address":"a","nic":"n2","epoch":1,"enabled":false}}`
		readInvoke   = `{"process":0,"type":"invoke","f":"read","value":{"address":"a"}}`
	)
	read := func(holder string) string {
		h := "null"
		if holder != "" {
			h = `"` + holder + `"`
		}
		return readInvoke + "\n" + `{"process":0,"type":"ok","f":"read","value":{"address":"a","holder":` + h + `}}`
	}
	cases := []struct {
		name    string
		want    linear.Verdict
		history []string
	}{
		{"initially unheld", linear.True, []string{read("")}},
		{"read sees the assign", linear.True, []string{assignN1e1, read("n1")}},
		{"read misses a completed assign", linear.False, []string{assignN1e1, read("")}},
		{"a move to a newer epoch", linear.True, []string{assignN1e1, assignN2e2, read("n2")}},
		{"read concurrent with a move sees either side", linear.True, []string{assignN1e1, readInvoke, assignN2e2,
			`{"process":0,"type":"ok","f":"read","value":{"address":"a","holder":"n1"}}`}},
		{"stale unassign after a move is fenced", linear.False, []string{assignN1e1, assignN2e2, unassignN1e1}},
		{"stale assign after a move is fenced", linear.False, []string{assignN2e2, assignN1e1}},
		{"stale forward on the holder is fenced", linear.False, []string{assignN1e1, assignN2e2, forwardN2e1}},
		{"stale forward on a former holder is harmless", linear.True, []string{assignN1e1, assignN2e2, forwardN1e1, read("n2")}},
		{"unassign of another NIC changes nothing", linear.True, []string{assignN1e1, unassignN2e2, read("n1")}},
		{"unassign of the holder frees it", linear.True, []string{assignN1e1, assignN2e2, unassignN2e2, read("")}},
		{"failed read constrains nothing", linear.True, []string{assignN1e1, readInvoke, `{"process":0,"type":"fail","f":"read","value":{"address":"a"}}`}},
		{"other addresses are independent", linear.True, []string{assignN1e1,
			`{"process":1,"type":"invoke","f":"read","value":{"address":"b"}}`,
			`{"process":1,"type":"ok","f":"read","value":{"address":"b","holder":null}}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := check(t, strings.Join(c.history, "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != c.want {
				t.Fatalf("got %v, want %v", res.Valid, c.want)
			}
		})
	}
}

func TestCaptureOwnerCompileErrors(t *testing.T) {
	cases := []struct{ history, want string }{
		{`{"process":0,"type":"invoke","f":"read","value":"a"}`, `capture-owner value must be a map with an address, found "a"`},
		{`{"process":0,"type":"invoke","f":"read","value":{"address":3}}`, `needs a string address`},
		{`{"process":0,"type":"invoke","f":"assign","value":{"address":"a","epoch":1}}`, `assign needs a non-empty string nic`},
		{`{"process":0,"type":"invoke","f":"assign","value":{"address":"a","nic":"n","epoch":-1}}`, `assign needs an epoch from 0 to 4294967295, found -1`},
		{`{"process":0,"type":"invoke","f":"move","value":{"address":"a"}}`, `model capture-owner has no operation "move" (valid: read, assign, unassign, forward)`},
		{`{"process":0,"type":"invoke","f":"read","value":{"address":"a"}}` + "\n" + `{"process":0,"type":"ok","f":"read","value":{"address":"a"}}`, `read result has no holder`},
		{`{"process":0,"type":"invoke","f":"read","value":{"address":"a"}}` + "\n" + `{"process":0,"type":"ok","f":"read","value":{"address":"a","holder":5}}`, `read holder must be a string or nil, found 5`},
	}
	for _, c := range cases {
		_, err := check(t, c.history)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.history, err, c.want)
		}
	}
}

// Any history the JSON Lines reader accepts either compiles for the
// capture-owner model or is refused with an error; it never panics, and a
// compiled one is checked.
func FuzzCaptureOwner(f *testing.F) {
	f.Add(`{"process":0,"type":"invoke","f":"read","value":{"address":"a"}}` + "\n" + `{"process":0,"type":"ok","f":"read","value":{"address":"a","holder":"n1"}}`)
	f.Add(`{"process":9,"type":"invoke","f":"assign","value":{"address":"a","nic":"n1","epoch":1}}` + "\n" + `{"process":9,"type":"ok","f":"assign","value":{"address":"a","nic":"n1","epoch":1}}`)
	f.Add(`{"process":9,"type":"invoke","f":"unassign","value":{"address":"a","nic":"","epoch":99999999999}}`)
	f.Add(`{"process":1,"type":"invoke","f":"forward","value":[1,2]}`)
	f.Fuzz(func(t *testing.T, text string) {
		h, err := history.Parse("fuzz", []byte(text), history.JSONL)
		if err != nil {
			return
		}
		ops, _, err := history.Pair(h.Events)
		if err != nil {
			return
		}
		parts, err := ownermodel.Model{}.Compile(ops, model.Options{})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := linear.Check(ctx, parts, linear.Options{}); err != nil {
			t.Fatal(err)
		}
	})
}

// check reads a JSON Lines history and checks it against the model.
func check(t *testing.T, text string) (linear.Result, error) {
	t.Helper()
	h, err := history.Parse("case", []byte(text), history.JSONL)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	parts, err := ownermodel.Model{}.Compile(ops, model.Options{})
	if err != nil {
		return linear.Result{}, err
	}
	res, err := linear.Check(context.Background(), parts, linear.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// ref is the capture owner as plain code, for the brute-force oracle.
type ref struct {
	holder string
	epoch  int64
}

// step is the reference semantics: reads see the holder; a mutation at an
// epoch below the highest applied is impossible, except a forward on a NIC
// that does not hold the address, which touches nothing.
func (r ref) step(o *history.Op) (ref, bool) {
	if o.F == "read" {
		if o.Pending() {
			return r, true
		}
		h, _ := o.Output.(map[string]history.Value)["holder"].(string)
		return r, h == r.holder
	}
	in := o.Input.(map[string]history.Value)
	nic, epoch := in["nic"].(string), in["epoch"].(int64)
	if o.F == "forward" && nic != r.holder {
		return r, true
	}
	if epoch < r.epoch {
		return r, false
	}
	switch {
	case o.F == "assign":
		r.holder = nic
	case o.F == "unassign" && r.holder == nic:
		r.holder = ""
	}
	r.epoch = epoch
	return r, true
}

// bruteForce tries every order that respects real time, a pending
// operation anywhere after its invoke or never.
func bruteForce(ops []history.Op) bool {
	var live []*history.Op
	for i := range ops {
		if ops[i].Type != history.Fail {
			live = append(live, &ops[i])
		}
	}
	used := make([]bool, len(live))
	var try func(st ref, left int) bool
	try = func(st ref, left int) bool {
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
			if next, ok := st.step(o); ok && try(next, left-1) {
				return true
			}
			if o.Pending() && try(st, left-1) {
				return true
			}
			used[i] = false
		}
		return false
	}
	return try(ref{}, len(live))
}

// The model agrees with brute force on 3,000 small random histories of
// one address (three processes, up to 7 operations, some crashed or
// failed, reads often right and sometimes wrong), and both verdicts occur.
func TestOwnerModelAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 7))
	verdicts := map[bool]int{}
	for n := range 3000 {
		events := randomHistory(r, 1+r.IntN(7))
		ops, _, err := history.Pair(events)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := ownermodel.Model{}.Compile(ops, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := linear.Check(context.Background(), parts, linear.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForce(ops)
		if (res.Valid == linear.True) != want || res.Valid == linear.Unknown {
			t.Fatalf("history %d: model %v, brute force %v:\n%v", n, res.Valid, want, events)
		}
		verdicts[want]++
	}
	if verdicts[true] < 300 || verdicts[false] < 300 {
		t.Fatalf("verdicts %v: the histories do not exercise both sides", verdicts)
	}
}

// randomHistory is a concurrent history of n operations on address "a".
func randomHistory(r *rand.Rand, n int) []history.Event {
	var events []history.Event
	open := map[int]history.Event{}
	idle := []int{0, 1, 2}
	next := 3
	for emitted := 0; emitted < n || len(open) > 0; {
		if emitted < n && len(idle) > 0 && (len(open) == 0 || r.IntN(2) == 0) {
			k := r.IntN(len(idle))
			p := idle[k]
			idle = append(idle[:k], idle[k+1:]...)
			e := history.Event{F: []string{"read", "assign", "unassign", "forward"}[r.IntN(4)], Value: map[string]history.Value{"address": "a"}}
			if e.F != "read" {
				e.Value = map[string]history.Value{"address": "a", "nic": []string{"n1", "n2"}[r.IntN(2)], "epoch": int64(r.IntN(3))}
			}
			e.Process, e.Type = history.Process(p), history.Invoke
			open[p] = e
			events = append(events, e)
			emitted++
			continue
		}
		keys := slices.Sorted(maps.Keys(open))
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
		if c.Type == history.OK && inv.F == "read" {
			c.Value = map[string]history.Value{"address": "a", "holder": []history.Value{nil, "n1", "n2"}[r.IntN(3)]}
		}
		events = append(events, c)
		if c.Type == history.Info {
			idle = append(idle, next) // a crashed process is never reused
			next++
		} else {
			idle = append(idle, p)
		}
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	return events
}
