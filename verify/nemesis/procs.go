package nemesis

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Procs keeps one running process per node and gives Processes its Pause,
// Resume and Kill; a test's cluster embeds it and adds Restart, which only
// it knows how to do. Safe for concurrent use; the zero value is ready.
type Procs struct {
	mu sync.Mutex
	m  map[string]*proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// Add takes over a started process as node's: Procs reaps it, so its
// owner must not call Wait.
func (p *Procs) Add(node string, cmd *exec.Cmd) {
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(pr.done) }()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*proc{}
	}
	p.m[node] = pr
}

func (p *Procs) get(node string) *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[node]
}

// Running says node has a process that has not exited.
func (p *Procs) Running(node string) bool {
	pr := p.get(node)
	if pr == nil {
		return false
	}
	select {
	case <-pr.done:
		return false
	default:
		return true
	}
}

// Pause stops node's process with SIGSTOP.
func (p *Procs) Pause(node string) error {
	pr := p.get(node)
	if pr == nil {
		return fmt.Errorf("%s is not running", node)
	}
	return pr.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume continues node's process with SIGCONT; a node that is not running
// is as resumed as it gets.
func (p *Procs) Resume(node string) error {
	pr := p.get(node)
	if pr == nil {
		return nil
	}
	return pr.cmd.Process.Signal(syscall.SIGCONT)
}

// Kill kills node's process with SIGKILL and returns once it is reaped;
// the node then has no process until the next Add.
func (p *Procs) Kill(node string) error {
	p.mu.Lock()
	pr := p.m[node]
	delete(p.m, node)
	p.mu.Unlock()
	if pr == nil {
		return fmt.Errorf("%s is not running", node)
	}
	if err := pr.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-pr.done
	return nil
}

// StopAll ends every process: SIGCONT (a paused one could not act on what
// follows) and SIGTERM, then SIGKILL for those still there after grace.
func (p *Procs) StopAll(grace time.Duration) {
	p.mu.Lock()
	all := p.m
	p.m = nil
	p.mu.Unlock()
	for _, pr := range all {
		_ = pr.cmd.Process.Signal(syscall.SIGCONT)
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, pr := range all {
		select {
		case <-pr.done:
		case <-time.After(grace):
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}

// Pid returns node's process id, and false when node has no process.
func (p *Procs) Pid(node string) (int, bool) {
	pr := p.get(node)
	if pr == nil {
		return 0, false
	}
	return pr.cmd.Process.Pid, true
}

// LogTail returns the last n lines of the log at path (read from its last
// 8 KiB), joined by " | ": what a process said before it died, for the
// errors that report it. A log that cannot be read gives "".
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, window))
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
