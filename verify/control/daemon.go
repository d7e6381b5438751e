package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Daemon is a long-running program on a node, started in the background
// with its output in a log file and its pid in a pid file, both in Dir.
type Daemon struct {
	// Name names the files: Dir/Name.log and Dir/Name.pid.
	Name string
	// Dir is an absolute folder on the node; it is created, and the
	// daemon runs in it.
	Dir string
	// Argv is the program and its arguments.
	Argv []string
	// Env holds KEY=VALUE pairs added to the daemon's environment.
	Env []string
}

// Proc is one running process on a node. Start is its start time in clock
// ticks since boot (/proc/PID/stat), which tells it apart from a later
// process given the same pid.
type Proc struct {
	Pid   int
	Start uint64
}

// LogPath is the daemon's log file on the node.
func (d Daemon) LogPath() string { return path.Join(d.Dir, d.Name+".log") }

// PidPath is the daemon's pid file on the node.
func (d Daemon) PidPath() string { return path.Join(d.Dir, d.Name+".pid") }

var daemonNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func (d Daemon) check() error {
	switch {
	case !daemonNameRE.MatchString(d.Name):
		return fmt.Errorf("control: daemon name %q: want letters, digits, '_', '.', '-'", d.Name)
	case !path.IsAbs(d.Dir):
		return fmt.Errorf("control: daemon %s: folder %q is not absolute", d.Name, d.Dir)
	case len(d.Argv) == 0 || d.Argv[0] == "":
		return fmt.Errorf("control: daemon %s: no program", d.Name)
	}
	for _, e := range d.Env {
		if !envRE.MatchString(e) {
			return fmt.Errorf("control: daemon %s: environment entry %q: want KEY=VALUE", d.Name, e)
		}
	}
	return nil
}

// exitGone is the status of the lines below when the process is not
// there (or is another process with its pid).
const exitGone = 3

// ErrGone is returned by Signal when the process has exited.
var ErrGone = errors.New("process is gone")

// statLine prints PID's state and start time ("S 123456"), or exits
// exitGone: the command field of /proc/PID/stat may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func statLine(pid string) string {
	return statFields(pid) + `; echo "$1 ${20}"`
}

// statFields sets $1 to PID's state and ${20} to its start time, or exits
// exitGone.
func statFields(pid string) string {
	return fmt.Sprintf(`s=$(cat /proc/%s/stat 2>/dev/null) || exit %d; set -- ${s##*) }`, pid, exitGone)
}

