package history

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

func roundTrip(t testing.TB, events []Event) []Event {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteAll(&buf, events); err != nil {
		t.Fatalf("write: %v", err)
	}
	h, err := Parse("rt.jsonl", buf.Bytes(), JSONL)
	if err != nil {
		t.Fatalf("read back: %v\n%s", err, buf.String())
	}
	return h.Events
}

func TestJSONLRoundTrip(t *testing.T) {
	events := []Event{
		{Index: 0, Process: 3, Type: Invoke, F: "cas", Value: []Value{int64(1), int64(2)}, Time: 1200, Node: "n1"},
		{Index: 1, Process: 3, Type: Fail, F: "cas", Value: []Value{int64(1), int64(2)}, Time: 1300, Error: "mismatch"},
		{Index: 2, Process: Nemesis, Type: Info, F: "partition", Value: map[string]Value{"n1": []Value{"n2", "n3"}, "n2": []Value{"n1"}}, Time: 5},
		{Index: 3, Process: 0, Type: OK, F: "read", Value: float64(2), Time: -7},
		{Index: 4, Process: NoProcess, Type: Info, Value: "tab\tquote\"back\\slash\nnewline\x01é😀</script>"},
		{Index: 5, Process: 1 << 40, Type: OK, F: "x", Value: []Value{nil, true, false, int64(-9223372036854775808), 1.5e-300, []Value{}, map[string]Value{}}, Error: []Value{"timeout", int64(3)}},
	}
	got := roundTrip(t, events)
	if !reflect.DeepEqual(got, events) {
		t.Fatalf("round trip changed the events:\n got %#v\nwant %#v", got, events)
	}
	// The canonical encoding is stable: writing twice gives the same bytes.
	var a, b bytes.Buffer
	if err := WriteAll(&a, events); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(&b, got); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("re-encoding differs:\n%s\n%s", a.String(), b.String())
	}
	if line := strings.SplitN(a.String(), "\n", 2)[0]; line != `{"index":0,"type":"invoke","process":3,"f":"cas","value":[1,2],"time":1200,"node":"n1"}` {
		t.Fatalf("canonical line is %s", line)
	}
}

// randomValue builds a value of every shape the history model holds.
func randomValue(r *rand.Rand, depth int) Value {
	switch k := r.IntN(8); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k == 2:
		return int64(r.Uint64())
	case k == 3:
		return r.NormFloat64() * 1e6
	case k == 4 || depth > 2:
		runes := []rune("ab\"\\\n\t\x00é😀<>&")
		var s []rune
		for range r.IntN(6) {
			s = append(s, runes[r.IntN(len(runes))])
		}
		return string(s)
	case k == 5 || k == 6:
		l := make([]Value, r.IntN(4))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
	m := map[string]Value{}
	for range r.IntN(4) {
		m[string(rune('a'+r.IntN(5)))] = randomValue(r, depth+1)
	}
	return m
}

func TestJSONLRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		events := make([]Event, r.IntN(20))
		for i := range events {
			events[i] = Event{
				Index: int64(i), Process: Process(r.IntN(5)) - 2, Type: Type(r.IntN(4)),
				F: []string{"", "read", "write", "é"}[r.IntN(4)], Value: randomValue(r, 0),
				Time: r.Int64(), Node: []string{"", "n1"}[r.IntN(2)],
			}
			if r.IntN(3) == 0 {
				events[i].Error = randomValue(r, 0)
				if events[i].Error == nil {
					events[i].Error = "e"
				}
			}
		}
		if len(events) == 0 {
			continue
		}
		got := roundTrip(t, events)
		if !reflect.DeepEqual(got, events) {
			t.Fatalf("round %d changed:\n got %#v\nwant %#v", round, got, events)
		}
	}
}

func TestWriterFlushesEachEvent(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Write(Event{Index: 0, Process: 1, Type: Invoke, F: "read"}); err != nil {
		t.Fatal(err)
	}
	// A crash now must leave a complete line on disk.
	if got := buf.String(); got != `{"index":0,"type":"invoke","process":1,"f":"read","value":null,"time":0}`+"\n" {
		t.Fatalf("after one Write the output is %q", got)
	}
	if err := w.Write(Event{Value: math.NaN()}); err == nil {
		t.Fatal("a NaN value was written")
	}
}

