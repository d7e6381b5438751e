package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// confirmWithin bounds how long a fault is checked for before it is
// declared not to have taken effect. A signal or an nft transaction acts
// at once; the bound only covers a loaded machine's slow commands (on 2
// shared cores, an open link's probe was seen to time out for 10 s).
const confirmWithin = 30 * time.Second

func within(d time.Duration) time.Duration {
	if d <= 0 {
		return confirmWithin
	}
	return d
}

// Confirmation is the check made after a fault: whether the node is in the
// state the fault should have put it in.
type Confirmation struct {
	// Fault is what was done: pause, resume, kill, partition or heal.
	Fault string
	// Target is the node, or the grudge for a partition.
	Target string
	// Confirmed says the check found what the fault should cause.
	Confirmed bool
	// Checks is how many times the state was read.
	Checks int
	// Detail is what was found ("stopped", "n1→n2 cut, n2→n3 reached").
	Detail string
}

// Ledger keeps every confirmation of a run, in order. It is safe for
// concurrent use.
type Ledger struct {
	mu   sync.Mutex
	list []Confirmation
}

// Add records a confirmation: the faults here record theirs, and a
// suite's own faults may too.
func (l *Ledger) Add(c Confirmation) {
	l.mu.Lock()
	l.list = append(l.list, c)
	l.mu.Unlock()
}

// All returns the confirmations so far.
func (l *Ledger) All() []Confirmation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// Summary says, for each fault, how many were confirmed of how many
// issued: "kill 3/3, pause 4/5".
func (l *Ledger) Summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type count struct{ ok, all int }
	counts := map[string]*count{}
	for _, c := range l.list {
		if counts[c.Fault] == nil {
			counts[c.Fault] = &count{}
		}
		counts[c.Fault].all++
		if c.Confirmed {
			counts[c.Fault].ok++
		}
	}
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d/%d", f, counts[f].ok, counts[f].all))
	}
	if len(parts) == 0 {
		return "no faults"
	}
	return strings.Join(parts, ", ")
}

// ErrNotConfirmed is wrapped by the error of a fault whose effect the
// check did not find: a run must not count it as injected.
var ErrNotConfirmed = errors.New("fault not confirmed")

// Procs runs one daemon per node through the nodes' remotes and carries
// out the process faults of verify/nemesis (its Processes interface),
// each one checked: after a pause the kernel reports the process stopped,
// after a resume not stopped, after a kill the pid gone. A check that does
// not find it within a bound makes the fault's error wrap ErrNotConfirmed.
type Procs struct {
	remotes map[string]Remote
	daemons map[string]Daemon
	// Ready, when set, is what Restart waits for after starting a node's
	// daemon again (its port open, say).
	Ready func(ctx context.Context, node string) error
	// Ledger receives every confirmation.
	Ledger *Ledger
	// ConfirmWithin bounds each check (default 30s).
	ConfirmWithin time.Duration

	mu    sync.Mutex // guards daemons (SetArgv) and procs
	procs map[string]Proc
}

// NewProcs returns the processes of daemons[node] on remotes[node]; every
// node must have both.
func NewProcs(remotes map[string]Remote, daemons map[string]Daemon, ledger *Ledger) (*Procs, error) {
	for node := range daemons {
		if remotes[node] == nil {
			return nil, fmt.Errorf("control: daemon for node %s, which has no remote", node)
		}
	}
	if ledger == nil {
		ledger = &Ledger{}
	}
	return &Procs{remotes: remotes, daemons: daemons, Ledger: ledger, procs: map[string]Proc{}}, nil
}

func (p *Procs) node(node string) (Remote, Daemon, error) {
	p.mu.Lock()
	d, ok := p.daemons[node]
	p.mu.Unlock()
	if !ok {
		return nil, Daemon{}, fmt.Errorf("control: no daemon on node %q", node)
	}
	return p.remotes[node], d, nil
}

// SetArgv changes the program and arguments node's daemon is started with
// from now on (by Start and Restart); a running daemon is left as it is.
// A test that changes how a node must start (an etcd member that joins
// the cluster again, where it first founded it) sets it between a stop and
// the next start.
func (p *Procs) SetArgv(node string, argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("control: %s: SetArgv with no program", node)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.daemons[node]
	if !ok {
		return fmt.Errorf("control: no daemon on node %q", node)
	}
	d.Argv = append([]string(nil), argv...)
	p.daemons[node] = d
	return nil
}

// Argv returns the program and arguments node's daemon is started with.
func (p *Procs) Argv(node string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.daemons[node].Argv...)
}

