package history

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// fuzzReader checks the properties every reader owes its callers: it never
// panics; a failure is an InputError with a position inside the input, or
// none; a success reads back unchanged through JSON Lines.
func fuzzReader(f *testing.F, format Format, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse("fuzz", data, format)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if ie.File != "fuzz" {
				t.Fatalf("error does not name the file: %v", err)
			}
			if ie.Line < 0 || ie.Line > bytes.Count(data, []byte("\n"))+1 || ie.Col < 0 {
				t.Fatalf("position %d:%d outside the input: %v", ie.Line, ie.Col, err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteAll(&buf, h.Events); err != nil {
			t.Fatalf("writing what was read: %v", err)
		}
		back, err := Parse("back", buf.Bytes(), JSONL)
		if err != nil {
			t.Fatalf("reading back: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(back.Events, h.Events) {
			t.Fatalf("round trip changed the events:\n%#v\n%#v", back.Events, h.Events)
		}
		// Pairing never panics either.
		_, _, _ = Pair(h.Events)
	})
}

func FuzzReadEDN(f *testing.F) {
	fuzzReader(f, EDN, []string{
		"[{:process 0, :type :invoke, :f :read, :value nil}\n {:process 0, :type :ok, :f :read, :value 3}]",
		"{:index 0 :type :invoke :value [[:append 253 1] [:r 253 nil]]}\n; c\n{:index 1 :type :ok :value [[:append 253 1] [:r 253 [1]]]}",
		"({:process :nemesis :type :info :f :start :value {0 100, :a #{1 2}} :time 5 :error [:x nil]})",
		`{:process 9, :type :invoke, :f :append, :key "0", :value "x 9 0 y"}`,
	})
}

func FuzzReadJSONL(f *testing.F) {
	fuzzReader(f, JSONL, []string{
		`{"index":0,"type":"invoke","process":3,"f":"cas","value":[1,2],"time":1200,"node":"n1"}` + "\n" +
			`{"index":1,"type":"fail","process":3,"f":"cas","value":[1,2],"time":1300,"error":"mismatch"}`,
		`{"type":"info","process":"nemesis","value":{"a":1.5,"b":null}}`,
	})
}

func FuzzReadJSON(f *testing.F) {
	fuzzReader(f, JSON, []string{
		`[{"process":94,"type":"invoke","f":"read","value":null},{"process":94,"type":"ok","f":"read","value":3}]`,
		`[{"type":"ok","f":"txn","value":[["w","x",2]],"process":0,"index":2}]`,
	})
}

func FuzzReadJepsenLog(f *testing.F) {
	fuzzReader(f, JepsenLog, []string{
		"INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\t3\n",
		"INFO  jepsen.util - 1  :invoke :cas [1 2]\nINFO  jepsen.util - 1 :info :cas :timed-out\n",
		"INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n",
	})
}

// FuzzDetect feeds anything to format detection and the reader it picks.
func FuzzDetect(f *testing.F) {
	fuzzReader(f, "", []string{
		`{"type":"ok"}`, `[{"type":"ok"}]`, `{:type :ok}`, "INFO  jepsen.util - 0\t:ok\t:read\t1", "; x\n(", "",
	})
}

// FuzzReadInput checks the bounded reader against its definition: it
// returns the input unchanged when it fits the bounds, and otherwise a
// LimitError naming the first line too long, or the size, whichever the
// input reaches first; it never reads on past a bound.
func FuzzReadInput(f *testing.F) {
	f.Add([]byte("ab\ncd\n"), uint16(3), uint16(10), uint8(1))
	f.Add([]byte("abcdef"), uint16(3), uint16(100), uint8(7))
	f.Add([]byte("a\nbbbb\nc"), uint16(2), uint16(0), uint8(2))
	f.Add(bytes.Repeat([]byte("x\n"), 100), uint16(0), uint16(50), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, maxLine, maxBytes uint16, step uint8) {
		lim := Limits{MaxLine: int64(maxLine), MaxBytes: int64(maxBytes)}
		r := &stepReader{data: data, step: int(step)%9 + 1}
		got, err := ReadInput(context.Background(), "fuzz", r, lim)
		// The first line too long, and whether the whole is too large.
		wantLine, line, col := 0, 1, 0
		for _, c := range data {
			if c == '\n' {
				line, col = line+1, 0
				continue
			}
			col++
			if lim.MaxLine > 0 && int64(col) > lim.MaxLine {
				wantLine = line
				break
			}
		}
		overSize := lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes
		var le *LimitError
		switch {
		case wantLine == 0 && !overSize:
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("input within bounds: got %q, %v", got, err)
			}
		case !errors.As(err, &le):
			t.Fatalf("input beyond bounds (line %d, size %v): got %q, %v", wantLine, overSize, got, err)
		case le.Line > 0 && le.Line != wantLine:
			t.Fatalf("blamed line %d, the first line too long is %d", le.Line, wantLine)
		case le.Line == 0 && !overSize:
			t.Fatalf("size blamed for an input of %d bytes under %d", len(data), lim.MaxBytes)
		}
		// It reads at most a chunk past the bound.
		if lim.MaxBytes > 0 && int64(r.off) > lim.MaxBytes+chunk {
			t.Fatalf("read %d bytes under a bound of %d", r.off, lim.MaxBytes)
		}
	})
}

// stepReader returns at most step bytes a read, as a pipe may.
type stepReader struct {
	data []byte
	off  int
	step int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data[r.off:])
	r.off += n
	return n, nil
}

// FuzzParseSize: ParseSize (--max-memory's parser) accepts exactly a positive
// integer with an optional unit, never panics, never overflows, and reads
// back what Size writes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4GiB", "512MiB", "100MB", "1048576", "0", "-1KiB", "9223372036854775807", "4 GiB", "GiB", "1.5GiB", "4611686018427387904B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not a positive size") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if n <= 0 || n > 1<<62 {
			t.Fatalf("%q read as %d", s, n)
		}
		back, err := ParseSize(Size(n))
		if err != nil && !strings.HasSuffix(Size(n), " bytes") {
			t.Fatalf("%q: %d renders as %q, which does not read back: %v", s, n, Size(n), err)
		}
		if err == nil && back != n {
			t.Fatalf("%q: %d renders as %q, which reads back as %d", s, n, Size(n), back)
		}
	})
}
