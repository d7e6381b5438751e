package harness

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipfence/ipfence/verify/history"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress counts completions and active faults and shows them: on a
// terminal as one line rewritten in place, otherwise as a plain log line
// every logEvery.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	logEvery time.Duration
	start    time.Time
	limit    time.Duration
	ok, fail int
	info     int
	faults   map[string]bool
	last     time.Time
	drawn    bool
}

func newProgress(w io.Writer, tty bool, limit time.Duration, logEvery time.Duration) *progress {
	return &progress{w: w, tty: tty, limit: limit, logEvery: logEvery, start: time.Now(), faults: map[string]bool{}}
}

// completed counts a client completion.
func (p *progress) completed(t history.Type) {
	p.mu.Lock()
	switch t {
	case history.OK:
		p.ok++
	case history.Fail:
		p.fail++
	default:
		p.info++
	}
	p.mu.Unlock()
}

// fault notes a nemesis operation that starts or stops a fault.
func (p *progress) fault(f string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name, ok := strings.CutPrefix(f, "start-"); ok {
		p.faults[name] = true
	} else if name, ok := strings.CutPrefix(f, "stop-"); ok {
		delete(p.faults, name)
	}
}

// line renders the current state.
func (p *progress) line(now time.Time) string {
	faults := make([]string, 0, len(p.faults))
	for f := range p.faults {
		faults = append(faults, f)
	}
	slices.Sort(faults)
	active := "none"
	if len(faults) > 0 {
		active = strings.Join(faults, ",")
	}
	elapsed := now.Sub(p.start)
	left := ""
	if p.limit > 0 {
		l := max(p.limit-elapsed, 0)
		left = fmt.Sprintf(", %ds left", int(l.Round(time.Second)/time.Second))
	}
	return fmt.Sprintf("%ds: %d ops (ok %d, fail %d, info %d), faults: %s%s",
		int(elapsed/time.Second), p.ok+p.fail+p.info, p.ok, p.fail, p.info, active, left)
}

// tick draws the line if it is due.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", p.line(now))
		p.drawn = true
		return
	}
	if now.Sub(p.last) >= p.logEvery {
		p.last = now
		fmt.Fprintf(p.w, "%s %s\n", now.UTC().Format("15:04:05"), p.line(now))
	}
}

// finish ends the line on a terminal, so what follows starts clean.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", p.line(time.Now()))
		p.drawn = false
	}
}

// logf writes a log line without tearing the progress line.
func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
	fmt.Fprintf(p.w, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}
