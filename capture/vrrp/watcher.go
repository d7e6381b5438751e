package vrrp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A Watcher reads keepalived's notify FIFO and tracks one instance's state.
// Its methods are safe for concurrent use.
//
// How it reads the FIFO, and why. keepalived opens the FIFO O_RDWR |
// O_NONBLOCK: it never waits for a reader, and a write it cannot complete
// (the pipe's 64 KiB are full) is lost. The Watcher opens its end O_RDONLY |
// O_NONBLOCK. The open never blocks, with or without keepalived, so Close
// has no blocked open to undo; the file sits in the Go runtime's poller, so
// Close also ends a pending read at once. Unlike an O_RDWR reader, which
// never sees end of file because it is a writer itself, a read-only reader
// sees end of file when the last writer closes: keepalived exited, crashed
// (the kernel closes a killed process's files) or reloaded (it closes and
// reopens the FIFO). The Watcher then reports Unknown and reopens the FIFO
// by its path. keepalived writes each line with one write of fewer than
// PIPE_BUF bytes, so lines arrive whole, and it writes its state at start,
// so a restarted keepalived is known again within milliseconds.
//
// The Unknown on end of file is the fail-closed answer to a keepalived
// killed while master, which writes nothing on its way out: its peers elect
// a new master, and a Watcher that kept saying Master would keep this node
// capturing beside it. The price is a reload (SIGHUP): keepalived 2.2.7
// does not write the states again afterwards (not even with
// fifo_write_vrrp_states_on_reload, as tested), so a master whose reload
// the Watcher notices stays Unknown until its next transition. Restart
// keepalived rather than reload it. (A reader that reopens late may miss
// the short gap of a reload and keep the state, which is then still true.)
//
// keepalived unlinks a FIFO it created when it exits, and a new one creates
// a new FIFO at the same path; a reader still holding the old one would
// hear nothing. Watch therefore creates the FIFO itself, so that keepalived
// finds it and leaves it alone, and leaves it in place on Close, so that a
// restarted Watcher reads the same FIFO as a keepalived that kept running.
// While no writer has written since the last open, the Watcher also checks
// every half second that the path still names the FIFO it holds, and
// reopens (creating the FIFO if needed) when it does not.
type Watcher struct {
	path     string
	instance string
	changes  chan Event
	done     chan struct{} // closed when the reader has returned
	quit     chan struct{} // closed by Close

	mu     sync.Mutex
	state  State
	err    error
	f      *os.File
	closed bool

	// The reader's progress, counted for tests to wait on rather than
	// guess how long it takes: rechecks (reads that ended at the read
	// deadline and found the path still naming the FIFO held), wakes (the
	// other reads: data, end of file, an error, a replaced path), and
	// events applied (set returned).
	rechecks, wakes, applied atomic.Uint64
}

// changesBuffer is how many state changes Changes holds for a slow
// consumer before it drops the oldest.
const changesBuffer = 16

// recheckEvery is how often the Watcher checks, while no writer has
// written since it opened the FIFO, that the path still names that FIFO.
const recheckEvery = 500 * time.Millisecond

// maxLine bounds a line: keepalived's lines are short (the longest state
// word plus an instance name), and a writer that never ends a line must not
// grow the buffer without bound.
const maxLine = 4096

// Watch creates the FIFO at fifoPath if it does not exist (mode 0600),
// opens it and starts tracking the instance named instance. It fails if
// the path exists and is not a FIFO, or if group or others may write to it:
// whoever can write the FIFO can make this node master. The Watcher stops
// when ctx ends or Close is called. Start it before keepalived, or it
// stays Unknown until the instance's next transition: keepalived writes a
// state only when it enters it.
func Watch(ctx context.Context, fifoPath, instance string) (*Watcher, error) {
	if instance == "" {
		return nil, errors.New("vrrp: watch: empty instance name")
	}
	if err := ensureFIFO(fifoPath); err != nil {
		return nil, err
	}
	f, err := openFIFO(fifoPath)
	if err != nil {
		return nil, fmt.Errorf("vrrp: opening notify FIFO %s: %w", fifoPath, err)
	}
	w := &Watcher{
		path:     fifoPath,
		instance: instance,
		changes:  make(chan Event, changesBuffer),
		done:     make(chan struct{}),
		quit:     make(chan struct{}),
		f:        f,
	}
	go w.run(f)
	go func() {
		select {
		case <-ctx.Done():
			_ = w.Close()
		case <-w.quit:
		}
	}()
	return w, nil
}