// The same small history in every format reads to the same events.
func TestFormatsAgree(t *testing.T) {
	want := []Event{
		{Index: 0, Process: 0, Type: Invoke, F: "write", Value: int64(1)},
		{Index: 1, Process: 0, Type: OK, F: "write", Value: int64(1)},
		{Index: 2, Process: 1, Type: Invoke, F: "cas", Value: []Value{int64(1), int64(2)}},
		{Index: 3, Process: 1, Type: Info, F: "cas", Error: "timed-out"},
	}
	inputs := map[Format][]string{
		EDN: {
			"{:process 0, :type :invoke, :f :write, :value 1}\n{:process 0 :type :ok :f :write :value 1}\n" +
				"; a comment\n{:process 1, :type :invoke, :f :cas, :value [1 2]}\n{:process 1, :type :info, :f :cas, :value nil :error :timed-out}\n",
			"[{:process 0, :type :invoke, :f :write, :value 1}\n {:process 0 :type :ok :f :write :value 1}\n" +
				" {:process 1, :type :invoke, :f :cas, :value (1 2)}\n {:process 1, :type :info, :f :cas, :error :timed-out}]",
			"({:process 0, :type :invoke, :f :write, :value 1} {:process 0 :type :ok :f :write :value 1}\n" +
				" {:process 1, :type :invoke, :f :cas, :value [1 2]} #jepsen.history.Op{:process 1, :type :info, :f :cas, :error :timed-out})",
		},
		JSON: {`[{"process":0,"type":"invoke","f":"write","value":1},{"process":0,"type":"ok","f":"write","value":1},
{"process":1,"type":"invoke","f":"cas","value":[1,2]},{"process":1,"type":"info","f":"cas","error":"timed-out"}]`},
		JSONL: {`{"index":0,"type":"invoke","process":0,"f":"write","value":1,"time":0}
{"index":1,"type":"ok","process":0,"f":"write","value":1,"time":0}

{"index":2,"type":"invoke","process":1,"f":"cas","value":[1,2],"time":0}
{"index":3,"type":"info","process":1,"f":"cas","value":null,"time":0,"error":"timed-out"}
`},
		JepsenLog: {"INFO  jepsen.util - 0\t:invoke\t:write\t1\nINFO  jepsen.util - 0\t:ok\t:write\t1\n" +
			"INFO  jepsen.core - some other log line\nINFO  jepsen.util - 1  :invoke  :cas  [1 2]\r\nINFO  jepsen.util - 1\t:info\t:cas\t:timed-out\n"},
	}
	for format, list := range inputs {
		for i, in := range list {
			detected, err := Detect([]byte(in))
			if err != nil || detected != format {
				t.Errorf("%s #%d detected as %q (%v)", format, i, detected, err)
			}
			h, err := Parse("x", []byte(in), format)
			if err != nil {
				t.Errorf("%s #%d: %v", format, i, err)
				continue
			}
			if !reflect.DeepEqual(h.Events, want) {
				t.Errorf("%s #%d read as\n%#v\nwant\n%#v", format, i, h.Events, want)
			}
		}
	}
}