// Start starts d on r unless its pid file names a live process, and
// returns the new process. It fails when the program exits at once (a bad
// path, a bad flag), with the log's last lines.
func Start(ctx context.Context, r Remote, d Daemon) (Proc, error) {
	if err := d.check(); err != nil {
		return Proc{}, err
	}
	if p, err := Find(ctx, r, d); err == nil {
		return Proc{}, fmt.Errorf("control: %s: daemon %s is already running (pid %d)", r.Name(), d.Name, p.Pid)
	} else if !errors.Is(err, ErrGone) {
		return Proc{}, err
	}
	env := ""
	if len(d.Env) > 0 {
		env = "env " + Line(d.Env...) + " "
	}
	// setsid: the daemon leaves the session's process group, so that
	// neither sshd's hangup nor a signal to the starting shell reaches it;
	// its streams go to the log so that the session can end.
	// The pid file holds the pid and its start time, written once the
	// program runs: a pid file outliving its process (a reboot, a kill)
	// must not name whatever process gets the pid next.
	pidTmp := Quote(d.PidPath() + ".tmp")
	line := fmt.Sprintf("set -e; se=$(readlink -f \"$(command -v setsid)\"); mkdir -p %s; cd %s; %ssetsid %s >>%s 2>&1 </dev/null & pid=$!; set +e; %s%s; echo \"$pid ${20}\" > %s && mv -f %s %s; echo \"$1 ${20} $pid\"",
		Quote(d.Dir), Quote(d.Dir), env, Line(d.Argv...), Quote(d.LogPath()),
		waitExec, statFields("$pid"), pidTmp, pidTmp, Quote(d.PidPath()))
	res, err := r.Run(ctx, Cmd{Line: line})
	if err != nil {
		return Proc{}, err
	}
	if res.Exit == exitGone {
		return Proc{}, fmt.Errorf("control: %s: daemon %s exited at once: %s", r.Name(), d.Name, tail(ctx, r, d))
	}
	if res.Exit != 0 || res.Signal != "" {
		return Proc{}, &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 3 {
		return Proc{}, fmt.Errorf("control: %s: daemon %s: unreadable start %q", r.Name(), d.Name, res.Stdout)
	}
	st, start, err := parseStat(f[0] + " " + f[1])
	if err != nil {
		return Proc{}, fmt.Errorf("control: %s: daemon %s: %w", r.Name(), d.Name, err)
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		return Proc{}, fmt.Errorf("control: %s: daemon %s: unreadable pid %q", r.Name(), d.Name, f[2])
	}
	if st == 'Z' || st == 'X' {
		return Proc{}, fmt.Errorf("control: %s: daemon %s exited at once: %s", r.Name(), d.Name, tail(ctx, r, d))
	}
	return Proc{Pid: pid, Start: start}, nil
}

// waitExec waits, in Start's line, until the new process is neither the
// shell's fork that has not yet run setsid (its command line is still the
// shell's own) nor setsid: it has either become the program or failed to,
// and exited (a zombie's exe cannot be read). Without it a program that
// cannot be executed would look started; without the first condition it
// did on a loaded machine, when the line looked before the fork had run
// setsid (CI, two suites at once: TestDaemonBadInput's missing program
// "started"). The bound (10 s) only keeps a wedged machine from holding
// the line for ever.
const waitExec = `me=$(tr -d '\0' </proc/$$/cmdline); i=0; while { [ "$(readlink /proc/$pid/exe 2>/dev/null)" = "$se" ] || [ "$(tr -d '\0' </proc/$pid/cmdline 2>/dev/null)" = "$me" ]; } && [ $i -lt 1000 ]; do i=$((i+1)); sleep 0.01; done; `

// tail is the log's last lines for an error message.
func tail(ctx context.Context, r Remote, d Daemon) string {
	var b strings.Builder
	if _, err := FetchTail(ctx, r, d.LogPath(), &b, 2000); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(b.String())
	if s == "" {
		return "(its log " + d.LogPath() + " is empty)"
	}
	return "its log ends: " + s
}

// Find returns the live process d's pid file names, or an error wrapping
// ErrGone when there is none.
func Find(ctx context.Context, r Remote, d Daemon) (Proc, error) {
	if err := d.check(); err != nil {
		return Proc{}, err
	}
	line := fmt.Sprintf("cat %s 2>/dev/null || exit %d", Quote(d.PidPath()), exitGone)
	res, err := r.Run(ctx, Cmd{Line: line})
	if err != nil {
		return Proc{}, err
	}
	if res.Exit == exitGone {
		return Proc{}, fmt.Errorf("control: %s: daemon %s: no pid file: %w", r.Name(), d.Name, ErrGone)
	}
	f := strings.Fields(string(res.Stdout))
	var pid int
	var want uint64
	if len(f) == 2 {
		pid, err = strconv.Atoi(f[0])
		if err == nil {
			want, err = strconv.ParseUint(f[1], 10, 64)
		}
	}
	if len(f) != 2 || err != nil || pid <= 0 {
		return Proc{}, fmt.Errorf("control: %s: pid file %s holds %q, not a pid and its start time", r.Name(), d.PidPath(), clip(string(res.Stdout)))
	}
	st, start, err := stat(ctx, r, pid)
	if err != nil {
		return Proc{}, err
	}
	if st == 0 || st == 'Z' || st == 'X' || start != want {
		return Proc{}, fmt.Errorf("control: %s: daemon %s: pid %d: %w", r.Name(), d.Name, pid, ErrGone)
	}
	return Proc{Pid: pid, Start: start}, nil
}

// ProcOf returns the live process pid on r as a Proc, its start time
// read now, so that a process started some other way (a child of the
// harness itself) can be signalled and checked like a daemon. The error
// wraps ErrGone when there is no such process.
func ProcOf(ctx context.Context, r Remote, pid int) (Proc, error) {
	st, start, err := stat(ctx, r, pid)
	if err != nil {
		return Proc{}, err
	}
	if st == 0 || st == 'Z' || st == 'X' {
		return Proc{}, fmt.Errorf("control: %s: pid %d: %w", r.Name(), pid, ErrGone)
	}
	return Proc{Pid: pid, Start: start}, nil
}

// stat returns pid's state letter and start time, or state 0 when there
// is no such process.
func stat(ctx context.Context, r Remote, pid int) (byte, uint64, error) {
	line := statLine(strconv.Itoa(pid))
	res, err := r.Run(ctx, Cmd{Line: line})
	if err != nil {
		return 0, 0, err
	}
	if res.Exit == exitGone {
		return 0, 0, nil
	}
	if res.Exit != 0 {
		return 0, 0, &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	st, start, err := parseStat(string(res.Stdout))
	if err != nil {
		return 0, 0, fmt.Errorf("control: %s: pid %d: %w", r.Name(), pid, err)
	}
	return st, start, nil
}

func parseStat(s string) (byte, uint64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("unreadable /proc stat %q", s)
	}
	start, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("unreadable start time in /proc stat %q", s)
	}
	return f[0][0], start, nil
}

