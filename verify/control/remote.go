package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Remote runs commands on one node.
type Remote interface {
	// Run runs c.Line with sh on the node and waits for it. The error is
	// nil whenever the command ran to an exit status, zero or not; it is
	// non-nil when the command could not be started, or when its outcome
	// is unknown (the connection was lost, ctx ended): then it may or may
	// not have taken effect, and an error wrapping ErrUnknown says so.
	Run(ctx context.Context, c Cmd) (Result, error)
	// Name is the node's name, for messages.
	Name() string
	// Close releases the remote's connections. Daemons it started keep
	// running.
	Close() error
}

// Cmd is one command to run on a node.
type Cmd struct {
	// Line is a sh command line; Line(argv...) builds one from words.
	Line string
	// Stdin, when set, is copied to the command's standard input.
	Stdin io.Reader
	// Stdout, when set, receives the command's standard output as it comes,
	// unbounded, instead of Result.Stdout.
	Stdout io.Writer
}

// MaxOutput bounds what Result keeps of each of a command's streams; the
// rest is read and dropped, and Result.Truncated is set.
const MaxOutput = 1 << 20

// Result is how a command ended.
type Result struct {
	// Stdout and Stderr are the first MaxOutput bytes of each stream
	// (Stdout is empty when Cmd.Stdout was set).
	Stdout, Stderr []byte
	// Truncated is set when a stream had more than MaxOutput bytes.
	Truncated bool
	// Exit is the exit status, or -1 when a signal ended the command.
	Exit int
	// Signal names the signal that ended the command ("KILL"), or "".
	Signal string
}

// ErrUnknown is wrapped by Run's errors when the command may have run: the
// connection dropped or the context ended while it was running.
var ErrUnknown = errors.New("outcome unknown")

// ExitError is a command that ran but did not exit 0, as Output reports it.
type ExitError struct {
	Node   string
	Line   string
	Result Result
}

// Error names the node, the line, how it ended and the end of its stderr.
func (e *ExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.Result.Exit)
	if e.Result.Signal != "" {
		how = "killed by SIG" + e.Result.Signal
	}
	msg := strings.TrimSpace(string(e.Result.Stderr))
	if len(msg) > 500 {
		msg = msg[len(msg)-500:]
	}
	if msg != "" {
		return fmt.Sprintf("control: %s: %s: %s: %s", e.Node, short(e.Line), how, msg)
	}
	return fmt.Sprintf("control: %s: %s: %s", e.Node, short(e.Line), how)
}

// short keeps an error's command line readable.
func short(line string) string {
	if len(line) > 200 {
		return line[:200] + "…"
	}
	return line
}

// Output runs line on r and returns its standard output, or an *ExitError
// (carrying stderr) when it exits non-zero.
func Output(ctx context.Context, r Remote, line string) (string, error) {
	res, err := r.Run(ctx, Cmd{Line: line})
	if err != nil {
		return "", err
	}
	if res.Exit != 0 || res.Signal != "" {
		return "", &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	return string(res.Stdout), nil
}

// Quote returns s as one sh word: in single quotes, with each single quote
// closed, escaped and reopened. Words of only safe characters stay bare so
// that logged lines read as typed.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=:,+@%", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Line quotes each word and joins them into one sh command line.
func Line(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// shellLine is what a remote hands to the node: line under sh, through
// sudo -n when the node asks for it. sh is named even without sudo so that
// a login shell that is not sh (fish, csh) still runs sh syntax.
func shellLine(line string, sudo bool) []string {
	if sudo {
		return []string{"sudo", "-n", "--", "sh", "-c", line}
	}
	return []string{"sh", "-c", line}
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.dropped = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}
