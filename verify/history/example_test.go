package history_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
)

// A Pairer pairs events into operations as a Decoder reads them, so that
// a checker holds operations, never the events or the file.
func ExamplePairer() {
	const h = `{"index":10,"type":"invoke","process":0,"f":"write","value":1}
{"index":11,"type":"invoke","process":1,"f":"read","value":null}
{"index":12,"type":"info","process":"nemesis","f":"start","value":null}
{"index":13,"type":"ok","process":1,"f":"read","value":1}
{"index":14,"type":"ok","process":0,"f":"write","value":1}
`
	d := history.NewDecoder(context.Background(), "h.jsonl", strings.NewReader(h), "", history.Limits{})
	defer d.Close()
	p := history.Pairer{Track: true}
	for pos := 0; ; pos++ {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		if e.Process == history.Nemesis {
			continue
		}
		if err := p.Add(pos, e); err != nil {
			panic(err)
		}
	}
	for i, o := range p.Ops {
		fmt.Println(o.Process, o.F, o.Type, o.Output, "invoked at", o.Index, "completed at", p.ReturnIndex[i])
	}
	// Output:
	// 0 write ok 1 invoked at 10 completed at 14
	// 1 read ok 1 invoked at 11 completed at 13
}
