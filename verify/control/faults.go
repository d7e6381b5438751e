package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/netfault"
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

// NftNet cuts links between nodes with nftables, run on each node through
// its remote (as root: the node needs sudo unless it logs in as root),
// with the same table and rules as netfault.Netns. After each partition
// and heal it probes every ordered pair of nodes with a TCP connection to
// the peer's SSH port, from the first node: a cut link must time out, an
// open one must connect (or be refused, which is an answer too).
type NftNet struct {
	nodes   []string
	remotes map[string]Remote
	ips     map[string]string
	probeAt map[string]string // node → host/port to probe it at
	// ProbeTimeout bounds one probe (default 3s): the time a cut link
	// takes to be seen as cut. It includes starting the probe, which on a
	// loaded machine can take a good part of a second.
	ProbeTimeout time.Duration
	// Ledger receives every confirmation.
	Ledger *Ledger
	// ConfirmWithin bounds each check (default 30s).
	ConfirmWithin time.Duration
}

// NewNftNet returns the network of nodes, each with an IPv4 address (its
// packets' source address as the others see it) and a remote.
func NewNftNet(nodes []Node, remotes map[string]Remote, ledger *Ledger) (*NftNet, error) {
	n := &NftNet{remotes: remotes, ips: map[string]string{}, probeAt: map[string]string{}, ProbeTimeout: 3 * time.Second, Ledger: ledger}
	if n.Ledger == nil {
		n.Ledger = &Ledger{}
	}
	for _, node := range nodes {
		a, err := netip.ParseAddr(node.Address)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("control: node %s: partitions need an IPv4 address, not %q", node.Name, node.Address)
		}
		if remotes[node.Name] == nil {
			return nil, fmt.Errorf("control: node %s has no remote", node.Name)
		}
		n.nodes = append(n.nodes, node.Name)
		n.ips[node.Name] = a.String()
		port := node.Port
		if port == 0 {
			port = 22
		}
		n.probeAt[node.Name] = a.String() + "/" + strconv.Itoa(port)
	}
	return n, nil
}

