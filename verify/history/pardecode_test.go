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
	"runtime"
	"strings"
	"testing"
)

// taker is a fast reader for the tests: it reads the lines that name
// f cas, and of those takes all but process 3's; it records what it took.
// As a LineReader its Prepare keeps each line's number in the batch.
type taker struct {
	took []string
}

func (r *taker) reads(line []byte) bool { return bytes.Contains(line, []byte(`"f":"cas"`)) }

func (r *taker) take(line []byte, lineNo int) bool {
	if bytes.Contains(line, []byte(`"process":3,`)) {
		return false
	}
	r.took = append(r.took, fmt.Sprintf("%d:%s", lineNo, line))
	return true
}

func (r *taker) Prepare(lines [][]byte, taken []bool) any {
	ks := make([]int, len(lines))
	for k, line := range lines {
		taken[k], ks[k] = r.reads(line), k
	}
	return ks
}

func (r *taker) Take(prep any, k int, line []byte, lineNo int) bool {
	if prep.([]int)[k] != k {
		panic("Take offered another line than Prepare read")
	}
	return r.take(line, lineNo)
}

// decodeWith reads data through a Decoder, serial or parallel, within lim
// and a parsed bound, and returns its events, torn line, event count and
// error text. With tk, a fast reader takes some lines (Lines when serial,
// ParallelLines when parallel).
func decodeWith(data []byte, format Format, par bool, lim Limits, maxParsed int64, tk *taker) (events []Event, torn int, n int64, errText string) {
	d := NewDecoder(context.Background(), "h", bytes.NewReader(data), format, lim)
	defer d.Close()
	switch {
	case tk != nil && par:
		d.ParallelLines(tk)
	case tk != nil:
		d.Lines = func(line []byte, lineNo int) bool { return tk.reads(line) && tk.take(line, lineNo) }
	case par:
		d.Parallel()
	}
	if maxParsed > 0 {
		d.LimitParsed(maxParsed)
	}
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			return events, d.TornLine(), d.Events(), ""
		}
		if err != nil {
			return events, d.TornLine(), d.Events(), err.Error()
		}
		events = append(events, e)
	}
}

// sameInParallel holds the parallel Decoder to the serial one on data:
// the same events, torn line, count and error, in batches of a few lines.
func sameInParallel(t testing.TB, name string, data []byte, format Format, lim Limits, maxParsed int64) {
	t.Helper()
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	defer func(n int) { parBatchBytes = n }(parBatchBytes)
	parBatchBytes = 100
	se, st, sn, serr := decodeWith(data, format, false, lim, maxParsed, nil)
	pe, pt, pn, perr := decodeWith(data, format, true, lim, maxParsed, nil)
	if !reflect.DeepEqual(se, pe) || st != pt || sn != pn || serr != perr {
		t.Errorf("%s: serial %d events (torn %d, count %d, error %q); parallel %d events (torn %d, count %d, error %q)",
			name, len(se), st, sn, serr, len(pe), pt, pn, perr)
	}
	// With a fast reader taking some lines: the same lines taken, in
	// order, and the same events for the rest.
	var sTk, pTk taker
	se, st, sn, serr = decodeWith(data, format, false, lim, maxParsed, &sTk)
	pe, pt, pn, perr = decodeWith(data, format, true, lim, maxParsed, &pTk)
	if !reflect.DeepEqual(se, pe) || st != pt || sn != pn || serr != perr || !reflect.DeepEqual(sTk.took, pTk.took) {
		t.Errorf("%s, fast reader: serial %d events, %d lines taken (torn %d, count %d, error %q); parallel %d events, %d lines taken (torn %d, count %d, error %q)",
			name, len(se), len(sTk.took), st, sn, serr, len(pe), len(pTk.took), pt, pn, perr)
	}
}

