package lincheck_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/model"
)

// CheckDecoder checks a history as it is read, keeping its operations
// and never its events: here a read that returns a value no write left.
func ExampleCheckDecoder() {
	const h = `{"type":"invoke","process":0,"f":"write","value":[7,1]}
{"type":"ok","process":0,"f":"write","value":[7,1]}
{"type":"invoke","process":1,"f":"read","value":[7,null]}
{"type":"ok","process":1,"f":"read","value":[7,2]}
`
	m, err := model.Lookup("independent-cas-register")
	if err != nil {
		panic(err)
	}
	d := history.NewDecoder(context.Background(), "h.jsonl", strings.NewReader(h), "", history.Limits{})
	defer d.Close()
	d.Parallel()           // JSON Lines decoded on every processor
	d.LimitParsed(1 << 30) // refuse input whose events would take more
	r, err := lincheck.CheckDecoder(context.Background(), "h.jsonl", d, lincheck.Options{Model: m})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Valid, r.Ops, r.Failure.Partition, r.Failure.Op.Op)
	// Output: false 2 key 7 read → 2
}