// Start starts node's daemon.
func (p *Procs) Start(ctx context.Context, node string) error {
	r, d, err := p.node(node)
	if err != nil {
		return err
	}
	proc, err := Start(ctx, r, d)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.procs[node] = proc
	p.mu.Unlock()
	return nil
}

// Proc returns node's process as last started.
func (p *Procs) Proc(node string) (Proc, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proc, ok := p.procs[node]
	return proc, ok
}

// Running says node's daemon is there (running or stopped).
func (p *Procs) Running(ctx context.Context, node string) bool {
	r, _, err := p.node(node)
	proc, ok := p.Proc(node)
	if err != nil || !ok {
		return false
	}
	st, err := StateOf(ctx, r, proc)
	return err == nil && st != Gone
}

// signalAndConfirm sends sig to node's daemon and reads its state until
// want (SignalConfirmed).
func (p *Procs) signalAndConfirm(node, fault, sig string, want State) error {
	ctx, cancel := context.WithTimeout(context.Background(), within(p.ConfirmWithin))
	defer cancel()
	r, _, err := p.node(node)
	if err != nil {
		return err
	}
	proc, ok := p.Proc(node)
	if !ok {
		return fmt.Errorf("control: %s: daemon never started", node)
	}
	return SignalConfirmed(ctx, r, proc, sig, want, p.Ledger, fault, node)
}

// SignalConfirmed sends sig to proc on r, reads its state until want or
// until ctx ends, and records what it found in l as a Confirmation of
// fault on target. A process that is gone when the signal is sent counts
// as confirmed for any want but Stopped (killed meanwhile: not stopped
// either). When the state is not found the error wraps ErrNotConfirmed.
// The Procs faults are built on it; a suite's own faults (pausing whichever
// member leads, say) use it on the processes they pick.
func SignalConfirmed(ctx context.Context, r Remote, proc Proc, sig string, want State, l *Ledger, fault, target string) error {
	c := Confirmation{Fault: fault, Target: target}
	err := Signal(ctx, r, proc, sig)
	if errors.Is(err, ErrGone) && want != Stopped {
		c.Confirmed, c.Detail = true, "already gone"
		l.Add(c)
		return nil
	}
	if err != nil {
		c.Detail = err.Error()
		l.Add(c)
		return err
	}
	st, reads, werr := waitState(ctx, r, proc, want)
	c.Checks, c.Detail = reads, fmt.Sprintf("pid %d %s", proc.Pid, st)
	c.Confirmed = werr == nil && st == want
	l.Add(c)
	if !c.Confirmed {
		return fmt.Errorf("control: %s: SIG%s to pid %d: %w: %s after %d checks, want %s (%v)", target, sig, proc.Pid, ErrNotConfirmed, st, reads, want, werr)
	}
	return nil
}

// Pause stops node's daemon with SIGSTOP and confirms it stopped.
func (p *Procs) Pause(node string) error { return p.signalAndConfirm(node, "pause", "STOP", Stopped) }

// Resume continues node's daemon with SIGCONT and confirms it is no
// longer stopped. A daemon that is gone (killed meanwhile) has nothing to
// continue: that is not an error.
func (p *Procs) Resume(node string) error { return p.signalAndConfirm(node, "resume", "CONT", Running) }

// Kill kills node's daemon with SIGKILL and confirms the pid is gone.
func (p *Procs) Kill(node string) error { return p.signalAndConfirm(node, "kill", "KILL", Gone) }

// Restart starts node's daemon again unless it is there, then waits for
// Ready.
func (p *Procs) Restart(ctx context.Context, node string) error {
	if p.Running(ctx, node) {
		return nil
	}
	if err := p.Start(ctx, node); err != nil {
		return err
	}
	if p.Ready != nil {
		return p.Ready(ctx, node)
	}
	return nil
}

// Stop stops node's daemon (TERM, then KILL after grace) and returns once
// it is gone; a node whose daemon never started or is gone already is
// stopped.
func (p *Procs) Stop(ctx context.Context, node string, grace time.Duration) error {
	r, _, err := p.node(node)
	if err != nil {
		return err
	}
	proc, ok := p.Proc(node)
	if !ok {
		return nil
	}
	return Stop(ctx, r, proc, grace)
}

// StopAll stops every node's daemon (TERM, then KILL after grace).
func (p *Procs) StopAll(ctx context.Context, grace time.Duration) error {
	var errs []error
	p.mu.Lock()
	nodes := slices.Collect(maps.Keys(p.daemons))
	p.mu.Unlock()
	for _, node := range nodes {
		proc, ok := p.Proc(node)
		if !ok {
			continue
		}
		if err := Stop(ctx, p.remotes[node], proc, grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
