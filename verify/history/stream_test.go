package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// decodeAll reads every event of data through a Decoder, from a reader
// that returns one byte a read when slow is set (the worst case for
// the buffers that hold a form or a line).
func decodeAll(data []byte, format Format, slow bool) ([]Event, int, error) {
	var r io.Reader = bytes.NewReader(data)
	if slow {
		r = iotest.OneByteReader(r)
	}
	d := NewDecoder(context.Background(), "h", r, format, Limits{})
	defer d.Close()
	var events []Event
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			return events, d.TornLine(), nil
		}
		if err != nil {
			return nil, 0, err
		}
		events = append(events, e)
	}
}

// sameAsParse holds the Decoder to Parse on one input: the same events
// and torn line, or the same error.
func sameAsParse(t *testing.T, name string, data []byte, slow bool) {
	t.Helper()
	h, perr := Parse("h", data, "")
	events, torn, derr := decodeAll(data, "", slow)
	switch {
	case perr != nil || derr != nil:
		if perr == nil || derr == nil || perr.Error() != derr.Error() {
			t.Errorf("%s: Parse: %v; Decoder: %v", name, perr, derr)
		}
	case !reflect.DeepEqual(h.Events, events) || h.TornLine != torn:
		t.Errorf("%s: the Decoder read %d events (torn line %d), Parse %d (torn line %d)", name, len(events), torn, len(h.Events), h.TornLine)
	}
}

// TestDecoderCorpus reads every history of the shared corpus (EDN, JSON)
// both ways.
func TestDecoderCorpus(t *testing.T) {
	dir := testenv.Corpus(t)
	n := 0
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || (!strings.HasSuffix(path, ".edn") && !strings.HasSuffix(path, ".json")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		sameAsParse(t, path, data, info.Size() < 8<<10)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read %d corpus files, expected the 152 of ../shared/corpus", n)
	}
}

// TestDecoderInputs reads small inputs of every format, good and bad,
// both ways.
func TestDecoderInputs(t *testing.T) {
	inputs := []string{
		`{"index":0,"type":"invoke","process":0,"f":"read","value":null}` + "\n" + `{"index":1,"type":"ok","process":0,"f":"read","value":[1,"x",null]}` + "\n",
		`{"type":"invoke","process":0,"f":"read"}` + "\n\n" + `{"type":"ok","process":0,"f":"read","value":1}` + "\n" + `{"type":"invo`,
		`{"type":"invoke","process":0,"f":"read"}` + "\n" + `{"type":"ok","process":0,"f":"read","value":1} x` + "\n",
		`{"type":"invoke","process":0}` + "\n" + `{"type":"bogus","process":0}` + "\n",
		`[{"process":0,"type":"invoke","f":"read","value":null},` + "\n" + `{"process":0,"type":"ok","f":"read","value":3}]`,
		`[{"type":"ok"},`,
		`[{"type":"ok"}] x`,
		"; a comment\n{:process 0 :type :invoke :f :read :value nil}\n{:process 0, :type :ok, :f :read, :value [1 \"é\" #{2}]}\n",
		"[{:process 0 :type :invoke :f :read :value nil}\n {:process 0 :type :ok :f :read :value 1}]\n",
		"({:process 0 :type :invoke :f :read :value nil} #_ {:x 1} {:process 0 :type :ok :f :read :value 1})",
		"[{:process 0 :type :invoke :f :read :value nil}\n {:process 0 :type :ok :f :read :va",
		"#jepsen.history.Op{:process 0, :type :invoke, :f :txn, :value [[:append 1 2]]}\n",
		"{:process 0 :type :invoke :f :read :value \"unterminated}\n",
		"INFO  jepsen.util - 0\t:invoke\t:read\tnil\nsome other line\nINFO  jepsen.util - 0\t:ok\t:read\t1\n",
		"INFO  jepsen.util - 0\t:invoke\t:read\tnil nil nil\n",
		"",
		"   \n",
	}
	for i, in := range inputs {
		sameAsParse(t, strings.Repeat("#", i+1), []byte(in), false)
		sameAsParse(t, strings.Repeat("#", i+1)+" slow", []byte(in), true)
	}
}

// TestDecoderHoldsLittle reads a large EDN history through the Decoder
// and checks that it buffers a form, not the input.
func TestDecoderHoldsLittle(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("[")
	for range 20_000 {
		b.WriteString("{:process 0 :type :invoke :f :txn :value [[:append 1 2] [:r 1 nil]]}\n{:process 0 :type :ok :f :txn :value [[:append 1 2] [:r 1 [1 2]]]}\n")
	}
	b.WriteString("]")
	d := NewDecoder(context.Background(), "h", &b, EDN, Limits{})
	defer d.Close()
	n := 0
	for {
		_, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 40_000 {
		t.Fatalf("read %d events, want 40000", n)
	}
	if c := d.ep.Buffered(); c > 256<<10 {
		t.Fatalf("the parser's buffer grew to %d bytes for forms of 100", c)
	}
}

// LimitParsed refuses, in every format, the event that takes the events
// read past the bound, naming its line, as ParseLimited does.
func TestDecoderLimitParsed(t *testing.T) {
	var jsonl, edn, arr strings.Builder
	arr.WriteString("[\n")
	for i := range 100 {
		fmt.Fprintf(&jsonl, `{"type":"invoke","process":%d,"f":"read","value":null}`+"\n", i)
		fmt.Fprintf(&edn, "{:type :invoke, :process %d, :f :read, :value nil}\n", i)
		if i > 0 {
			arr.WriteString(",\n")
		}
		fmt.Fprintf(&arr, `{"type":"invoke","process":%d,"f":"read","value":null}`, i)
	}
	arr.WriteString("\n]\n")
	// Each event is 116 bytes by the meter: 1,000 bytes hold eight.
	for _, c := range []struct {
		name, text string
		format     Format
		line       int // the ninth event's; the array's "[" is line 1
	}{{"jsonl", jsonl.String(), JSONL, 9}, {"edn", edn.String(), EDN, 9}, {"json", arr.String(), JSON, 10}} {
		d := NewDecoder(context.Background(), "h", strings.NewReader(c.text), "", Limits{})
		d.LimitParsed(1000)
		n := 0
		var err error
		for ; err == nil; n++ {
			_, err = d.Next()
		}
		d.Close()
		var le *LimitError
		if !errors.As(err, &le) || !le.Parsed || le.Line != c.line || n != 9 {
			t.Errorf("%s: after %d events: %v", c.name, n-1, err)
		}
		if f, _ := d.Format(); f != c.format {
			t.Errorf("%s: format %s", c.name, f)
		}
	}
}
