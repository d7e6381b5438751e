package control

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// Upload writes data to the file at dst on r, with mode. It writes a
// temporary file beside dst and renames it, so that a daemon reading dst
// never sees half of it and a dropped connection leaves dst as it was.
func Upload(ctx context.Context, r Remote, data io.Reader, dst string, mode fs.FileMode) error {
	if dst == "" || !path.IsAbs(dst) {
		return fmt.Errorf("control: %s: upload to %q: want an absolute path", r.Name(), dst)
	}
	tmp := dst + ".ipfence-upload"
	line := fmt.Sprintf("set -e; mkdir -p %s; rm -f %s; (umask 077; cat > %s); chmod %o %s; mv -f %s %s",
		Quote(path.Dir(dst)), Quote(tmp), Quote(tmp), mode.Perm(), Quote(tmp), Quote(tmp), Quote(dst))
	res, err := r.Run(ctx, Cmd{Line: line, Stdin: data})
	if err != nil {
		return err
	}
	if res.Exit != 0 || res.Signal != "" {
		return &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	return nil
}

// Fetch copies the first max bytes of the file at src on r to w and
// returns how many it copied.
func Fetch(ctx context.Context, r Remote, src string, w io.Writer, max int64) (int64, error) {
	return copyOut(ctx, r, fmt.Sprintf("head -c %d -- %s", max, Quote(src)), w)
}

// FetchTail copies the last max bytes of the file at src on r to w: the
// end of a log is where a failure is.
func FetchTail(ctx context.Context, r Remote, src string, w io.Writer, max int64) (int64, error) {
	return copyOut(ctx, r, fmt.Sprintf("tail -c %d -- %s", max, Quote(src)), w)
}

func copyOut(ctx context.Context, r Remote, line string, w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	res, err := r.Run(ctx, Cmd{Line: line, Stdout: cw})
	if err != nil {
		return cw.n, err
	}
	if res.Exit != 0 || res.Signal != "" {
		return cw.n, &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	return cw.n, cw.err
}

// countWriter counts and remembers the first error, so that a failing
// local writer is reported rather than lost in the remote's copy.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
