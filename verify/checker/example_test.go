package checker_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// Composed checkers: linearizability, statistics and a checker of one's
// own, combined so that false beats unknown beats true, and the failure
// read as a typed value.
func ExampleCompose() {
	h, err := history.Parse("h.jsonl", []byte(`{"process":0,"type":"invoke","f":"write","value":1}
{"process":0,"type":"ok","f":"write","value":1}
{"process":1,"type":"invoke","f":"read"}
{"process":1,"type":"ok","f":"read","value":0}
`), history.JSONL)
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := checker.NewRun("example", h.Events, "", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	register, _ := model.Lookup("register")
	noErrors := checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		for _, o := range r.Ops {
			if o.Error != nil {
				return checker.Result{Valid: linear.False, Fields: map[string]any{"first": o.Index}}
			}
		}
		return checker.Result{Valid: linear.True}
	})
	res := checker.Compose(map[string]checker.Checker{
		"linear":    checker.Linearizable(checker.LinearOptions{Model: register, Semantics: model.Options{Initial: 0}}),
		"stats":     checker.Stats(),
		"no-errors": noErrors,
	}).Check(context.Background(), run)

	fmt.Println("valid:", res.Valid)
	for _, name := range []string{"linear", "stats", "no-errors"} {
		c, _ := res.Checker(name)
		fmt.Println(" ", name, c.Valid)
	}
	f := res.FirstFailure()
	fmt.Printf("%s: %s, completed at index %d, invoked at %d\n", f.Checker, f.Op.Op, f.Op.Index, f.Op.InvokeIndex)
	fmt.Println(strings.Contains(f.Summary, "ends in state 1"))
	// Output:
	// valid: false
	//   linear false
	//   stats true
	//   no-errors true
	// linear: read → 0, completed at index 3, invoked at 2
	// true
}
