package isolation

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// Whatever the bytes, checking them never panics, and when the general
// reader accepts them the fast reader gives the same answer.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"index":0,"type":"invoke","process":0,"f":"txn","value":[["append",1,1],["r",2,null]]}
{"index":1,"type":"ok","process":0,"f":"txn","value":[["append",1,1],["r",2,[1]]]}
`))
	f.Add([]byte(`{"type":"invoke","process":0,"value":[["w","x",1]]}
{"type":"ok","process":0,"value":[["w","x",1]]}
{"type":"invoke","process":1,"value":[["r","x",null]]}
{"type":"info","process":1,"value":[["r","x",null]]}
{"type":"invoke","process":2,"f":"txn","value":[["r","x",null]]}
{"type":"ok","process":2,"f":"txn","value":[["r","x",7]]}
`))
	f.Add([]byte(`{"index":0,"type":"invoke","process":"nemesis","f":"start","value":null}`))
	f.Add([]byte(`{"type":"ok","process":0,"f":"txn","value":[["r",1,[1,1,2]]]}`))
	f.Add(simulate(f, "si", ListAppend, 30, 1))
	f.Add(simulate(f, "read-committed", RWRegister, 30, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<13 {
			// Larger inputs find nothing smaller ones do not, and make
			// each run, and the minimizing, slow.
			return
		}
		// The fuzzer has no per-input timeout; FUZZ_WATCHDOG=1 turns a
		// slow input into a crash so that it is saved and can be replayed.
		if os.Getenv("FUZZ_WATCHDOG") != "" {
			done := make(chan struct{})
			defer close(done)
			go func() {
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					panic("slow input")
				}
			}()
		}
		for _, w := range []string{ListAppend, RWRegister} {
			o := Options{Workload: w, SearchBudget: 5_000}
			fast, ferr := CheckJSONL(context.Background(), "fuzz", data, o)
			h, err := history.Parse("fuzz", data, history.JSONL)
			if err != nil {
				if ferr == nil && fast.Txns > 0 {
					// The fast reader may only succeed where the general
					// one does.
					t.Fatalf("fast reader accepted what the general one refused: %v", err)
				}
				continue
			}
			slow, serr := Check(context.Background(), h, o)
			if (ferr == nil) != (serr == nil) {
				t.Fatalf("fast %v, general %v", ferr, serr)
			}
			if serr != nil {
				continue
			}
			if fast.Valid != slow.Valid || !slices.Equal(fast.AnomalyTypes, slow.AnomalyTypes) {
				t.Fatalf("fast %v %v, general %v %v", fast.Valid, fast.AnomalyTypes, slow.Valid, slow.AnomalyTypes)
			}
			for _, typ := range slow.AnomalyTypes {
				for _, a := range slow.Anomalies[typ] {
					if a.Explanation == "" {
						t.Fatalf("%s without explanation", typ)
					}
					_ = a.DOT()
				}
			}
		}
	})
}
