package history

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/ipfence/ipfence/verify/edn"
)

// limitReader passes a reader's bytes on within a context and Limits: a
// read beyond a bound fails with a *LimitError naming the line, and one
// after the context is done with a *ReadError wrapping ctx.Err() (a
// reader that supports read deadlines, such as a pipe opened by
// OpenInput, is interrupted even while it blocks).
type limitReader struct {
	ctx  context.Context
	name string
	r    io.Reader
	lim  Limits
	stop func() bool
	// size is a regular file's size, else 0.
	size int64
	// n is the bytes passed on; line the current line's number and
	// lineLen its length so far.
	n       int64
	line    int
	lineLen int64
	err     error
}

func newLimitReader(ctx context.Context, name string, r io.Reader, lim Limits) *limitReader {
	l := &limitReader{ctx: ctx, name: name, r: r, lim: lim, line: 1, stop: func() bool { return false }}
	if err := ctx.Err(); err != nil {
		l.err = &ReadError{File: name, Err: err, Line: 1}
		return l
	}
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		if dl, has := ctx.Deadline(); has {
			_ = d.SetReadDeadline(dl)
		}
		// A cancellation without a deadline interrupts a blocked read too.
		l.stop = context.AfterFunc(ctx, func() { _ = d.SetReadDeadline(time.Now()) })
	}
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			l.size = st.Size()
			// A regular file too large is refused before it is read.
			if lim.MaxBytes > 0 && st.Size() > lim.MaxBytes {
				l.err = &LimitError{File: name, Limit: lim.MaxBytes, Size: st.Size()}
			}
		}
	}
	return l
}

func (l *limitReader) Read(buf []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(buf)
	if n > 0 {
		if l.lim.MaxBytes > 0 && l.n+int64(n) > l.lim.MaxBytes {
			l.err = &LimitError{File: l.name, Limit: l.lim.MaxBytes}
			return 0, l.err
		}
		l.n += int64(n)
		for b := buf[:n]; ; {
			j := bytes.IndexByte(b, '\n')
			if j < 0 {
				l.lineLen += int64(len(b))
				break
			}
			if l.lim.MaxLine > 0 && l.lineLen+int64(j) > l.lim.MaxLine {
				l.lineLen += int64(j)
				break
			}
			b = b[j+1:]
			l.line++
			l.lineLen = 0
		}
		if l.lim.MaxLine > 0 && l.lineLen > l.lim.MaxLine {
			l.err = &LimitError{File: l.name, Line: l.line, Limit: l.lim.MaxLine}
			return 0, l.err
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if l.ctx.Err() != nil {
			err = l.ctx.Err()
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded
		}
		l.err = &ReadError{File: l.name, Err: err, Bytes: l.n, Line: l.line}
		return n, l.err
	}
	if err == nil {
		if cerr := l.ctx.Err(); cerr != nil {
			l.err = &ReadError{File: l.name, Err: cerr, Bytes: l.n, Line: l.line}
		}
	}
	return n, err
}

// Decoder reads a history's events one at a time from a reader, in any
// format, holding one line (JSON Lines, Jepsen logs) or one event's EDN
// form at a time rather than the whole input, so that a checker that
// keeps a compact form of each event needs memory for that alone. (A
// JSON array is read whole, then decoded one event at a time.)
type Decoder struct {
	name string
	lr   *limitReader
	// detected says the format was detected, which, as with Parse,
	// holds the input to UTF-8 (a format given is decoded as it is).
	detected bool
	br       *bufio.Reader
	format   Format
	err      error // sticky: what Next returned last, io.EOF at the end
	index    int64 // events returned so far
	line     int   // the last line read (JSON Lines, Jepsen logs)
	torn     int
	buf      []byte
	// meter bounds the parsed events' memory (LimitParsed); evLine is
	// where the last EDN event (or, in parallel mode, JSON Lines event)
	// began, for its error.
	meter  *meter
	evLine int
	// wantPar asks for parallel JSON Lines decoding; par is its pipeline
	// once started (see Parallel).
	wantPar    bool
	par        *parState
	lineReader LineReader

	// Lines, when set, is offered each non-blank JSON Lines line (without
	// its newline; valid until it returns) before it is decoded: a line
	// it takes (returns true for) is not decoded, but counts as an
	// event. A fast reader of some shape of event sets it, and leaves
	// the rest to the Decoder.
	Lines func(line []byte, lineNo int) bool

	// EDN: the parser, and for events inside one vector or list, its
	// kind and where it opened.
	ep      *edn.Parser
	inSeq   bool
	seqKind edn.Kind
	seqOpen edn.Pos
	// JSON: the events of the array, pulled one by one.
	next func() (Event, error, bool)
	stop func()
}

// detectSize is how much of the input format detection looks at.
const detectSize = 64 << 10

// NewDecoder returns a Decoder of the history in r, named name in
// errors, in format (detected from the first bytes when empty), read
// within ctx and lim as ReadInput reads. Close it when done.
func NewDecoder(ctx context.Context, name string, r io.Reader, format Format, lim Limits) *Decoder {
	d := &Decoder{name: name, lr: newLimitReader(ctx, name, r, lim), format: format}
	d.br = bufio.NewReaderSize(d.lr, detectSize)
	return d
}

// Close releases what the Decoder holds (its deadline watch, and the
// events of a JSON array not yet read).
func (d *Decoder) Close() {
	d.stopPar()
	d.lr.stop()
	if d.stop != nil {
		d.stop()
	}
}

// Events is how many events Next has returned (or Lines taken).
func (d *Decoder) Events() int64 { return d.index }

// LimitParsed bounds the memory of the events Next returns, summed over
// them, as ParseLimited bounds a whole history's: a caller that keeps what
// it reads (or a compact form of it) is refused with a LimitError naming
// the line, before the events cost it more than max. Call it before the
// first Next; max <= 0 means no bound.
func (d *Decoder) LimitParsed(max int64) {
	d.meter = &meter{max: max}
}

// TornLine is the line number of a torn last JSON Lines line once Next
// has returned io.EOF (see History.TornLine), else 0.
func (d *Decoder) TornLine() int { return d.torn }

// Format returns the history's format, detecting it first when it was
// not given.
func (d *Decoder) Format() (Format, error) {
	if d.format != "" {
		return d.format, nil
	}
	head, err := d.br.Peek(detectSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", d.wrap(err)
	}
	if len(head) == detectSize {
		// More follows: look at whole lines only, so that no rune is
		// cut in two.
		if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
			head = head[:i+1]
		}
	}
	f, err := Detect(head)
	if err != nil {
		return "", &InputError{File: d.name, Msg: err.Error()}
	}
	d.format, d.detected = f, true
	return f, nil
}

