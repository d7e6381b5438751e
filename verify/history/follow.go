package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
	"unicode/utf8"
)

// Follower reads a JSON Lines history that arrives in pieces, as a file
// being written does: it parses each line once its newline has come, and
// keeps a partial last line until the rest arrives. It stops at the end
// marker (EndMarker). Events are numbered, and errors placed, as
// Parse numbers and places them in the whole file.
type Follower struct {
	name    string
	maxLine int
	partial []byte
	line    int   // lines complete so far
	events  int64 // events returned so far
	ended   bool
}

// NewFollower starts reading the history named name (for errors), with
// lines of at most maxLine bytes (0: 64 MiB).
func NewFollower(name string, maxLine int) *Follower {
	if maxLine <= 0 {
		maxLine = 64 << 20
	}
	return &Follower{name: name, maxLine: maxLine}
}

// Add takes the next bytes of the file and returns the events of the
// lines they complete, in order. After the end marker it takes nothing
// more (Ended). An error names the line and what is wrong with it; the
// events before that line are returned with it.
func (f *Follower) Add(p []byte) ([]Event, error) {
	var out []Event
	for len(p) > 0 && !f.ended {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			if len(f.partial)+len(p) > f.maxLine {
				return out, f.tooLong()
			}
			f.partial = append(f.partial, p...)
			return out, nil
		}
		line := p[:nl]
		p = p[nl+1:]
		if len(f.partial) > 0 {
			if len(f.partial)+len(line) > f.maxLine {
				return out, f.tooLong()
			}
			line = append(f.partial, line...)
			f.partial = f.partial[:0]
		} else if len(line) > f.maxLine {
			return out, f.tooLong()
		}
		f.line++
		e, ok, err := f.parse(line)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// parse reads one complete line: an event, or nothing for a blank line
// or the end marker.
func (f *Follower) parse(line []byte) (Event, bool, error) {
	switch {
	case len(bytes.TrimSpace(line)) == 0:
		return Event{}, false, nil
	case IsEndMarker(line):
		f.ended = true
		return Event{}, false, nil
	case !utf8.Valid(line):
		return Event{}, false, &InputError{File: f.name, Line: f.line, Msg: "line is not UTF-8 text"}
	}
	e, err := jsonlEvent(line, f.line, f.events)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.File = f.name
			if ie.Line == 0 {
				ie.Line = f.line
			}
		}
		return Event{}, false, err
	}
	f.events++
	return e, true, nil
}

func (f *Follower) tooLong() error {
	return &InputError{File: f.name, Line: f.line + 1, Msg: fmt.Sprintf("line is longer than %d bytes", f.maxLine)}
}

// Ended says the end marker was read.
func (f *Follower) Ended() bool { return f.ended }

// Lines is the number of complete lines read.
func (f *Follower) Lines() int { return f.line }

// Partial is the length of the last line so far, still without its
// newline.
func (f *Follower) Partial() int { return len(f.partial) }

// FollowOptions configure Follow.
type FollowOptions struct {
	// Idle ends the reading when the file has not grown for this long
	// (and has no end marker); 0 waits for the end marker (or ctx).
	Idle time.Duration
	// Poll is how often the file is looked at for growth (default 50ms).
	Poll time.Duration
	// MaxLine bounds a line (default 64 MiB).
	MaxLine int
}

// FollowEnd says how a followed history ended.
type FollowEnd struct {
	// Marker says the end marker was read; otherwise the file stopped
	// growing for FollowOptions.Idle.
	Marker bool
	// Lines and Events count what was read.
	Lines  int
	Events int64
	// TornLine is the number of a last line left without its newline
	// when the file went idle (a writer that stopped mid-line): it is not
	// parsed. 0 when there is none.
	TornLine int
}

// Follow reads the JSON Lines history at path while it is being written,
// handing each batch of new events to fn as the lines arrive, until the
// end marker, or until the file has not grown for o.Idle. A file not yet
// there is waited for as a file that does not grow. An error of fn, a
// malformed line (named by its number), a file that shrinks, or ctx's end
// stops it.
func Follow(ctx context.Context, path string, o FollowOptions, fn func([]Event) error) (FollowEnd, error) {
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	fl := NewFollower(path, o.MaxLine)
	end := func() FollowEnd {
		return FollowEnd{Marker: fl.Ended(), Lines: fl.Lines(), Events: fl.events}
	}
	var file *os.File
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	buf := make([]byte, 256<<10)
	var offset int64
	lastGrowth := time.Now()
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		if file == nil {
			f, err := os.Open(path)
			switch {
			case err == nil:
				file = f
				lastGrowth = time.Now()
			case !errors.Is(err, fs.ErrNotExist):
				return end(), err
			}
		}
		grew := false
		for file != nil {
			n, err := file.Read(buf)
			if n > 0 {
				grew = true
				offset += int64(n)
				events, aerr := fl.Add(buf[:n])
				if len(events) > 0 {
					if ferr := fn(events); ferr != nil {
						return end(), ferr
					}
				}
				if aerr != nil {
					return end(), aerr
				}
				if fl.Ended() {
					return end(), nil
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return end(), fmt.Errorf("reading %s: %w", path, err)
			}
		}
		if file != nil && !grew {
			// A file truncated under us (a new run writing the same
			// path) would feed the middle of another history.
			if st, err := file.Stat(); err == nil && st.Size() < offset {
				return end(), fmt.Errorf("%s shrank from %d to %d bytes while it was followed", path, offset, st.Size())
			}
		}
		if grew {
			lastGrowth = time.Now()
		} else if o.Idle > 0 && time.Since(lastGrowth) >= o.Idle {
			e := end()
			if fl.Partial() > 0 {
				e.TornLine = fl.Lines() + 1
			}
			if file == nil {
				return e, fmt.Errorf("%s: %w (waited %s for it)", path, fs.ErrNotExist, o.Idle)
			}
			return e, nil
		}
		select {
		case <-ctx.Done():
			return end(), ctx.Err()
		case <-tick.C:
		}
	}
}