// Partition cuts exactly the grudge's links, heals the others, and
// confirms it by probes.
func (n *NftNet) Partition(ctx context.Context, g netfault.Grudge) error {
	for _, node := range g.Nodes() {
		if _, ok := n.ips[node]; !ok {
			return fmt.Errorf("control: grudge %s names node %q, not one of %v", g, node, n.nodes)
		}
	}
	var errs []error
	for _, b := range n.nodes {
		var from []string
		for _, a := range n.nodes {
			if g.Cuts(a, b) {
				from = append(from, n.ips[a])
			}
		}
		script := netfault.NftScript(from)
		res, err := n.remotes[b].Run(ctx, Cmd{Line: "nft -f -", Stdin: strings.NewReader(script)})
		if err == nil && (res.Exit != 0 || res.Signal != "") {
			err = &ExitError{Node: b, Line: "nft -f - (partition)", Result: res}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	fault := "partition"
	if len(g.Nodes()) == 0 {
		fault = "heal"
	}
	if err := n.confirm(ctx, fault, g); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Heal removes every cut and confirms every link open.
func (n *NftNet) Heal(ctx context.Context) error { return n.Partition(ctx, nil) }

// probeLine probes the targets (host/port) at once from one node and
// prints one line per target: the target and 0 when it connected (or was
// refused: the peer's RST came back, so the link is open), else the
// status of the attempt (124: timed out). bash's /dev/tcp is the one TCP
// client every Debian node has. One command per node rather than per pair
// keeps the number of SSH sessions down: on a loaded machine each costs
// more than the connection it makes.
func (n *NftNet) probeLine(targets []string) string {
	secs := strconv.FormatFloat(n.ProbeTimeout.Seconds(), 'f', 3, 64)
	var b strings.Builder
	b.WriteString(`command -v bash >/dev/null || { echo "probing needs bash" >&2; exit 127; }; for t in`)
	for _, t := range targets {
		b.WriteString(" " + Quote(t))
	}
	fmt.Fprintf(&b, `; do ( out=$(timeout %s bash -c "exec 3<>/dev/tcp/$t" 2>&1); st=$?; case "$out" in *refused*) st=0;; esac; echo "$t $st" ) & done; wait`, secs)
	return b.String()
}

// confirm probes every ordered pair and compares with g. A connection is
// proof that a link is open, so a cut link that connects fails at once. A
// probe that times out is only what a cut looks like: on a loaded machine
// an open link's probe may time out too, so open links that did are probed
// again until they connect or ConfirmWithin has passed.
func (n *NftNet) confirm(ctx context.Context, fault string, g netfault.Grudge) error {
	deadline := time.Now().Add(within(n.ConfirmWithin))
	c := Confirmation{Fault: fault, Target: g.String()}
	var pairs [][2]string
	for _, a := range n.nodes {
		for _, b := range n.nodes {
			if a != b {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	found := map[[2]string]string{}
	pending := pairs
	fail := func(format string, a ...any) error {
		c.Detail = n.detail(pairs, found)
		n.Ledger.Add(c)
		return fmt.Errorf("control: %s %s: %w: %s", fault, g, ErrNotConfirmed, fmt.Sprintf(format, a...))
	}
	for {
		c.Checks++
		reached, why, err := n.probe(ctx, pending)
		if err != nil {
			return fail("probing: %v", err)
		}
		var again, wrong [][2]string
		for i, p := range pending {
			cut := g.Cuts(p[0], p[1]) || g.Cuts(p[1], p[0])
			switch {
			case reached[i] && cut:
				found[p] = "reached"
				wrong = append(wrong, p)
			case reached[i]:
				found[p] = "reached"
			case cut:
				found[p] = "cut"
			default:
				found[p] = "cut"
				if why[i] != "" {
					found[p] = "cut (" + clip(why[i]) + ")"
				}
				again = append(again, p)
			}
		}
		if len(wrong) > 0 {
			return fail("%s", n.detail(wrong, found))
		}
		if len(again) == 0 {
			c.Confirmed = true
			c.Detail = n.detail(pairs, found)
			n.Ledger.Add(c)
			return nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return fail("%s, after %d rounds of probes", n.detail(again, found), c.Checks)
		}
		pending = again
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

func (n *NftNet) detail(pairs [][2]string, found map[[2]string]string) string {
	var parts []string
	for _, p := range pairs {
		parts = append(parts, p[0]+"→"+p[1]+" "+found[p])
	}
	return strings.Join(parts, ", ")
}

// probe probes the pairs at once, one command per source node, and says
// whether each connected and, when one did not, the attempt's status.
func (n *NftNet) probe(ctx context.Context, pairs [][2]string) ([]bool, []string, error) {
	reached := make([]bool, len(pairs))
	why := make([]string, len(pairs))
	bySource := map[string][]int{}
	var sources []string
	for i, p := range pairs {
		if bySource[p[0]] == nil {
			sources = append(sources, p[0])
		}
		bySource[p[0]] = append(bySource[p[0]], i)
	}
	errs := make([]error, len(sources))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for si, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var targets []string
			for _, i := range bySource[src] {
				targets = append(targets, n.probeAt[pairs[i][1]])
			}
			res, err := n.remotes[src].Run(ctx, Cmd{Line: n.probeLine(targets)})
			if err == nil && res.Exit != 0 {
				err = &ExitError{Node: src, Line: "probe of " + strings.Join(targets, " "), Result: res}
			}
			if err != nil {
				errs[si] = err
				return
			}
			status := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				if t, st, ok := strings.Cut(line, " "); ok {
					status[t] = st
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range bySource[src] {
				st, ok := status[n.probeAt[pairs[i][1]]]
				switch {
				case !ok:
					errs[si] = fmt.Errorf("control: %s: probe of %s printed nothing: %q", src, pairs[i][1], res.Stdout)
				case st == "0":
					reached[i] = true
				case st == "124":
				default:
					why[i] = "status " + st
				}
			}
		}()
	}
	wg.Wait()
	return reached, why, errors.Join(errs...)
}