func TestReadDetails(t *testing.T) {
	// A separate key is folded into Jepsen's [key value] tuple.
	h, err := Parse("kv", []byte(`{:process 9, :type :invoke, :f :append, :key "0", :value "x 9 0 y"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if v := h.Events[0].Value; !Equal(v, []Value{"0", "x 9 0 y"}) {
		t.Errorf("key folded to %s", Show(v))
	}
	// Maps with integer keys (bank histories) keep their entries, keyed by
	// the key's text; sets become lists; the nemesis is a process.
	h, err = Parse("bank", []byte(`{:process :nemesis, :type :info, :f :read, :value {0 100, 1 #{2 3}}, :index 7, :time 99}`), "")
	if err != nil {
		t.Fatal(err)
	}
	e := h.Events[0]
	if e.Process != Nemesis || e.Index != 7 || e.Time != 99 || !Equal(e.Value, map[string]Value{"0": int64(100), "1": []Value{int64(2), int64(3)}}) {
		t.Errorf("read %+v", e)
	}
	// Jepsen log lines with a value and an error.
	h, err = Parse("log", []byte("INFO  jepsen.util - 4\t:fail\t:read\tnil\t:not-found\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if e := h.Events[0]; e.Type != Fail || e.Value != nil || e.Error != "not-found" {
		t.Errorf("read %+v", e)
	}
}

func TestDetect(t *testing.T) {
	cases := []struct {
		in   string
		want Format
		err  string
	}{
		{`{"type":"ok"}`, JSONL, ""},
		{`  {:type :ok}`, EDN, ""},
		{"; comment\n[{:type :ok}]", EDN, ""},
		{`[ {"type": "ok"} ]`, JSON, ""},
		{`[]`, JSON, ""},
		{`(`, EDN, ""},
		{"garbage\nINFO  jepsen.util - 3\t:ok\t:read\t1", JepsenLog, ""},
		{"", "", "empty"},
		{"  ; only a comment\n", "", "empty"},
		{"hello world", "", `cannot tell the format from "hello world"`},
		{"\xff\xfe", "", "not UTF-8"},
	}
	for _, c := range cases {
		got, err := Detect([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %q, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Bad input gets an error naming the file, line and column and what was
// expected.
func TestInputErrors(t *testing.T) {
	cases := []struct {
		format Format
		in     string
		want   string
	}{
		{EDN, "{:process 0, :type :invoke}\n{:process 0, :type :okay}", `h:2:20: expected type to be one of invoke, ok, fail, info, found "okay"`},
		{EDN, "[{:process 0 :type :invoke}\n 42]", "h:2:2: expected an event map, found a integer"},
		{EDN, "{:process -1 :type :ok}", "h:1:11: expected process to be a non-negative integer or nemesis, found -1"},
		{EDN, "{:process 0 :f :read}", "h:1:1: event has no type"},
		{EDN, "{:process 0 :type :ok :type :ok}", `h:1:29: duplicate key "type"`},
		{EDN, "{:process 0 :type :ok :index 1.5}", "h:1:30: expected index to be an integer, found 1.5"},
		{EDN, "[{:process 0 :type :ok}", "h:1:24: end of input inside the collection opened at 1:1"},
		{EDN, "{:process 0 :type :ok :value {:a 1 :a 2}}", `h:1:36: duplicate map key "a"`},
		{JSONL, `{"type":"ok","process":0}` + "\n" + `{"type":"ok","process":"p1"}`, `h:2:24: expected process to be a non-negative integer or nemesis, found "p1"`},
		{JSONL, `{"type":"ok"} {"type":"ok"}`, "h:1:15: unexpected text after the event object"},
		{JSONL, `{"type":"ok",}`, "h:1:14: invalid character '}'"},
		{JSONL, "{\"type\":\"ok\"}\n[1]", `h:2:1: expected an event object, found "["`},
		{JSONL, `{"type":"ok","value":1e999}`, "h:1:22: number 1e999 is out of range"},
		{JSONL, `{"type":"ok","value":123456789012345678901234}`, "h:1:22: integer 123456789012345678901234 does not fit in 64 bits"},
		{JSON, `[{"type":"ok"},`, "h:1:16: unexpected end of input"},
		{JSON, `[{"type":"ok"}] x`, "h:1:17: unexpected text after the array of events"},
		{JSON, `{"type":"ok"}`, `h:1:1: expected a JSON array of events, found "{"`},
		{JepsenLog, "INFO  jepsen.util - 3\t:ok\t:read\t1\nINFO  jepsen.util - x\t:ok\t:read\t1", "h:2:21: expected a process number or :nemesis"},
		{JepsenLog, "INFO  jepsen.util - 3\t:okk\t:read\t1", "h:1:23: expected :invoke, :ok, :fail or :info"},
		{JepsenLog, "INFO  jepsen.util - 3\t:ok\t:read\t[1", "h:1:35: end of input inside the collection opened at 1:33"},
		{JepsenLog, "INFO  jepsen.util - 3\t:ok\t:read", "h:1:32: expected <process> :<type> :<f> <value>"},
		{JepsenLog, "INFO  jepsen.util - 0 :invoke :0 \xee", "h:1:34: invalid UTF-8"},
		{JepsenLog, "nothing here", "h: no \"jepsen.util - \" event lines in file"},
		{"", "", "h: file holds no events"},
		{EDN, "[]", "h: the history holds no events"},
		{JSON, "[]", "h: the history holds no events"},
		{JSONL, "\n\n", "h: the history holds no events"},
		{"xml", "<a/>", `h: unknown format "xml"; valid formats: jsonl, edn, json, jepsen-log`},
	}
	for _, c := range cases {
		_, err := Parse("h", []byte(c.in), c.format)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s %q: got %v, want an InputError", c.format, c.in, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %q:\n got %s\nwant %s...", c.format, c.in, err, c.want)
		}
	}
}

func TestPair(t *testing.T) {
	ev := func(p Process, typ Type, f string, v Value) Event {
		return Event{Process: p, Type: typ, F: f, Value: v}
	}
	events := []Event{
		ev(0, Invoke, "write", int64(1)), // 0
		ev(1, Invoke, "read", nil),       // 1
		ev(Nemesis, Info, "start", nil),  // 2
		ev(0, OK, "write", int64(1)),     // 3
		ev(1, Info, "read", nil),         // 4
		ev(2, Invoke, "cas", nil),        // 5
		ev(2, Fail, "cas", nil),          // 6
		ev(1, Invoke, "read", nil),       // 7: process 1 crashed and is reused
		ev(3, Invoke, "write", int64(4)), // 8: never completes
		ev(1, OK, "read", int64(1)),      // 9
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	ops, nemesis, err := Pair(events)
	if err != nil {
		t.Fatal(err)
	}
	type brief struct {
		p            Process
		f            string
		typ          Type
		call, ret    int
		index        int64
		input, outpt Value
	}
	var got []brief
	for _, o := range ops {
		got = append(got, brief{o.Process, o.F, o.Type, o.Call, o.Return, o.Index, o.Input, o.Output})
	}
	want := []brief{
		{0, "write", OK, 0, 3, 0, int64(1), int64(1)},
		{1, "read", Info, 1, 4, 1, nil, nil},
		{2, "cas", Fail, 5, 6, 5, nil, nil},
		{1, "read", OK, 7, 9, 7, nil, int64(1)},
		{3, "write", Info, 8, -1, 8, int64(4), nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("paired\n%+v\nwant\n%+v", got, want)
	}
	if len(nemesis) != 1 || nemesis[0].F != "start" {
		t.Fatalf("nemesis events %+v", nemesis)
	}
	if !ops[1].Pending() || !ops[4].Pending() || ops[0].Pending() {
		t.Fatal("Pending is wrong")
	}

	bad := []struct {
		events []Event
		want   string
	}{
		{[]Event{ev(0, Invoke, "read", nil), ev(0, Invoke, "read", nil)}, `event index 1: process 0 invokes "read" while its "read" invoked at index 0 has not completed`},
		{[]Event{ev(0, OK, "read", nil)}, "event index 0: ok completion from process 0 has no open invoke"},
		{[]Event{ev(0, Invoke, "read", nil), ev(0, OK, "write", nil)}, `event index 1: completion f "write" does not match invoke f "read" at index 0`},
		{[]Event{ev(NoProcess, OK, "read", nil)}, "event index 0: event has no process"},
	}
	for _, c := range bad {
		for i := range c.events {
			c.events[i].Index = int64(i)
		}
		_, _, err := Pair(c.events)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
}

// Every history file of the shared corpus and of Porcupine's test data
// reads (the empty etcd_095 excepted), and reads back from JSON Lines
// unchanged.
func TestCorpusReads(t *testing.T) {
	var files []string
	for _, dir := range []string{testenv.Corpus(t), filepath.Join(testenv.ModuleDir(t, "github.com/anishathalye/porcupine"), "test_data")} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Ext(p) != ".md" {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 250 {
		t.Fatalf("found only %d files", len(files))
	}
	for _, f := range files {
		h, err := ReadFile(f, "")
		if filepath.Base(f) == "etcd_095.log" {
			if err == nil || !strings.Contains(err.Error(), "no events") {
				t.Errorf("%s: the empty file gave %v", f, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if got := roundTrip(t, h.Events); !reflect.DeepEqual(got, h.Events) {
			t.Errorf("%s: JSON Lines round trip changed the history", f)
		}
	}
}

// A JSON Lines history whose writer was killed mid-line ends in an
// incomplete JSON text without a newline: the events before it are read
// and the torn line is named. Anything else wrong stays an error.
func TestTornLastLine(t *testing.T) {
	good := `{"index":0,"type":"invoke","process":0,"f":"read","value":null}` + "\n" +
		`{"index":1,"type":"ok","process":0,"f":"read","value":1}` + "\n"
	h, err := Parse("h", []byte(good+`{"index":2,"type":"inv`), JSONL)
	if err != nil || len(h.Events) != 2 || h.TornLine != 3 {
		t.Fatalf("torn: %v %+v", err, h)
	}
	if h, err := Parse("h", []byte(good), JSONL); err != nil || h.TornLine != 0 {
		t.Fatalf("whole: %v %+v", err, h)
	}
	for _, bad := range []string{
		good + `{"index":2,"type":"inv` + "\n",          // cut, then a newline: not a torn write
		good + `{"index":2,"type":"ok","process":"p1"}`, // complete, but wrong
		`{"index":0,"type":"inv`,                        // nothing but a torn line
	} {
		if _, err := Parse("h", []byte(bad), JSONL); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
