package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/jsonhttp"
)

// devHelp is what dev's console accepts, printed at the start and on
// "help".
const devHelp = `Type here:  kill NODE     SIGKILL the node (or from another terminal: kill -9 PID)
            stop NODE     SIGTERM the node
            restart NODE  start it again (stopping it first if it runs), on its own state
            status        the processes and who holds each address
            help          this list
Ctrl-C stops everything. Each line below is an address changing holder at the simulator
(time, address, from → to), or a process ending.`

// runDev starts a cloud simulator and a cluster of nodes on loopback, as
// child processes of this one, and stays in the foreground as their
// console: it names a node that dies and keeps the others running,
// restarts or kills a node on a line typed on its stdin, and prints every
// change of an address's holder at the simulator as it happens.
func runDev(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("dev", "dev [--nodes N] [--addresses K] [--dir DIR] [--log-level L]", stderr)
	nodes := fs.Int("nodes", 3, "how many nodes to start")
	addresses := fs.Int("addresses", 4, "how many mobile addresses the nodes share")
	keep := fs.String("dir", "", "put the configs and state here and keep them (default: a temporary folder, removed at the end)")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify dev: "+format+"\n", a...)
		return cli.ExitError
	}
	bad := func(format string, a ...any) int { return cli.UsageError(stderr, "dev", format, a...) }
	if len(pos) > 0 {
		return bad("unexpected argument %q: dev takes flags only", pos[0])
	}
	if *nodes < 1 || *nodes > 64 {
		return bad("--nodes: %d is not between 1 and 64", *nodes)
	}
	if *addresses < 1 || *addresses > 200 {
		return bad("--addresses: %d is not between 1 and 200", *addresses)
	}
	self, err := os.Executable()
	if err != nil {
		return fail("finding this program: %v", err)
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "ipfence-dev-"); err != nil {
			return fail("%v", err)
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail("--dir: %v", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fail("--dir: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	out := &lockedOutput{w: stdout}
	c := &devCluster{dir: dir, self: self, level: *level, out: out, logs: &lockedOutput{w: stderr}, procs: map[string]*devProc{},
		lns: map[string]*net.TCPListener{}, fatal: make(chan string, 1)}
	defer c.stopAll()
	nics := make([]string, *nodes)
	for i := range *nodes {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
		nics[i] = "eni-" + c.names[i]
	}
	// The simulator binds a port of its choosing (port 0) and reports it;
	// nothing needs its address before it runs, and dev never restarts it.
	// It answers at once (not cloudsim's realistic default), as dev's
	// walkthrough and its tests expect.
	sim, err := c.start("cloudsim", nil, "cloudsim", "--listen", "127.0.0.1:0", "--latency", "none", "--nics", strings.Join(nics, ","))
	if err != nil {
		return fail("starting the simulator: %v", err)
	}
	secret := filepath.Join(dir, "secret")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return fail("%v", err)
	}
	// Every node's socket is bound here, before any config names a port,
	// and kept open for dev's whole life: each start of the node gets it
	// as fd 3 (serve --listen-fd 3), so no port is chosen free and then
	// lost to another program, not even while a killed node is down.
	var ports []int
	for _, n := range c.names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail("a loopback socket for %s: %v", n, err)
		}
		c.lns[n] = ln.(*net.TCPListener)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for i, n := range c.names {
		if err := os.WriteFile(c.config(n), []byte(devConfig(i, c.names, ports, *addresses, sim.url)), 0o600); err != nil {
			return fail("%v", err)
		}
		if _, err := c.startNode(n); err != nil {
			return fail("starting %s: %v", n, err)
		}
	}
	var addrs []string
	for i := range *addresses {
		addrs = append(addrs, fmt.Sprintf("10.0.0.%d", 10+i))
	}
	w := &holderWatch{sim: sim.url, addrs: addrs, out: out, holders: map[string]string{}}
	out.printf("ipfence-verify dev: a cloud simulator and %d nodes on loopback, in %s (log level %s)\n", *nodes, dir, *level)
	out.printf("  %-8s  pid %-7d  %s\n", "cloudsim", sim.pid(), sim.url)
	for _, n := range c.names {
		out.printf("  %-8s  pid %-7d  %s\n", n, c.procs[n].pid(), c.procs[n].url)
	}
	out.printf("Operate a node:  ipfence ctl --endpoint %s --token-file %s status\n", c.procs[c.names[0]].url, secret)
	out.printf("%s\n\n", devHelp)

	go w.run(ctx)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			out.printf("%s  stopping\n", stamp())
			return cli.ExitValid
		case why := <-c.fatal:
			return fail("%s; stopping the nodes", why)
		case line := <-lines:
			c.command(line, w)
		}
	}
}

// lockedOutput serializes whole lines from the goroutines that print.
type lockedOutput struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *lockedOutput) printf(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, format, a...)
}