// The parallel JSON Lines reader gives what the serial one gives, for
// good histories and for every way a line can be wrong, wherever in the
// batches it falls.
func TestParallelDecoder(t *testing.T) {
	var good strings.Builder
	for i := range 300 {
		fmt.Fprintf(&good, `{"type":"invoke","process":%d,"f":"cas","value":[%d,[1,2]]}`+"\n", i%7, i)
		if i%13 == 0 {
			good.WriteString("\n  \n")
		}
		if i%50 == 0 {
			fmt.Fprintf(&good, `{"index":%d,"type":"ok","process":%d,"f":"cas","value":[%d,[1,2]],"time":%d}`+"\n", 9000+i, i%7, i, i)
		} else {
			fmt.Fprintf(&good, `{"type":"fail","process":%d,"f":"cas","value":[%d,[1,2]],"error":"x\"y"}`+"\n", i%7, i)
		}
	}
	g := good.String()
	lines := strings.SplitAfter(g, "\n")
	mid := strings.Join(lines[:200], "")
	cases := []struct {
		name, data string
		format     Format
		lim        Limits
		maxParsed  int64
	}{
		{"good", g, "", Limits{}, 0},
		{"good, format given", g, JSONL, Limits{}, 0},
		{"end marker", g + `{"end":true}` + "\n", "", Limits{}, 0},
		{"torn last line", g + `{"type":"invoke","proc`, "", Limits{}, 0},
		{"bad line amid", mid + `{"type":"invoke","process":0,"f":"read"} x` + "\n" + g, "", Limits{}, 0},
		{"unknown type amid", mid + `{"type":"bogus","process":0}` + "\n" + g, "", Limits{}, 0},
		// (Past the 64KiB the format is detected from.)
		{"not UTF-8 amid", g + g + mid + "{\"type\":\"ok\",\"process\":0,\"f\":\"\xff\"}\n" + g, "", Limits{}, 0},
		{"not UTF-8 in a line the fast reader reads", g + g + mid + "{\"type\":\"ok\",\"process\":0,\"f\":\"cas\",\"value\":\"\xff\"}\n" + g, "", Limits{}, 0},
		{"not UTF-8, format given", mid + "{\"type\":\"ok\",\"process\":0,\"f\":\"\xff\"}\n" + g, JSONL, Limits{}, 0},
		{"long line", mid + `{"type":"ok","process":0,"value":"` + strings.Repeat("y", 500) + `"}` + "\n" + g, "", Limits{MaxLine: 300}, 0},
		{"input too large", g, "", Limits{MaxBytes: 20_000}, 0},
		{"parsed bound", g, "", Limits{}, 30_000},
		{"one line", `{"type":"invoke","process":0,"f":"read"}`, "", Limits{}, 0},
		{"blank", "\n\n", "", Limits{}, 0},
	}
	for _, c := range cases {
		sameInParallel(t, c.name, []byte(c.data), c.format, c.lim, c.maxParsed)
	}
	// And it did read in parallel: more than one batch, decoded by the
	// workers.
	defer func(n int) { parBatchBytes = n }(parBatchBytes)
	parBatchBytes = 100
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	d := NewDecoder(context.Background(), "h", strings.NewReader(g), "", Limits{})
	defer d.Close()
	d.Parallel()
	if _, err := d.Next(); err != nil || d.par == nil {
		t.Fatalf("%v; pipeline %v", err, d.par)
	}
	// So did it with a fast reader, whose Prepare the workers ran.
	var tk taker
	d = NewDecoder(context.Background(), "h", strings.NewReader(g), "", Limits{})
	defer d.Close()
	d.ParallelLines(&tk)
	if _, err := d.Next(); err != nil || d.par == nil || len(tk.took) == 0 {
		t.Fatalf("%v; pipeline %v; %d lines taken", err, d.par, len(tk.took))
	}
}

// FuzzParallelJSONL holds the parallel reader to the serial one on any
// input read as JSON Lines.
func FuzzParallelJSONL(f *testing.F) {
	f.Add([]byte(`{"type":"invoke","process":0,"f":"read"}` + "\n" + `{"type":"ok","process":0,"f":"read","value":1}` + "\n"))
	f.Add([]byte("{\"type\":\"ok\"}\n\n{\"end\":true}\n{\"ty"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameInParallel(t, "fuzz", data, JSONL, Limits{MaxLine: 1 << 10}, 0)
		sameInParallel(t, "fuzz, detected", data, "", Limits{}, 2_000)
	})
}

// ExpectedEvents estimates the whole input's events from its size and
// the events read so far, serial or parallel, so that the operations
// Grow makes room for are never copied again; an input of unknown size
// gives no estimate.
func TestPairerGrow(t *testing.T) {
	var b strings.Builder
	const ops = 20_000
	for i := range ops {
		fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"f":"write","value":[%d,%d]}`+"\n", 2*i, i%10, i%1000, i)
		fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"f":"write","value":[%d,%d]}`+"\n", 2*i+1, i%10, i%1000, i)
	}
	file := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	for _, c := range []struct {
		name      string
		par, file bool
	}{{"serial", false, true}, {"parallel", true, true}, {"unknown size", false, false}} {
		var r io.Reader = strings.NewReader(b.String())
		if c.file {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r = f
		}
		d := NewDecoder(context.Background(), "h", r, "", Limits{})
		if c.par {
			d.Parallel()
		}
		p := Pairer{Track: true}
		var caps []int
		for pos := 0; ; pos++ {
			e, err := d.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Add(pos, e); err != nil {
				t.Fatal(err)
			}
			if pos == 1000 {
				p.Grow(int(d.ExpectedEvents() / 2))
				caps = append(caps, cap(p.Ops), cap(p.ReturnIndex))
			}
		}
		d.Close()
		caps = append(caps, cap(p.Ops), cap(p.ReturnIndex))
		switch {
		case len(p.Ops) != ops:
			t.Fatalf("%s: %d ops", c.name, len(p.Ops))
		case c.file && (caps[0] < ops || caps[0] > ops*3/2 || caps[1] < ops || caps[2] != caps[0] || caps[3] != caps[1]):
			t.Errorf("%s: capacity %v after Grow and at the end, for %d ops", c.name, caps, ops)
		case !c.file && caps[0] >= ops:
			t.Errorf("%s: grew to %d without knowing the size", c.name, caps[0])
		}
	}
}

// A line that is not UTF-8 is named by its line and the column of its
// first byte that is not, serial or parallel.
func TestNotUTF8Column(t *testing.T) {
	head := strings.Repeat(`{"type":"invoke","process":0,"f":"read","value":null}`+"\n"+`{"type":"ok","process":0,"f":"read","value":null}`+"\n", 700)
	data := head + "{\"type\":\"invoke\",\"process\":0,\"f\":\"r\xffead\"}\n"
	for _, par := range []bool{false, true} {
		_, _, _, err := decodeWith([]byte(data), "", par, Limits{}, 0, nil)
		if err != "h:1401:36: file is not UTF-8 text" {
			t.Errorf("parallel %v: %s", par, err)
		}
	}
}
