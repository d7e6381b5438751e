package model

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
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
			res, _, err := check(t, "capture-owner", history.JSONL, &Options{}, strings.Join(c.history, "\n"))
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
		_, _, err := check(t, "capture-owner", history.JSONL, &Options{}, c.history)
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
		m, _ := Lookup("capture-owner")
		parts, err := m.Compile(ops, Options{})
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
