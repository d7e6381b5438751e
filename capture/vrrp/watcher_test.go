//go:build unix

package vrrp

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wait is how long a test waits for something that takes milliseconds.
const wait = 5 * time.Second

// writer opens the FIFO as keepalived does (O_RDWR | O_NONBLOCK) and
// returns a function writing one line per call, each in one write.
func writer(t *testing.T, path string) (write func(lines ...string), closeIt func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeIt = func() {
		if !closed {
			closed = true
			f.Close()
		}
	}
	t.Cleanup(closeIt)
	write = func(lines ...string) {
		t.Helper()
		for _, l := range lines {
			if _, err := f.WriteString(l + "\n"); err != nil {
				t.Fatalf("writing %q: %v", l, err)
			}
		}
	}
	return write, closeIt
}

func watch(t *testing.T, path, instance string) *Watcher {
	t.Helper()
	w, err := Watch(context.Background(), path, instance)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// next returns the next change, failing the test after wait.
func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case e, ok := <-w.Changes():
		if !ok {
			t.Fatal("Changes closed")
		}
		return e
	case <-time.After(wait):
		t.Fatalf("no change within %v; state %v, err %v", wait, w.State(), w.Err())
	}
	return Event{}
}

func expect(t *testing.T, w *Watcher, want ...State) {
	t.Helper()
	for _, s := range want {
		if e := next(t, w); e.State != s {
			t.Fatalf("change %+v, want state %v", e, s)
		}
	}
	if got := w.State(); got != want[len(want)-1] {
		t.Fatalf("State() = %v after the changes, want %v", got, want[len(want)-1])
	}
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func noChange(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case e := <-w.Changes():
		t.Fatalf("unexpected change %+v", e)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatcherTracksInstance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	w := watch(t, path, "VI_1")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Type() != os.ModeNamedPipe || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Watch left %v (err %v), want a FIFO with mode 0600", fi.Mode(), err)
	}
	if s := w.State(); s != Unknown {
		t.Fatalf("State() = %v before any line, want UNKNOWN", s)
	}
	write, _ := writer(t, path)
	write(`GROUP "G1" MASTER 0`, `INSTANCE "VI_2" MASTER 100`, `INSTANCE "VI_1" BACKUP 100`)
	e := next(t, w)
	want := Event{Instance: "VI_1", State: Backup, Word: "BACKUP", Priority: 100, Line: `INSTANCE "VI_1" BACKUP 100`}
	if e != want {
		t.Fatalf("first change %+v, want %+v", e, want)
	}
	// A second BACKUP and a priority change while master are not changes.
	write(`INSTANCE "VI_1" BACKUP 100`, `INSTANCE "VI_1" MASTER 100`, `INSTANCE "VI_1" MASTER_PRIORITY 90`, `INSTANCE "VI_1" FAULT 90`, `INSTANCE "VI_1" STOP 90`)
	expect(t, w, Master, Fault, Stop)
	noChange(t, w)

	write(`INSTANCE "VI_1" master 100`)
	deadline := time.Now().Add(wait)
	for w.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), `state "master"`) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Err() = %v after a bad line, want it to name the FIFO and the bad state", err)
	}
	write(`INSTANCE "VI_1" MASTER 100`)
	expect(t, w, Master)
}

