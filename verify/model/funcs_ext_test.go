package model_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// Through lincheck too, a Step that panics makes the verdict unknown with
// the panic's text, never false.
func TestFuncsPanicThroughLincheck(t *testing.T) {
	h, err := history.Parse("h.jsonl", []byte(`{"process":0,"type":"invoke","f":"read"}
{"process":0,"type":"ok","f":"read","value":0}
`), history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	boom := model.Funcs[int64]{Name: "boom", Init: func() int64 { return 0 },
		Step: func(int64, history.Op) (int64, bool) { panic("broken") }}
	rep, err := lincheck.Check(context.Background(), "h", h, lincheck.Options{Model: boom.Model()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Valid != linear.Unknown || rep.Failure != nil || !strings.Contains(rep.Reason, "model boom: Step panicked: broken") {
		t.Fatalf("%v, %q, failure %v", rep.Valid, rep.Reason, rep.Failure)
	}
}
