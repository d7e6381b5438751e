package control

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Local runs commands on this machine. Wrap, when set, is put before every
// command: []string{"ip", "netns", "exec", "ns1"} runs them in a network
// namespace, []string{"nsenter", "-t", PID, "-a"} in another process's.
type Local struct {
	// Node is the name Name returns (default "local").
	Node string
	// Wrap is a command prefix, see Local.
	Wrap []string
	// Sudo runs every line through sudo -n.
	Sudo bool
}

// Name returns l.Node, or "local".
func (l *Local) Name() string {
	if l.Node == "" {
		return "local"
	}
	return l.Node
}

// Close does nothing: a Local holds no connection.
func (l *Local) Close() error { return nil }

// Run runs c.Line with sh on this machine.
func (l *Local) Run(ctx context.Context, c Cmd) (Result, error) {
	argv := append(append([]string(nil), l.Wrap...), shellLine(c.Line, l.Sudo)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// When ctx ends the whole process group goes, so that no child of the
	// line keeps its output pipes open (Wait would wait for it); daemons
	// are not in it, Start puts them in sessions of their own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdin = c.Stdin
	out := &capped{max: MaxOutput}
	errOut := &capped{max: MaxOutput}
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	} else {
		cmd.Stdout = out
	}
	cmd.Stderr = errOut
	err := cmd.Run()
	res := Result{Stdout: out.buf.Bytes(), Stderr: errOut.buf.Bytes(), Truncated: out.dropped || errOut.dropped}
	if ctx.Err() != nil {
		return res, fmt.Errorf("control: %s: %s: %w (%w)", l.Name(), short(c.Line), ErrUnknown, ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &ee):
		res.Exit = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Exit = -1
			res.Signal = signalName(ws.Signal())
		}
		return res, nil
	default:
		return res, fmt.Errorf("control: %s: %s: %w", l.Name(), short(c.Line), err)
	}
}
