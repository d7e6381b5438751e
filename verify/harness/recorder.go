package harness

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ipfence/ipfence/internal/monotime"
	"github.com/ipfence/ipfence/verify/history"
)

// flushEvery bounds how long a recorded event may sit in memory before it
// reaches the file, and flushSize how many bytes.
const (
	flushEvery = 50 * time.Millisecond
	flushSize  = 64 << 10
)

// Recorder numbers and times the events of a run and streams them to a JSON
// Lines file while the run goes on. Times are nanoseconds since the
// recorder started, on the monotonic clock, taken under the same lock that
// numbers the events, so event order and time order agree. Only whole lines
// are ever written, at most flushEvery apart: if the harness dies, the file
// holds every event up to a moment shortly before, and it parses.
type Recorder struct {
	mu     sync.Mutex
	start  time.Time
	mono   int64 // CLOCK_MONOTONIC at start
	f      *os.File
	buf    []byte
	events []history.Event
	err    error
	done   chan struct{}
	wg     sync.WaitGroup
}

// NewRecorder creates (truncating) the history file at path and starts the
// clock.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	r := &Recorder{f: f, done: make(chan struct{})}
	// The start's monotonic value from a pairing of the clocks, not a
	// read of CLOCK_MONOTONIC after time.Now: a thread descheduled
	// between the two would shift every simulator stamp against the
	// history by that pause.
	r.start = time.Now()
	r.mono = monotime.Pair().Of(r.start)
	r.wg.Add(1)
	go r.flusher()
	return r, nil
}

// Start returns the moment the recorder's clock reads zero.
func (r *Recorder) Start() time.Time { return r.start }

// StartMono returns the moment the recorder's clock reads zero, on
// CLOCK_MONOTONIC: subtract it from another process's monotonic stamps to
// put them on the history's time line.
func (r *Recorder) StartMono() int64 { return r.mono }

// Now returns the recorder's clock: nanoseconds since it started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Record numbers and times e, keeps it and queues it for the file. It
// returns the event as recorded.
func (r *Recorder) Record(e history.Event) history.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = int64(len(r.events))
	e.Time = int64(time.Since(r.start))
	r.events = append(r.events, e)
	if nb, err := history.AppendEvent(r.buf, e); err != nil {
		// A value the codec refuses is a client's bug: keep the event
		// out of the file rather than write half a line, go on with the
		// rest, and fail Close.
		if r.err == nil {
			r.err = fmt.Errorf("recording %s: %w", e, err)
		}
	} else {
		r.buf = nb
		if len(r.buf) >= flushSize {
			r.flushLocked()
		}
	}
	return e
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []history.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]history.Event(nil), r.events...)
}

// EventsFrom returns a copy of the events recorded after the first n:
// what an online checker that has seen n events has not.
func (r *Recorder) EventsFrom(n int) []history.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n >= len(r.events) {
		return nil
	}
	return append([]history.Event(nil), r.events[n:]...)
}

// Len returns how many events have been recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *Recorder) flusher() {
	defer r.wg.Done()
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			r.mu.Lock()
			r.flushLocked()
			r.mu.Unlock()
		}
	}
}

// flushLocked writes the buffered lines; r.mu is held.
func (r *Recorder) flushLocked() {
	if len(r.buf) == 0 || r.f == nil {
		return
	}
	if _, err := r.f.Write(r.buf); err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("writing the history: %w", err)
		}
		// The file is broken; the events stay in memory for the
		// checkers, and Close reports the error.
		r.f.Close()
		r.f = nil
	}
	r.buf = r.buf[:0]
}

// Close flushes the file, ends it with the end marker (history.EndMarker:
// a reader following the file, such as ipfence-verify check --follow, knows the
// history is complete), and syncs it. It returns the first error the
// recorder met, so a history that could not be written whole is never
// mistaken for one that was.
func (r *Recorder) Close() error {
	close(r.done)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, history.EndMarker+"\n"...)
	r.flushLocked()
	if r.f != nil {
		if err := r.f.Sync(); err != nil && r.err == nil {
			r.err = err
		}
		if err := r.f.Close(); err != nil && r.err == nil {
			r.err = err
		}
		r.f = nil
	}
	return r.err
}