// ensureFIFO creates a FIFO at path unless one is there, and refuses a
// path that is something else or that group or others may write.
func ensureFIFO(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := mkfifo(path, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("vrrp: creating notify FIFO %s: %w", path, err)
		}
		// keepalived may have created it in the meantime: check what
		// is there now.
		fi, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("vrrp: notify FIFO %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeNamedPipe {
		return fmt.Errorf("vrrp: notify FIFO %s: is a %v, not a FIFO", path, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("vrrp: notify FIFO %s: mode %v lets group or others write it, and so forge a MASTER line", path, fi.Mode().Perm())
	}
	return nil
}

// State returns the instance's state as last reported: Unknown before the
// first line about it and after keepalived closed the FIFO.
func (w *Watcher) State() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// Changes delivers each change of the instance's state, in order, and is
// closed when the Watcher stops. It holds 16 changes; when a consumer falls
// further behind, the Watcher drops the oldest undelivered change to make
// room, so that the reader never waits (keepalived would lose lines if the
// pipe filled) and the last change delivered is always the current state.
// A consumer that cares only about the present reads State.
func (w *Watcher) Changes() <-chan Event { return w.changes }

// Err returns the last problem the reader met and carried on from (a line
// it could not parse, a failed reopen), or nil.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close stops the Watcher, closes its end of the FIFO (the FIFO stays) and
// waits until Changes is closed. It may be called more than once.
func (w *Watcher) Close() error {
	w.mu.Lock()
	var err error
	if !w.closed {
		w.closed = true
		close(w.quit)
		// Closing the file ends a read waiting in the poller at once.
		if w.f != nil {
			if err = w.f.Close(); err != nil {
				err = fmt.Errorf("vrrp: closing notify FIFO %s: %w", w.path, err)
			}
			w.f = nil
		}
	}
	w.mu.Unlock()
	<-w.done
	return err
}

// apply returns the tracked instance's state after line e: lines about
// other instances and about groups leave it unchanged.
func apply(cur State, instance string, e Event) State {
	if e.Group || e.Instance != instance {
		return cur
	}
	return e.State
}

// run reads lines from f, and from the FIFOs it reopens, until Close.
func (w *Watcher) run(f *os.File) {
	defer close(w.done)
	defer close(w.changes)
	buf := make([]byte, maxLine)
	var pending []byte
	wrote := false // a writer has written since f was opened
	for {
		if !wrote {
			_ = f.SetReadDeadline(time.Now().Add(recheckEvery))
		} else {
			_ = f.SetReadDeadline(time.Time{})
		}
		n, err := readFIFO(f, buf)
		if w.isClosed() {
			return
		}
		switch {
		case err == nil && n > 0:
			w.wakes.Add(1)
			wrote = true
			pending = append(pending, buf[:n]...)
			pending = w.lines(pending)
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			if sameFIFO(f, w.path) {
				w.rechecks.Add(1)
				continue
			}
		case err != nil:
			w.fail(fmt.Errorf("vrrp: reading notify FIFO %s: %w", w.path, err))
		}
		// End of file (every writer gone), a read error, or the path
		// now names another FIFO, or none: a partial line is lost with
		// its writer.
		w.wakes.Add(1)
		pending = pending[:0]
		w.set(Event{Instance: w.instance, State: Unknown})
		f = w.reopen(f)
		if f == nil {
			return
		}
		wrote = false
	}
}

// lines handles every complete line in p and returns what is left.
func (w *Watcher) lines(p []byte) []byte {
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(p) >= maxLine {
				w.fail(fmt.Errorf("vrrp: notify FIFO %s: line longer than %d bytes, dropped", w.path, maxLine))
				return p[:0]
			}
			return p
		}
		line := string(p[:i])
		p = p[i+1:]
		e, err := ParseLine(line)
		if err != nil {
			w.fail(fmt.Errorf("vrrp: notify FIFO %s: %w", w.path, err))
			continue
		}
		w.set(e)
	}
}

// set applies e and, if the instance's state changed, sends e on Changes,
// dropping the oldest undelivered change if the buffer is full. Only the
// reader goroutine sends, so after it has taken one element out there is
// room for one.
func (w *Watcher) set(e Event) {
	defer w.applied.Add(1)
	w.mu.Lock()
	next := apply(w.state, w.instance, e)
	changed := next != w.state
	w.state = next
	w.mu.Unlock()
	if !changed {
		return
	}
	for {
		select {
		case w.changes <- e:
			return
		default:
		}
		select {
		case <-w.changes:
		default:
		}
	}
}

// fail records err for Err.
func (w *Watcher) fail(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

func (w *Watcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// reopen closes old and opens the FIFO at the path again, creating it if
// it is gone, retrying every recheckEvery until it succeeds or Close is
// called; it returns nil after Close.
func (w *Watcher) reopen(old *os.File) *os.File {
	w.mu.Lock()
	if w.f == old {
		w.f = nil
	}
	w.mu.Unlock()
	_ = old.Close()
	for {
		err := ensureFIFO(w.path)
		var f *os.File
		if err == nil {
			if f, err = openFIFO(w.path); err != nil {
				err = fmt.Errorf("vrrp: reopening notify FIFO %s: %w", w.path, err)
			}
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			if f != nil {
				_ = f.Close()
			}
			return nil
		}
		if err == nil {
			w.f = f
			w.mu.Unlock()
			return f
		}
		w.err = err
		w.mu.Unlock()
		select {
		case <-time.After(recheckEvery):
		case <-w.quit:
			return nil
		}
	}
}
