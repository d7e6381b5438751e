package isolation_test

import (
	"context"
	"fmt"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
)

// Write skew: each transaction reads the key the other appends to, and
// both miss the other's append. Snapshot isolation allows it;
// serializability does not.
func ExampleCheck() {
	mop := func(f, k string, v history.Value) history.Value { return []history.Value{f, k, v} }
	h := &history.History{Events: []history.Event{
		{Index: 0, Process: 0, Type: history.Invoke, F: "txn", Value: []history.Value{mop("r", "x", nil), mop("append", "y", int64(1))}},
		{Index: 1, Process: 1, Type: history.Invoke, F: "txn", Value: []history.Value{mop("r", "y", nil), mop("append", "x", int64(1))}},
		{Index: 2, Process: 0, Type: history.OK, F: "txn", Value: []history.Value{mop("r", "x", []history.Value{}), mop("append", "y", int64(1))}},
		{Index: 3, Process: 1, Type: history.OK, F: "txn", Value: []history.Value{mop("r", "y", []history.Value{}), mop("append", "x", int64(1))}},
	}}
	for _, model := range []string{"snapshot-isolation", "serializable"} {
		res, err := isolation.Check(context.Background(), h, isolation.Options{Workload: isolation.ListAppend, Consistency: model})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Summary("skew"))
		for _, a := range res.Anomalies["G2-item"] {
			fmt.Println(a.Explanation)
		}
	}
	// Output:
	// skew: VALID (list-append, snapshot-isolation, 2 transactions)
	// skew: INVALID (list-append, serializable, 2 transactions): G2-item; not repeatable-read
	// T2 < T3 because T2 read key "x" as [], which does not hold 1, appended by T3 (no read shows it, so it came after every element read). However, T3 < T2 because T3 read key "y" as [], which does not hold 1, appended by T2 (no read shows it, so it came after every element read): a cycle.
}