// stamp is the time of an event line, to the millisecond.
func stamp() string { return time.Now().Format("15:04:05.000") }

// devCluster is the processes dev started.
type devCluster struct {
	dir, self, level string
	names            []string
	out, logs        *lockedOutput
	// procs are touched by the console loop alone (and by start before it
	// runs); a process's goroutine reports its end through its devProc.
	procs map[string]*devProc
	// lns are the nodes' listening sockets, bound by dev and handed to
	// every start of a node. While a node is down, connections to it wait
	// in its socket's backlog (as they would for a crashed host) and the
	// node's next start serves them.
	lns      map[string]*net.TCPListener
	stopping atomic.Bool
	fatal    chan string
}

// devProc is one child process.
type devProc struct {
	name string
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed once the process has been waited for
	err  error         // its end, once done is closed
}

func (p *devProc) pid() int { return p.cmd.Process.Pid }

func (p *devProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (c *devCluster) config(node string) string { return filepath.Join(c.dir, node+".yaml") }

// startNode starts node n (serve) on the socket dev bound for it.
func (c *devCluster) startNode(n string) (*devProc, error) {
	// A duplicate of dev's socket, which the child gets as fd 3; dev's
	// copy of the duplicate is closed once the child has it.
	f, err := c.lns[n].File()
	if err != nil {
		return nil, fmt.Errorf("handing %s its socket: %w", n, err)
	}
	defer f.Close()
	return c.start(n, f, "serve", "--config", c.config(n), "--listen-fd", "3")
}

// start runs this program with args (and dev's log level) as the process
// name, with sock, when set, as its fd 3, and waits for its "listening on
// URL" line. Its log lines go to dev's stderr, each after its name; its
// end is announced, and the end of the simulator is fatal to dev.
func (c *devCluster) start(name string, sock *os.File, args ...string) (*devProc, error) {
	cmd := exec.Command(c.self, append(args, "--log-level", c.level)...)
	cmd.Dir = c.dir
	if sock != nil {
		cmd.ExtraFiles = []*os.File{sock}
	}
	// Their own process group: an interrupt at the terminal reaches dev
	// alone, which then stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &devProc{name: name, cmd: cmd, done: make(chan struct{})}
	c.procs[name] = p
	var last atomic.Value // the last line it logged, for a failed start
	var readers sync.WaitGroup
	readers.Add(2)
	ready := make(chan string, 1)
	go func() {
		defer readers.Done()
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		ready <- strings.TrimSpace(line)
		io.Copy(io.Discard, r)
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			last.Store(sc.Text())
			c.logs.printf("%s| %s\n", name, sc.Text())
		}
	}()
	go func() {
		readers.Wait()
		p.err = cmd.Wait()
		close(p.done)
		if c.stopping.Load() {
			return
		}
		how := "exit status 0"
		if p.err != nil {
			how = p.err.Error()
		}
		if name == "cloudsim" {
			c.out.printf("%s  cloudsim exited: %s\n", stamp(), how)
			select {
			case c.fatal <- "the simulator exited: " + how:
			default:
			}
			return
		}
		c.out.printf("%s  %s exited: %s; type 'restart %s' to start it again\n", stamp(), name, how, name)
	}()
	select {
	case line := <-ready:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			// Most often it has exited, on an error it logged; a process
			// that printed something else first is not one dev can use.
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-p.done
			}
			why, _ := last.Load().(string)
			return nil, fmt.Errorf("%s; its last log line: %q", p.err, why)
		}
		p.url = url
		return p, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("no \"listening on\" line after 30s")
	}
}

// command carries out one console line.
func (c *devCluster) command(line string, w *holderWatch) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	verbs := []string{"kill", "stop", "restart", "start", "status", "help"}
	switch f[0] {
	case "help", "?":
		c.out.printf("%s\n", devHelp)
		return
	case "status", "ps":
		c.status(w)
		return
	case "kill", "stop", "restart", "start":
	default:
		msg := fmt.Sprintf("unknown command %q", f[0])
		if s := cli.Suggest(f[0], verbs); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		c.out.printf("%s; type help\n", msg)
		return
	}
	if len(f) != 2 || !slices.Contains(c.names, f[1]) {
		c.out.printf("%s takes a node: one of %s\n", f[0], strings.Join(c.names, ", "))
		return
	}
	p := c.procs[f[1]]
	switch f[0] {
	case "kill", "stop":
		if !p.running() {
			c.out.printf("%s is not running; type 'restart %s' to start it\n", p.name, p.name)
			return
		}
		sig := map[string]syscall.Signal{"kill": syscall.SIGKILL, "stop": syscall.SIGTERM}[f[0]]
		c.out.printf("%s  sending %s to %s (pid %d)\n", stamp(), strings.ToUpper(unix(sig)), p.name, p.pid())
		p.cmd.Process.Signal(sig)
	case "restart", "start":
		if p.running() {
			c.out.printf("%s  stopping %s (pid %d)\n", stamp(), p.name, p.pid())
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				p.cmd.Process.Kill()
				<-p.done
			}
		}
		np, err := c.startNode(p.name)
		if err != nil {
			c.out.printf("%s  %s did not start: %v\n", stamp(), p.name, err)
			return
		}
		c.out.printf("%s  %s started: pid %d, %s\n", stamp(), np.name, np.pid(), np.url)
	}
}

