package vrrp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// CmdFunc makes the command that runs a program, like exec.Command; a
// caller passes one that runs it elsewhere, such as in a network namespace
// (ip netns exec NS ...). The command must be the program's own process,
// not a shell that forks it, so that signals reach keepalived.
type CmdFunc func(name string, args ...string) *exec.Cmd

// stopTimeout bounds how long Stop waits for keepalived to exit after
// SIGTERM before it kills it. keepalived needs about a second: it sends
// a priority-0 advert as master, writes STOP to the FIFO and waits for its
// child. A variable for tests.
var stopTimeout = 5 * time.Second

// Process is a running keepalived: the parent process and its VRRP child.
type Process struct {
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when the parent has exited
	err  error         // the parent's exit, set before done is closed

	mu      sync.Mutex
	stopped bool
}

// Start validates cfg, writes it to dir/keepalived.conf and runs
//
//	keepalived --dont-fork --log-console --no-syslog --vrrp
//	    --use-file dir/keepalived.conf
//	    --pid dir/keepalived.pid --vrrp_pid dir/vrrp.pid
//
// through cmdFunc (exec.Command when nil), in a process group of its own,
// with its output appended to dir/keepalived.log. --dont-fork keeps the
// parent in the foreground, so that it is the command's process; the pid
// files in dir, which keepalived otherwise keeps in /run, let several run
// on one machine; --vrrp runs the VRRP child only, not the health checker.
// The notify FIFO is keepalived's to create if it is missing, but watch it
// first (Watch), or the first lines are lost. dir belongs to one keepalived
// at a time: Start removes pid files a killed one left there. When ctx
// ends the process is stopped as by Stop.
func Start(ctx context.Context, cmdFunc CmdFunc, cfg Config, dir string) (*Process, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cmdFunc == nil {
		cmdFunc = exec.Command
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("vrrp: keepalived directory %s: %w", dir, err)
	}
	conf := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(conf, []byte(cfg.Render()), 0o600); err != nil {
		return nil, fmt.Errorf("vrrp: writing keepalived config: %w", err)
	}
	// A killed keepalived leaves its pid files, and a new one refuses to
	// start while the pid in them lives, as a killed VRRP child does
	// until init reaps it. dir is this keepalived's alone, so the files
	// are stale.
	for _, f := range []string{"keepalived.pid", "vrrp.pid"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("vrrp: removing stale pid file: %w", err)
		}
	}
	logPath := filepath.Join(dir, "keepalived.log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("vrrp: keepalived log: %w", err)
	}
	cmd := cmdFunc("keepalived",
		"--dont-fork", "--log-console", "--no-syslog", "--vrrp",
		"--use-file", conf,
		"--pid", filepath.Join(dir, "keepalived.pid"),
		"--vrrp_pid", filepath.Join(dir, "vrrp.pid"),
	)
	cmd.Stdout, cmd.Stderr = log, log
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("vrrp: starting keepalived for instance %s (%s): %w", cfg.Instance, strings.Join(cmd.Args, " "), err)
	}
	p := &Process{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Stop()
		case <-p.done:
		}
	}()
	return p, nil
}

// Pid returns the keepalived parent's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file keepalived logs to.
func (p *Process) LogPath() string { return filepath.Join(p.dir, "keepalived.log") }

// Exited is closed when the keepalived parent has exited, for whatever
// reason.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Stop is a planned stop: SIGTERM to keepalived, which as master sends a
// priority-0 advert (the backup takes over after the skew time instead of
// the full master-down interval) and writes STOP to the FIFO. It waits
// until keepalived has exited; if that takes more than 5 s, it kills it
// and says so. It also reports a keepalived that failed: one that exited
// with an error before Stop (a configuration it refused, say) or after
// SIGTERM. Stop after Stop or Kill does nothing.
func (p *Process) Stop() error {
	if !p.begin() {
		<-p.done
		return nil
	}
	exited := func() error {
		if p.err != nil {
			return fmt.Errorf("vrrp: keepalived %d had exited: %w (log %s)", p.Pid(), p.err, p.LogPath())
		}
		return nil
	}
	select {
	case <-p.done:
		return exited()
	default:
	}
	// os.Process signals through a pidfd: an exited (even reaped)
	// keepalived cannot make this hit another process.
	err := p.cmd.Process.Signal(sigterm)
	if errors.Is(err, os.ErrProcessDone) {
		<-p.done
		return exited()
	}
	if err != nil {
		err = fmt.Errorf("vrrp: SIGTERM to keepalived %d: %w; killed it", p.Pid(), err)
	} else {
		select {
		case <-p.done:
			if p.err != nil {
				return fmt.Errorf("vrrp: keepalived %d after SIGTERM: %w (log %s)", p.Pid(), p.err, p.LogPath())
			}
			return nil
		case <-time.After(stopTimeout):
		}
		err = fmt.Errorf("vrrp: keepalived %d did not exit within %v of SIGTERM; killed it (log %s)", p.Pid(), stopTimeout, p.LogPath())
	}
	p.killAll()
	<-p.done
	return err
}

// Kill is a crash: SIGKILL to the parent and the VRRP child at once, so
// that neither sends a last advert nor writes to the FIFO. Backups take
// over after the master-down interval. It waits until the parent has
// exited.
func (p *Process) Kill() error {
	p.begin()
	p.killAll()
	<-p.done
	return nil
}

// begin marks the process as being stopped and reports whether it was
// not already.
func (p *Process) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.stopped = true
	return true
}

// killAll sends SIGKILL to keepalived's process group: the parent and
// the VRRP child at once. Only while the parent has not been reaped: until
// then its pid, which is the group's id, cannot be reused.
func (p *Process) killAll() {
	select {
	case <-p.done:
	default:
		killGroup(p.Pid())
	}
}
