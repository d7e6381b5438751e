package history

import (
	"fmt"
	"reflect"
	"testing"
)

// fastLines are lines the fast reader takes, with the events the general
// reader makes of them.
var fastLines = []string{
	`{"index":3,"type":"invoke","process":5,"f":"cas","value":[0,[2,4]],"time":1000}`,
	`{"index":4,"type":"info","process":5,"f":"write","value":[7,-1],"time":2000,"error":"timeout","node":"n1"}`,
	`{"type":"ok","process":2,"f":"read","value":[3,null]}`,
	`{"type":"ok","process":"nemesis","f":"start","value":true}`,
	` { "type" : "fail" , "process" : 0 , "f" : "put" , "value" : [] , "key" : "k9" } `,
	`{"type":"ok","process":1,"f":"txn","value":[["append",1,2],["r",1,[1,2]]],"error":["a",false]}`,
}

// slowLines are lines the fast reader leaves to the general one: what
// it would read differently, or could not say what is wrong with.
var slowLines = []string{
	`{"type":"ok","process":1,"f":"read","value":{"a":1}}`, // an object value
	`{"type":"ok","process":1,"f":"read","value":1.5}`,     // a fraction
	`{"type":"ok","process":1,"f":"read","value":"a\"b"}`,  // an escape
	`{"type":"ok","process":1,"f":"read","value":01}`,      // a leading zero
	`{"type":"ok","process":-1,"f":"read","value":1}`,      // refused by buildEvent
	`{"type":"ok","type":"ok","process":1,"f":"read"}`,     // a repeated key
	`{"type":"ok","process":1,"f":"read","value":1} x`,     // text after the object
	`{"type":"ok","process":1,"f":"read","value":99999999999999999999}`,
	`{"type":"ok","process":1,"f":"read","value":[1,]}`,
	"{\"type\":\"ok\",\"f\":\"\xfe\"}", // not UTF-8
}

func TestFastJSONLAgreesWithTheGeneralReader(t *testing.T) {
	for _, line := range fastLines {
		fast, ok := fastJSONLEvent([]byte(line), 11)
		if !ok {
			t.Errorf("%s: the fast reader refused it", line)
			continue
		}
		slow, err := jsonlSlow([]byte(line), 1, 11)
		if err != nil {
			t.Fatalf("%s: the general reader: %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\nfast    %#v\ngeneral %#v", line, fast, slow)
		}
	}
	for _, line := range slowLines {
		if e, ok := fastJSONLEvent([]byte(line), 0); ok {
			t.Errorf("%s: the fast reader read it as %v; the general reader must", line, e)
		}
	}
	// Values the general reader gives: concrete, so that a change of
	// shape in either is seen.
	e, _ := fastJSONLEvent([]byte(fastLines[0]), 0)
	if want := []Value{int64(0), []Value{int64(2), int64(4)}}; e.Index != 3 || e.Process != 5 || e.Type != Invoke || e.F != "cas" || e.Time != 1000 || !reflect.DeepEqual(e.Value, want) {
		t.Errorf("event %#v", e)
	}
	e, _ = fastJSONLEvent([]byte(fastLines[4]), 0)
	if want := []Value{"k9", []Value{}}; !reflect.DeepEqual(e.Value, want) {
		t.Errorf("key folded: value %#v, want %#v", e.Value, want)
	}
}

// FuzzFastJSONL: whatever line the fast reader takes, the general reader
// takes too and reads as the same event.
func FuzzFastJSONL(f *testing.F) {
	for _, l := range append(append([]string{}, fastLines...), slowLines...) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fast, ok := fastJSONLEvent([]byte(line), 5)
		if !ok {
			return
		}
		slow, err := jsonlSlow([]byte(line), 1, 5)
		if err != nil {
			t.Fatalf("%q: fast reader took it, general reader: %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast    %#v\ngeneral %#v", line, fast, slow)
		}
	})
}

// BenchmarkReadJSONL reads 200,000 events of register operations with
// the fast reader and with the general one alone (the reader before it),
// in the same run.
func BenchmarkReadJSONL(b *testing.B) {
	var buf []byte
	for i := range 200_000 {
		typ, val := "invoke", fmt.Sprintf("[%d,[%d,%d]]", i%1000, i%5, (i+1)%5)
		if i%2 == 1 {
			typ = "ok"
		}
		buf = fmt.Appendf(buf, `{"index":%d,"type":%q,"process":%d,"f":"cas","value":%s,"time":%d}`+"\n", i, typ, i/2%10, val, i*1000)
	}
	for _, c := range []struct {
		name string
		fast bool
	}{{"fast", true}, {"general", false}} {
		b.Run(c.name, func(b *testing.B) {
			defer func(was bool) { fastJSONL = was }(fastJSONL)
			fastJSONL = c.fast
			for b.Loop() {
				h, err := Parse("b.jsonl", buf, JSONL)
				if err != nil || len(h.Events) != 200_000 {
					b.Fatalf("%v, %d events", err, len(h.Events))
				}
			}
			b.ReportMetric(200_000*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
