package history

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits bound what ReadInput takes in, so that no input (an endless
// device, a line with no end, a file larger than memory) can exhaust the
// reader's memory: the bound is checked as the bytes arrive, not after.
type Limits struct {
	// MaxBytes bounds the input's size in bytes; 0 means no bound.
	MaxBytes int64
	// MaxLine bounds one line in bytes, newline excluded; 0 means no
	// bound. Every format is bound alike: a JSON array or an EDN vector
	// written on one line counts as one line.
	MaxLine int64
}

// ReadInput reads a whole input within ctx and lim. It stops at the first
// byte beyond a bound with an *InputError naming the line, and when ctx is
// done with an error wrapping ctx.Err() (a reader that supports read
// deadlines, such as a pipe opened by OpenInput, is interrupted even while
// it blocks).
func ReadInput(ctx context.Context, name string, r io.Reader, lim Limits) ([]byte, error) {
	l := newLimitReader(ctx, name, r, lim)
	defer l.stop()
	var data []byte
	buf := make([]byte, chunk)
	for {
		n, err := l.Read(buf)
		data = append(data, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// chunk is how much ReadInput asks for at a time: the deadline and the
// bounds are checked between chunks.
const chunk = 64 << 10

// LimitError is input beyond a bound of Limits: bad input, refused.
type LimitError struct {
	File string
	// Line is the line longer than Limit; 0 when the whole input is
	// larger than Limit.
	Line  int
	Limit int64
	// Size is the input's size when it was known before reading; else 0.
	Size int64
	// Parsed says the bound is on the parsed events' memory
	// (ParseLimited), reached at Line.
	Parsed bool
}

func (e *LimitError) Error() string {
	switch {
	case e.Parsed:
		return fmt.Sprintf("%s:%d: the events up to this line take more than %s once parsed, the most this reader takes", e.File, e.Line, Size(e.Limit))
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: line %d is longer than %s, the longest line this reader takes", e.File, e.Line, e.Line, Size(e.Limit))
	case e.Size > 0:
		return fmt.Sprintf("%s: the file holds %s, more than the %s this reader takes", e.File, Size(e.Size), Size(e.Limit))
	}
	return fmt.Sprintf("%s: the input is larger than %s, the most this reader takes", e.File, Size(e.Limit))
}

// ReadError is a read that failed or ran out of time, with how far it got.
type ReadError struct {
	File string
	Err  error
	// Bytes is how much was read; Line the line the reader was on.
	Bytes int64
	Line  int
}

func (e *ReadError) Error() string {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("%s: timed out while reading, after %d bytes (on line %d)", e.File, e.Bytes, e.Line)
	}
	return fmt.Sprintf("%s: reading: %v", e.File, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// OpenInput opens a history file for ReadInput. Regular files and pipes
// (a FIFO, or a shell's process substitution) are accepted; directories,
// devices and sockets are refused, since /dev/zero or a terminal would be
// read without end. Opening a FIFO waits for its writer no longer than
// ctx allows.
func OpenInput(ctx context.Context, name string) (*os.File, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	switch m := st.Mode(); {
	case m.IsRegular():
		return os.Open(name)
	case m&fs.ModeNamedPipe != 0:
		return openFIFO(ctx, name)
	case m.IsDir():
		return nil, &InputError{File: name, Msg: "is a directory, not a history file"}
	case m&fs.ModeCharDevice != 0:
		return nil, &InputError{File: name, Msg: "is a character device, not a history file (give a regular file or a pipe)"}
	case m&fs.ModeDevice != 0:
		return nil, &InputError{File: name, Msg: "is a block device, not a history file (give a regular file or a pipe)"}
	case m&fs.ModeSocket != 0:
		return nil, &InputError{File: name, Msg: "is a socket, not a history file (give a regular file or a pipe)"}
	}
	return nil, &InputError{File: name, Msg: fmt.Sprintf("is not a regular file or a pipe (mode %s)", st.Mode())}
}

// openFIFO opens a FIFO for reading. open(2) blocks until a writer opens
// it; when ctx ends first, a writer opened here without blocking (which
// succeeds, as a reader is waiting) releases the blocked open, so that no
// thread is left behind.
func openFIFO(ctx context.Context, name string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(name)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-ctx.Done():
	}
	for {
		w, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			w.Close()
		}
		select {
		case o := <-ch:
			if o.f != nil {
				o.f.Close()
			}
		case <-time.After(10 * time.Millisecond):
			// The reader was not waiting yet (ENXIO): try again.
			continue
		}
		break
	}
	return nil, &ReadError{File: name, Err: ctx.Err()}
}

// Size renders a byte count in the units --max-memory takes.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseSize reads a size such as 4GiB, 512MiB, 100MB or 1048576: a
// positive integer and an optional unit, the inverse of Size.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive size such as 4GiB, 512MiB or 1048576", s)
	}
	return n * mult, nil
}
