package lincheck

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// FuzzCheck feeds any history to every model: a model reads the
// operations' values (pairs, lists, maps) itself, so each is a parser of
// its own. Whatever the input, compiling either fails with an error or
// checks; a check says unknown only with a reason; the summary and the
// page render; nothing panics, and the bounds hold.
func FuzzCheck(f *testing.F) {
	seeds := []string{
		`{"type":"invoke","process":0,"f":"write","value":1}` + "\n" + `{"type":"ok","process":0,"f":"write","value":1}`,
		`{"type":"invoke","process":0,"f":"cas","value":[1,2]}` + "\n" + `{"type":"fail","process":0,"f":"cas","value":[1,2]}`,
		`{"type":"invoke","process":0,"f":"enqueue","value":1}` + "\n" + `{"type":"invoke","process":1,"f":"dequeue"}` + "\n" + `{"type":"ok","process":1,"f":"dequeue","value":1}` + "\n" + `{"type":"info","process":0,"f":"enqueue","value":1}`,
		`{"type":"invoke","process":0,"f":"append","value":["k","a"]}` + "\n" + `{"type":"ok","process":0,"f":"append","value":["k","a"]}` + "\n" + `{"type":"invoke","process":1,"f":"get","value":["k",null]}` + "\n" + `{"type":"ok","process":1,"f":"get","value":["k","a"]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["w","x",1],["r","y",null]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[["w","x",1],["r","y",2]]}`,
		`{"type":"invoke","process":0,"f":"add","value":3}` + "\n" + `{"type":"ok","process":0,"f":"add","value":3}` + "\n" + `{"type":"invoke","process":1,"f":"read"}` + "\n" + `{"type":"ok","process":1,"f":"read","value":[3]}`,
		`{"type":"invoke","process":0,"f":"acquire"}` + "\n" + `{"type":"ok","process":0,"f":"acquire"}` + "\n" + `{"type":"invoke","process":1,"f":"acquire"}` + "\n" + `{"type":"ok","process":1,"f":"acquire"}`,
		`{"type":"invoke","process":0,"f":"assign","value":{"nic":"eni-1","epoch":1}}` + "\n" + `{"type":"ok","process":0,"f":"assign","value":{"nic":"eni-1","epoch":1}}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		h, err := history.Parse("fuzz", []byte(text), history.JSONL)
		if err != nil {
			return
		}
		for _, m := range model.All() {
			for _, whole := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r, err := Check(ctx, "fuzz", h, Options{Model: m, MaxMemory: 1 << 20, Unpartitioned: whole})
				cancel()
				if err != nil {
					var pe *history.PairError
					var oe *model.OpError
					if !errors.As(err, &pe) && !errors.As(err, &oe) {
						t.Fatalf("%s: error of type %T: %v", m.Name(), err, err)
					}
					continue
				}
				if r.Valid == linear.Unknown && r.Reason == "" {
					t.Fatalf("%s: unknown without a reason", m.Name())
				}
				if r.Valid == linear.False && r.Failure == nil {
					t.Fatalf("%s: invalid without a failure", m.Name())
				}
				_ = r.Summary()
				if err := r.WriteHTML(io.Discard); err != nil {
					t.Fatalf("%s: page: %v", m.Name(), err)
				}
			}
		}
	})
}