// A line may arrive in pieces from a writer other than keepalived; the
// Watcher joins them.
func TestWatcherJoinsPartialLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	w := watch(t, path, "VI_1")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, piece := range []string{`INSTANCE "VI`, `_1" MAS`, "TER 100\nINSTANCE \"VI_1\" BAC", "KUP 100\n"} {
		if _, err := f.WriteString(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	expect(t, w, Master, Backup)
}

// keepalived exiting, crashing or reloading closes its end: the Watcher
// reports Unknown (a keepalived killed while master writes nothing) and
// reads the next keepalived's lines from the same FIFO.
func TestWatcherWriterRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	w := watch(t, path, "VI_1")
	write, closeIt := writer(t, path)
	write(`INSTANCE "VI_1" BACKUP 100`, `INSTANCE "VI_1" MASTER 100`)
	expect(t, w, Backup, Master)
	closeIt()
	e := next(t, w)
	if e.State != Unknown || e.Instance != "VI_1" || e.Line != "" {
		t.Fatalf("change after the writer left: %+v, want UNKNOWN for VI_1 with no line", e)
	}
	if s := w.State(); s != Unknown {
		t.Fatalf("State() = %v after the writer left, want UNKNOWN", s)
	}
	// No writer for a while: the Watcher waits in the poller, without
	// spinning through end of file: over three rechecks of the path,
	// every read waited out its deadline (the reader rechecked the path
	// at each and woke for nothing else), and it used little CPU.
	before := cpuTime(t)
	wakes, rechecks := w.wakes.Load(), w.rechecks.Load()
	waitFor(t, "three rechecks without a writer", func() bool { return w.rechecks.Load() >= rechecks+3 })
	noChange(t, w)
	if n := w.wakes.Load() - wakes; n != 0 {
		t.Errorf("the reader woke %d times in three rechecks without a writer: the Watcher spins", n)
	}
	if used := cpuTime(t) - before; used > 3*recheckEvery/5 {
		t.Errorf("the process used %v of CPU in three rechecks without a writer: the Watcher spins", used)
	}

	write2, closeIt2 := writer(t, path)
	write2(`INSTANCE "VI_1" BACKUP 100`, `INSTANCE "VI_1" MASTER 100`)
	expect(t, w, Backup, Master)
	// A stop: STOP, then end of file.
	write2(`INSTANCE "VI_1" STOP 100`)
	closeIt2()
	expect(t, w, Stop, Unknown)
}

// keepalived unlinks a FIFO it created when it exits, and the next one
// creates another at the same path: the Watcher must follow the path.
func TestWatcherFollowsReplacedFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	w := watch(t, path, "VI_1")
	write, closeIt := writer(t, path)
	write(`INSTANCE "VI_1" MASTER 100`)
	expect(t, w, Master)
	w.mu.Lock()
	first := w.f
	w.mu.Unlock()
	closeIt()
	expect(t, w, Unknown)
	// Let the Watcher reopen the old FIFO before it goes, so that it
	// must notice the change by checking the path.
	waitFor(t, "the Watcher reopens the FIFO", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.f != nil && w.f != first
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// The Watcher notices the missing path within recheckEvery and makes
	// a new FIFO; or a keepalived starting now makes it first.
	if err := unix.Mkfifo(path, 0o600); err != nil && err != unix.EEXIST {
		t.Fatal(err)
	}
	write2, closeIt2 := writer(t, path)
	write2(`INSTANCE "VI_1" BACKUP 100`)
	expect(t, w, Backup)

	// Replaced while a writer is still connected to the old FIFO: the
	// Watcher stays with it, since a writer holding a FIFO keeps it
	// alive and may write more; it moves on when that writer leaves.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	write3, _ := writer(t, path)
	write3(`INSTANCE "VI_1" FAULT 100`)
	write2(`INSTANCE "VI_1" MASTER 100`)
	expect(t, w, Master)
	closeIt2()
	expect(t, w, Unknown, Fault)
}

func TestWatcherCloseUnblocks(t *testing.T) {
	for _, name := range []string{"no writer ever", "writer connected", "writer gone"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "notify")
			w, err := Watch(context.Background(), path, "VI_1")
			if err != nil {
				t.Fatal(err)
			}
			switch name {
			case "writer connected":
				write, _ := writer(t, path)
				write(`INSTANCE "VI_1" MASTER 100`)
				expect(t, w, Master)
			case "writer gone":
				write, closeIt := writer(t, path)
				write(`INSTANCE "VI_1" MASTER 100`)
				closeIt()
				expect(t, w, Master, Unknown)
			}
			start := time.Now()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close took %v", d)
			}
			if _, ok := <-w.Changes(); ok {
				t.Error("Changes not closed after Close")
			}
			if err := w.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("Close removed the FIFO, which a running keepalived may hold: %v", err)
			}
		})
	}
}

func TestWatcherStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Watch(ctx, filepath.Join(t.TempDir(), "notify"), "VI_1")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// A context that has ended already.
	w2, err := Watch(ctx, filepath.Join(t.TempDir(), "notify"), "VI_1")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w2.Changes():
		if ok {
			t.Fatal("a change after cancel")
		}
	case <-time.After(wait):
		t.Fatal("Changes still open when Watch was given an ended context")
	}
	select {
	case _, ok := <-w.Changes():
		if ok {
			t.Fatal("a change after cancel")
		}
	case <-time.After(wait):
		t.Fatal("Changes still open after the context ended")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A consumer that does not read: the reader goes on (or keepalived would
// lose lines), Changes keeps the latest 16 changes, ending with the
// current state.
func TestWatcherSlowConsumer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	w := watch(t, path, "VI_1")
	write, _ := writer(t, path)
	var lines []string
	for i := range 101 {
		s := "BACKUP"
		if i%2 == 0 {
			s = "MASTER"
		}
		lines = append(lines, `INSTANCE "VI_1" `+s+` `+strconv.Itoa(i))
	}
	applied := w.applied.Load()
	write(lines...)
	// The last line is MASTER 100: wait until the reader has applied it,
	// and every line before it.
	waitFor(t, "the reader applies every line", func() bool { return w.applied.Load() == applied+uint64(len(lines)) })
	var got []Event
	for len(w.Changes()) > 0 {
		got = append(got, <-w.Changes())
	}
	if len(got) != changesBuffer {
		t.Fatalf("%d changes buffered, want %d", len(got), changesBuffer)
	}
	if first, last := got[0].Priority, got[len(got)-1]; first != 100-changesBuffer+1 || last.Priority != 100 || last.State != Master {
		t.Fatalf("buffered changes run from priority %d to %+v, want the latest %d ending with MASTER 100", first, last, changesBuffer)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Priority != got[i-1].Priority+1 {
			t.Fatalf("buffered changes out of order: %d after %d", got[i].Priority, got[i-1].Priority)
		}
	}
}

func TestWatchRefuses(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := unix.Mkfifo(open, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o622); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, instance, says string }{
		{plain, "VI_1", "not a FIFO"},
		{open, "VI_1", "lets group or others write it"},
		{filepath.Join(dir, "none", "notify"), "VI_1", "creating notify FIFO"},
		{filepath.Join(dir, "ok"), "", "empty instance name"},
	} {
		w, err := Watch(context.Background(), c.path, c.instance)
		if err == nil {
			w.Close()
			t.Errorf("Watch(%s, %q) succeeded, want an error saying %q", c.path, c.instance, c.says)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("Watch(%s, %q): %v, want it to say %q", c.path, c.instance, err, c.says)
		}
	}
}

func TestApply(t *testing.T) {
	line := func(s string) Event {
		e, err := ParseLine(s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, c := range []struct {
		cur  State
		line string
		want State
	}{
		{Unknown, `INSTANCE "VI_1" MASTER 100`, Master},
		{Master, `INSTANCE "VI_1" BACKUP 100`, Backup},
		{Master, `INSTANCE "VI_2" BACKUP 100`, Master},
		{Master, `GROUP "VI_1" BACKUP 0`, Master},
		{Unknown, `INSTANCE "VI_1" MASTER_RX_LOWER_PRI 100`, Master},
		{Master, `INSTANCE "VI_1" DELETED 100`, Stop},
		{Backup, `INSTANCE "VI_1" BACKUP_PRIORITY 80`, Backup},
	} {
		if got := apply(c.cur, "VI_1", line(c.line)); got != c.want {
			t.Errorf("apply(%v, %q) = %v, want %v", c.cur, c.line, got, c.want)
		}
	}
}

// cpuTime returns the CPU time the test process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