// unix names a signal as kill(1) does.
func unix(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "sigkill"
	}
	return "sigterm"
}

// status prints the processes and the holders the watch saw last.
func (c *devCluster) status(w *holderWatch) {
	for _, n := range append([]string{"cloudsim"}, c.names...) {
		p := c.procs[n]
		state := "running"
		if !p.running() {
			state = "exited"
			if p.err != nil {
				state += ": " + p.err.Error()
			}
		}
		c.out.printf("  %-8s  pid %-7d  %s  %s\n", n, p.pid(), p.url, state)
	}
	for _, a := range w.addrs {
		c.out.printf("  %-12s  %s\n", a, cli.OrDash(w.holder(a)))
	}
}

// stopAll sends SIGTERM to every process still running, in reverse order
// of start, and waits; past ten seconds it kills them.
func (c *devCluster) stopAll() {
	c.stopping.Store(true)
	order := append([]string{"cloudsim"}, c.names...)
	for i := len(order) - 1; i >= 0; i-- {
		if p := c.procs[order[i]]; p != nil && p.running() {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	defer func() {
		for _, ln := range c.lns {
			ln.Close()
		}
	}()
	deadline := time.After(10 * time.Second)
	for _, n := range order {
		p := c.procs[n]
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-deadline:
			for _, q := range c.procs {
				q.cmd.Process.Kill()
			}
			return
		}
	}
}

// holderWatch polls the simulator and prints one line per change of an
// address's holder: the simulator is where an address is, whichever node
// believes what.
type holderWatch struct {
	sim   string
	addrs []string
	out   *lockedOutput
	mu    sync.Mutex
	// holders are the nodes whose NICs had each address at the last poll,
	// joined with "+" in the impossible case of several.
	holders map[string]string
}

func (w *holderWatch) holder(a string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holders[a]
}

func (w *holderWatch) run(ctx context.Context) {
	client := &http.Client{Timeout: 2 * time.Second}
	failing := false
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var st ec2sim.State
		err := jsonhttp.Do(ctx, client, http.MethodGet, w.sim+"/admin/state", nil, &st)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			w.out.printf("%s  cannot read the simulator's state: %v\n", stamp(), err)
			failing = true
		case err == nil:
			failing = false
			w.update(st)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// update prints the changes st shows since the last poll.
func (w *holderWatch) update(st ec2sim.State) {
	now := map[string][]string{}
	for _, n := range st.NICs {
		node := strings.TrimPrefix(n.ID, "eni-")
		for _, a := range n.SecondaryIPs {
			now[a.String()] = append(now[a.String()], node)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	when := stamp()
	for _, a := range w.addrs {
		to := strings.Join(now[a], "+")
		if from := w.holders[a]; from != to {
			w.holders[a] = to
			note := ""
			if len(now[a]) > 1 {
				note = "  (on two NICs at once!)"
			}
			w.out.printf("%s  %-12s  %s → %s%s\n", when, a, cli.OrDash(from), cli.OrDash(to), note)
		}
	}
}

// devConfig is node i's configuration: every node a member of one pool
// of the addresses, priority by position.
func devConfig(i int, names []string, ports []int, addresses int, simURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node: %s\nlisten: 127.0.0.1:%d\ndata_dir: %s-data\npeers:\n", names[i], ports[i], names[i])
	for j, n := range names {
		if j != i {
			fmt.Fprintf(&b, "  - name: %s\n    url: http://127.0.0.1:%d\n", n, ports[j])
		}
	}
	fmt.Fprintf(&b, "federation:\n  secret_file: secret\nproviders:\n  sim:\n    type: cloudsim\n    endpoint: %s\n", simURL)
	fmt.Fprintf(&b, "pools:\n  - name: dev\n    provider: sim\n    group: dev\n    addresses: [10.0.0.10-10.0.0.%d]\n    members:\n", 10+addresses-1)
	for j, n := range names {
		fmt.Fprintf(&b, "      - {node: %s, priority: %d, target: eni-%s}\n", n, j+1, n)
	}
	b.WriteString("approval:\n  auto: true\n  providers: [\"*\"]\n  kinds: [\"*\"]\n  cidrs: [\"10.0.0.0/24\"]\n")
	b.WriteString("timing:\n  reconcile_interval: 1s\n  heartbeat_interval: 200ms\n  heartbeat_ttl: 600ms\n")
	return b.String()
}
