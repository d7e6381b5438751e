package history

import (
	"bufio"
	"fmt"
	"io"
)

// AppendEvent appends the canonical JSON Lines encoding of e, newline
// included. Keys come in a fixed order; process is omitted when the event
// has none, f, error and node when empty.
func AppendEvent(dst []byte, e Event) ([]byte, error) {
	dst = append(dst, `{"index":`...)
	dst = fmt.Appendf(dst, "%d", e.Index)
	dst = append(dst, `,"type":"`...)
	dst = append(dst, e.Type.String()...)
	dst = append(dst, '"')
	switch {
	case e.Process == Nemesis:
		dst = append(dst, `,"process":"nemesis"`...)
	case e.Process >= 0:
		dst = fmt.Appendf(dst, `,"process":%d`, e.Process)
	}
	if e.F != "" {
		dst = append(dst, `,"f":`...)
		dst = appendJSONString(dst, e.F)
	}
	dst = append(dst, `,"value":`...)
	var err error
	if dst, err = AppendJSON(dst, e.Value); err != nil {
		return nil, fmt.Errorf("event index %d: value: %w", e.Index, err)
	}
	dst = fmt.Appendf(dst, `,"time":%d`, e.Time)
	if e.Error != nil {
		dst = append(dst, `,"error":`...)
		if dst, err = AppendJSON(dst, e.Error); err != nil {
			return nil, fmt.Errorf("event index %d: error: %w", e.Index, err)
		}
	}
	if e.Node != "" {
		dst = append(dst, `,"node":`...)
		dst = appendJSONString(dst, e.Node)
	}
	return append(dst, "}\n"...), nil
}

// Writer streams events as JSON Lines. Each Write is one line, flushed at
// once, so that a reader (or a crash) never sees half an event.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Write appends one event and flushes it.
func (w *Writer) Write(e Event) error {
	var err error
	w.buf, err = AppendEvent(w.buf[:0], e)
	if err != nil {
		return err
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return err
	}
	return w.w.Flush()
}

// WriteAll writes events as JSON Lines.
func WriteAll(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	for _, e := range events {
		var err error
		if buf, err = AppendEvent(buf[:0], e); err != nil {
			return err
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