// Next returns the next event; io.EOF after the last. Errors are as
// Parse's, naming the file, line and column.
func (d *Decoder) Next() (Event, error) {
	if d.err != nil {
		return Event{}, d.err
	}
	e, err := d.decode()
	if err == nil && d.meter != nil && d.format != JSON { // JSON arrays are metered as they are read
		line := d.evLine
		if d.format != EDN && d.par == nil {
			line = d.line
		}
		err = d.meter.add(&e, line)
	}
	if err == nil {
		d.index++
		return e, nil
	}
	if errors.Is(err, io.EOF) && d.index == 0 && d.torn == 0 {
		// An empty history proves nothing; a run that recorded nothing is
		// more likely broken than correct.
		err = &InputError{Msg: "the history holds no events; nothing to check"}
		if d.format == JepsenLog {
			err = errNoLogEvents()
		}
	}
	if !errors.Is(err, io.EOF) {
		err = d.wrap(err)
	}
	d.err = err
	return Event{}, err
}

// wrap names the file in an error, as Parse does.
func (d *Decoder) wrap(err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		le.File = d.name
		return le
	}
	var re *ReadError
	if errors.As(err, &re) {
		return re
	}
	var ie *InputError
	if errors.As(err, &ie) {
		ie.File = d.name
		return ie
	}
	return &InputError{File: d.name, Msg: err.Error()}
}

func (d *Decoder) decode() (Event, error) {
	f, err := d.Format()
	if err != nil {
		return Event{}, err
	}
	switch f {
	case JSONL:
		if d.par == nil && d.wantPar && (d.Lines == nil || d.lineReader != nil) && runtime.GOMAXPROCS(0) > 1 {
			d.startPar()
		}
		if d.par != nil {
			return d.nextPar()
		}
		return d.jsonl()
	case JepsenLog:
		return d.jepsenLog()
	case EDN:
		return d.edn()
	case JSON:
		return d.json()
	}
	return Event{}, &InputError{Msg: fmt.Sprintf("unknown format %q; valid formats: %s", f, formatList())}
}

