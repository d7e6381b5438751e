package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jsonReader decodes event objects from JSON text, keeping positions.
type jsonReader struct {
	data []byte // the whole file, for positions
	li   *lineIndex
}

// errorAt converts a decoding error at a base offset into an InputError.
func (r *jsonReader) errorAt(base int, dec *json.Decoder, err error) error {
	off := base + int(dec.InputOffset())
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = r.offending(base+int(se.Offset), se.Error())
	}
	line, col := r.li.pos(off)
	msg := err.Error()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "unexpected end of input inside a JSON value"
	}
	return &InputError{Line: line, Col: col, Msg: msg}
}

// offending finds the byte a syntax error names ("invalid character 'x'")
// at or after the byte before off, where the decoder stopped; the decoder's
// offset is sometimes just past it and sometimes before it.
func (r *jsonReader) offending(off int, msg string) int {
	off = max(0, off-1)
	const marker = "invalid character '"
	i := strings.Index(msg, marker)
	if i < 0 || len(msg) <= i+len(marker) {
		return off
	}
	c := msg[i+len(marker)]
	for j := off; j < len(r.data) && j < off+8; j++ {
		if r.data[j] == c {
			return j
		}
	}
	return off
}

// valueStart returns the offset of the value that follows a key, skipping the
// colon and whitespace.
func (r *jsonReader) valueStart(off int) int {
	for off < len(r.data) {
		switch r.data[off] {
		case ' ', '\t', '\r', '\n', ':':
			off++
			continue
		}
		break
	}
	return off
}

// object decodes one event object; the decoder is positioned before its '{'.
// base is the offset in r.data at which the decoder's input starts.
func (r *jsonReader) object(dec *json.Decoder, base int, index int64) (Event, error) {
	start := r.valueStart(base + int(dec.InputOffset()))
	tok, err := dec.Token()
	if err != nil {
		return Event{}, r.errorAt(base, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		line, col := r.li.pos(start)
		return Event{}, &InputError{Line: line, Col: col, Msg: fmt.Sprintf("expected an event object, found %s", describeToken(tok))}
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Event{}, r.errorAt(base, dec, err)
		}
		key, ok := tok.(string)
		if !ok {
			return Event{}, r.errorAt(base, dec, fmt.Errorf("expected an object key"))
		}
		voff := r.valueStart(base + int(dec.InputOffset()))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Event{}, r.errorAt(base, dec, err)
		}
		v, err := decodeJSONValue(raw)
		line, col := r.li.pos(voff)
		if err != nil {
			return Event{}, &InputError{Line: line, Col: col, Msg: err.Error()}
		}
		fields = append(fields, field{key: key, val: v, line: line, col: col})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return Event{}, r.errorAt(base, dec, err)
	}
	line, col := r.li.pos(start)
	return buildEvent(fields, line, col, index)
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return fmt.Sprintf("string %q", t)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// readJSONL reads one event object per line; blank lines are skipped. A
// last line with no newline that is not even complete JSON is torn (see
// History.TornLine): its line number is returned and it is left out.
func readJSONL(data []byte, m *meter) ([]Event, int, error) {
	// Sized once: growing by doubling left up to twice the events as
	// garbage, a gigabyte at ten million operations. No event line is
	// shorter than 13 bytes ({"type":"ok"}), which bounds what a file of
	// blank lines can make it reserve, and the meter's bound (an event
	// costs it at least 112 bytes) bounds it too.
	capacity := min(bytes.Count(data, []byte{'\n'})+1, len(data)/13+1)
	if m != nil && m.max > 0 {
		capacity = min(capacity, int(m.max/112)+1)
	}
	events := make([]Event, 0, capacity)
	lineNo := 0
	for off := 0; off < len(data); {
		lineNo++
		end := bytes.IndexByte(data[off:], '\n')
		last := end < 0
		if last {
			end = len(data)
		} else {
			end += off
		}
		line := data[off:end]
		off = end + 1
		if len(bytes.TrimSpace(line)) == 0 || IsEndMarker(line) {
			continue
		}
		e, err := jsonlEvent(line, lineNo, int64(len(events)))
		if err != nil {
			if tornJSONL(line, last, len(events)) {
				return events, lineNo, nil
			}
			return nil, 0, err
		}
		if err := m.add(&e, lineNo); err != nil {
			return nil, 0, err
		}
		events = append(events, e)
	}
	return events, 0, nil
}

// tornJSONL says a line that did not decode is a write cut short: the
// last, with no newline, after some events, and not complete JSON (a
// whole object with a bad field is bad input like any other).
func tornJSONL(line []byte, last bool, before int) bool {
	return last && before > 0 && !json.Valid(line)
}

// jsonlEvent decodes the JSON Lines line numbered lineNo (without its
// newline) as the event at index.
func jsonlEvent(line []byte, lineNo int, index int64) (Event, error) {
	if fastJSONL {
		if e, ok := fastJSONLEvent(line, index); ok {
			return e, nil
		}
	}
	return jsonlSlow(line, lineNo, index)
}

// fastJSONL turns the fast reader on; benchmarks turn it off to measure
// the general reader beside it.
var fastJSONL = true

// jsonlSlow is jsonlEvent's general reader, which says where and why a
// line is malformed.
func jsonlSlow(line []byte, lineNo int, index int64) (Event, error) {
	r := &jsonReader{data: line, li: newLineIndex(line)}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	e, err := r.object(dec, 0, index)
	if err == nil {
		if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
			_, c := r.li.pos(int(dec.InputOffset()) + bytes.Index(line[dec.InputOffset():], rest))
			err = &InputError{Line: 1, Col: c, Msg: "unexpected text after the event object (JSON Lines holds one object per line)"}
		}
	}
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) && ie.Line > 0 {
			ie.Line += lineNo - 1
		}
		return Event{}, err
	}
	return e, nil
}

// readJSONArray reads a JSON array of event objects, handing each to
// yield as it is decoded (until yield returns false).
func readJSONArray(data []byte, m *meter, yield func(Event) bool) error {
	r := &jsonReader{data: data, li: newLineIndex(data)}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return r.errorAt(0, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return &InputError{Line: 1, Col: 1, Msg: fmt.Sprintf("expected a JSON array of events, found %s", describeToken(tok))}
	}
	for index := int64(0); dec.More(); index++ {
		e, err := r.object(dec, 0, index)
		if err != nil {
			return err
		}
		l, _ := r.li.pos(int(dec.InputOffset()))
		if err := m.add(&e, l); err != nil {
			return err
		}
		if !yield(e) {
			return nil
		}
	}
	if _, err := dec.Token(); err != nil {
		return r.errorAt(0, dec, err)
	}
	rest := data[dec.InputOffset():]
	if trimmed := strings.TrimSpace(string(rest)); trimmed != "" {
		line, col := r.li.pos(int(dec.InputOffset()) + strings.Index(string(rest), trimmed[:1]))
		return &InputError{Line: line, Col: col, Msg: "unexpected text after the array of events"}
	}
	return nil
}
