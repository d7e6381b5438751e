package checker_test

import (
	"context"
	"fmt"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
)

// Online checkers take the events as they happen (the harness feeds them
// every 50 ms with Test.Online); at the end only the analysis is left.
func ExampleComposeOnline() {
	h, err := history.Parse("h.jsonl", []byte(`{"process":0,"type":"invoke","f":"txn","value":[["append","x",1]]}
{"process":0,"type":"ok","f":"txn","value":[["append","x",1]]}
{"process":1,"type":"invoke","f":"txn","value":[["r","x",null]]}
{"process":1,"type":"ok","f":"txn","value":[["r","x",[1]]]}
`), history.JSONL)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := checker.ComposeOnline(map[string]checker.Online{
		"txn": checker.OnlineTransactional(checker.TransactionalOptions{
			Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "strict-serializable"}}),
		"stats": checker.Offline(checker.Stats()),
	})
	ctx := context.Background()
	for _, e := range h.Events { // as the test runs
		c.Feed(ctx, []history.Event{e})
	}
	run, err := checker.NewRun("example", h.Events, "", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := c.Result(ctx, run)
	fmt.Println(res.Valid, res.Checkers["txn"].Fields["txns"], res.Checkers["stats"].Fields["ok"])
	// Output: true 2 2
}
