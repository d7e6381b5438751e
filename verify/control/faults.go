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

	mu    sync.Mutex
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
	d, ok := p.daemons[node]
	if !ok {
		return nil, Daemon{}, fmt.Errorf("control: no daemon on node %q", node)
	}
	return p.remotes[node], d, nil
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

// signalAndConfirm sends sig and reads the state until want.
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
	c := Confirmation{Fault: fault, Target: node}
	err = Signal(ctx, r, proc, sig)
	if errors.Is(err, ErrGone) && want != Stopped {
		// Killed meanwhile: gone, and so not stopped either.
		c.Confirmed, c.Detail = true, "already gone"
		p.Ledger.Add(c)
		return nil
	}
	if err != nil {
		c.Detail = err.Error()
		p.Ledger.Add(c)
		return err
	}
	st, reads, werr := waitState(ctx, r, proc, want)
	c.Checks, c.Detail = reads, fmt.Sprintf("pid %d %s", proc.Pid, st)
	c.Confirmed = werr == nil && st == want
	p.Ledger.Add(c)
	if !c.Confirmed {
		return fmt.Errorf("control: %s: SIG%s to pid %d: %w: %s after %d checks, want %s (%v)", node, sig, proc.Pid, ErrNotConfirmed, st, reads, want, werr)
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

// StopAll stops every node's daemon (TERM, then KILL after grace).
func (p *Procs) StopAll(ctx context.Context, grace time.Duration) error {
	var errs []error
	for node := range p.daemons {
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