// readLine returns the next line without its newline, and whether it
// ended with one; io.EOF when no bytes are left.
func (d *Decoder) readLine() ([]byte, bool, error) {
	line, err := d.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer (Limits bound it).
		d.buf = append(d.buf[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = d.br.ReadSlice('\n')
			d.buf = append(d.buf, line...)
		}
		line = d.buf
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	if len(line) == 0 {
		return nil, false, io.EOF
	}
	d.line++
	if line[len(line)-1] == '\n' {
		return line[:len(line)-1], true, nil
	}
	return line, false, nil
}

// notUTF8Line is the error for a line that is not UTF-8 text: where its
// first byte that is not sits.
func notUTF8Line(line []byte, lineNo int) error {
	col := 1
	for len(line) > 0 {
		r, n := utf8.DecodeRune(line)
		if r == utf8.RuneError && n <= 1 {
			break
		}
		line = line[n:]
		col++
	}
	return &InputError{Line: lineNo, Col: col, Msg: "file is not UTF-8 text"}
}

// notUTF8 says whether a line fails the UTF-8 check of a detected format.
func (d *Decoder) notUTF8(line []byte) error {
	if d.detected && !utf8.Valid(line) {
		return notUTF8Line(line, d.line)
	}
	return nil
}

func (d *Decoder) jsonl() (Event, error) {
	for {
		line, nl, err := d.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 || IsEndMarker(line) {
			continue
		}
		if err := d.notUTF8(line); err != nil {
			return Event{}, err
		}
		if d.Lines != nil && d.Lines(line, d.line) {
			d.index++
			continue
		}
		e, err := jsonlEvent(line, d.line, d.index)
		if err != nil {
			if tornJSONL(line, !nl, int(d.index)) {
				// With no newline, it was the last line.
				d.torn = d.line
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		return e, nil
	}
}

func (d *Decoder) jepsenLog() (Event, error) {
	for {
		line, _, err := d.readLine()
		if err != nil {
			return Event{}, err
		}
		if err := d.notUTF8(line); err != nil {
			return Event{}, err
		}
		e, ok, err := jepsenLogEvent(string(line), d.line, d.index)
		if err != nil {
			return Event{}, err
		}
		if ok {
			return e, nil
		}
	}
}

// edn reads events one top-level form at a time, or, when the input is
// one vector or list of events, one item of it at a time.
func (d *Decoder) edn() (Event, error) {
	if d.ep == nil {
		d.ep = edn.NewReader(d.br)
		open, kind, ok, err := d.ep.Enter()
		if err != nil {
			return Event{}, d.ednErr(err)
		}
		d.inSeq, d.seqKind, d.seqOpen = ok, kind, open
	}
	if d.inSeq {
		n, ok, err := d.ep.Item(d.seqKind, d.seqOpen)
		if err != nil {
			return Event{}, d.ednErr(err)
		}
		if ok {
			d.evLine = n.Pos.Line
			return ednEvent(&n, d.index)
		}
		d.inSeq = false
		// The collection held every event only when nothing follows it;
		// else it was an event itself, and not a map.
		if _, more, err := d.ep.Next(); err != nil {
			return Event{}, d.ednErr(err)
		} else if more {
			return Event{}, &InputError{Line: d.seqOpen.Line, Col: d.seqOpen.Col, Msg: fmt.Sprintf("expected an event map, found a %s", d.seqKind)}
		}
		return Event{}, io.EOF
	}
	form, ok, err := d.ep.Next()
	if err != nil {
		return Event{}, d.ednErr(err)
	}
	if !ok {
		if err := d.ep.Err(); err != nil {
			return Event{}, err
		}
		return Event{}, io.EOF
	}
	d.evLine = form.Pos.Line
	return ednEvent(&form, d.index)
}

// ednErr prefers the reader's error (a bound, a timeout) to the syntax
// error it caused.
func (d *Decoder) ednErr(err error) error {
	if rerr := d.ep.Err(); rerr != nil {
		return rerr
	}
	return ednError(err)
}

func (d *Decoder) json() (Event, error) {
	if d.next == nil {
		data, err := io.ReadAll(d.br)
		if err != nil {
			return Event{}, err
		}
		if d.detected && !utf8.Valid(data) {
			return Event{}, errors.New("file is not UTF-8 text")
		}
		d.next, d.stop = iter.Pull2(iter.Seq2[Event, error](func(yield func(Event, error) bool) {
			err := readJSONArray(data, d.meter, func(e Event) bool { return yield(e, nil) })
			if err != nil {
				yield(Event{}, err)
			}
		}))
	}
	e, err, ok := d.next()
	if !ok {
		return Event{}, io.EOF
	}
	return e, err
}
