package txnsim

import (
	"bufio"
	"fmt"
	"io"

	"github.com/ipfence/ipfence/verify/history"
)

// Generate simulates c and returns its history: 2·c.Ops events, indexed
// from 0, with strictly increasing times.
func Generate(c Config) ([]history.Event, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// Cap the preallocation: a huge Ops should grow the slice as it goes,
	// not reserve memory up front.
	events := make([]history.Event, 0, min(2*c.Ops, 1<<20))
	err := run(c, func(e history.Event) error {
		events = append(events, e)
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return events, nil
}

// Write simulates c and streams its history to w as JSON Lines
// (history.AppendEvent), holding only the running transactions in memory,
// never the history. It returns the number of events encoded; when writing
// fails, the last of them may not have reached w.
func Write(w io.Writer, c Config) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	n := 0
	err := run(c, func(e history.Event) error {
		var err error
		if buf, err = history.AppendEvent(buf[:0], e); err != nil {
			return err
		}
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("txnsim: writing event %d: %w", e.Index, err)
		}
		n++
		return nil
	}, nil)
	if err != nil {
		return n, err
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("txnsim: writing history: %w", err)
	}
	return n, nil
}