// State is what the kernel says a process is doing.
type State int

// The states a check can find.
const (
	// Gone: no such process, a zombie, or another process with its pid.
	Gone State = iota
	// Running: running or sleeping, anything but stopped.
	Running
	// Stopped: stopped by a signal (SIGSTOP) or traced.
	Stopped
)

// String names the state as messages show it.
func (s State) String() string {
	switch s {
	case Gone:
		return "gone"
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// StateOf reads p's state on r.
func StateOf(ctx context.Context, r Remote, p Proc) (State, error) {
	st, start, err := stat(ctx, r, p.Pid)
	if err != nil {
		return Gone, err
	}
	switch {
	case st == 0, start != p.Start, st == 'Z', st == 'X', st == 'x':
		return Gone, nil
	case st == 'T', st == 't':
		return Stopped, nil
	}
	return Running, nil
}

var signalRE = regexp.MustCompile(`^[A-Z][A-Z0-9]*$`)

// Signal sends sig ("STOP", "CONT", "KILL", "TERM") to p on r. It checks
// p's start time in the same command, so that a pid the kernel has given
// to another process is not signalled; then it returns an error wrapping
// ErrGone.
func Signal(ctx context.Context, r Remote, p Proc, sig string) error {
	if !signalRE.MatchString(sig) {
		return fmt.Errorf("control: signal %q: want a name such as TERM or KILL", sig)
	}
	line := fmt.Sprintf(`%s; [ "$1" != Z ] && [ "${20}" = %d ] || exit %d; kill -s %s %d`,
		statFields(strconv.Itoa(p.Pid)), p.Start, exitGone, sig, p.Pid)
	res, err := r.Run(ctx, Cmd{Line: line})
	if err != nil {
		return err
	}
	if res.Exit == exitGone {
		return fmt.Errorf("control: %s: SIG%s to pid %d: %w", r.Name(), sig, p.Pid, ErrGone)
	}
	if res.Exit != 0 || res.Signal != "" {
		return &ExitError{Node: r.Name(), Line: line, Result: res}
	}
	return nil
}

// pollEvery is how often Stop and the verified faults read a process's
// state: each read is one command on the node.
const pollEvery = 50 * time.Millisecond

// waitState reads p's state until want or until ctx ends, and returns the
// last state read and how many reads it took. A read cut short by ctx's
// end does not count: the state reported is the last one the node gave,
// not the Gone of an unanswered read.
func waitState(ctx context.Context, r Remote, p Proc, want State) (State, int, error) {
	last := Gone
	for reads := 1; ; reads++ {
		st, err := StateOf(ctx, r, p)
		if err != nil {
			if reads > 1 {
				st = last
			}
			return st, reads, err
		}
		last = st
		if st == want {
			return st, reads, nil
		}
		select {
		case <-ctx.Done():
			return st, reads, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// Stop stops p: SIGTERM, then SIGKILL if it is still there after grace
// (a stopped process is continued first, or TERM would wait for ever).
// It returns once the process is gone.
func Stop(ctx context.Context, r Remote, p Proc, grace time.Duration) error {
	for _, sig := range []string{"TERM", "CONT"} {
		if err := Signal(ctx, r, p, sig); errors.Is(err, ErrGone) {
			return nil
		} else if err != nil {
			return err
		}
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	st, _, err := waitState(gctx, r, p, Gone)
	cancel()
	if st == Gone && err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("control: %s: stopping pid %d: %w", r.Name(), p.Pid, ctx.Err())
	}
	if err := Signal(ctx, r, p, "KILL"); err != nil && !errors.Is(err, ErrGone) {
		return err
	}
	if _, _, err := waitState(ctx, r, p, Gone); err != nil {
		return fmt.Errorf("control: %s: pid %d still there after SIGKILL: %w", r.Name(), p.Pid, err)
	}
	return nil
}

// Logs copies the last max bytes of d's log on r to w.
func Logs(ctx context.Context, r Remote, d Daemon, w io.Writer, max int64) (int64, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	return FetchTail(ctx, r, d.LogPath(), w, max)
}
