package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/internal/loopback"
)

func runDev(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("dev", "dev [--nodes N] [--addresses K] [--dir DIR]", stderr)
	nodes := fs.Int("nodes", 3, "how many nodes to start")
	addresses := fs.Int("addresses", 4, "how many mobile addresses the nodes share")
	keep := fs.String("dir", "", "put the configs and state here and keep them (default: a temporary folder, removed at the end)")
	pos, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence dev: "+format+"\n", a...)
		return exitError
	}
	bad := func(format string, a ...any) int { return usageError(stderr, "dev", format, a...) }
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c := &devCluster{dir: dir, self: self, stderr: stderr}
	defer c.stopAll()
	names := make([]string, *nodes)
	nics := make([]string, *nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
		nics[i] = "eni-" + names[i]
	}
	simURL, err := c.start("cloudsim", "--listen", "127.0.0.1:0", "--nics", strings.Join(nics, ","))
	if err != nil {
		return fail("starting the simulator: %v", err)
	}
	fmt.Fprintf(stdout, "%s\n", mustJSON(map[string]string{"cloudsim": simURL}))
	secret := filepath.Join(dir, "secret")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return fail("%v", err)
	}
	ports, err := loopback.FreePorts(*nodes)
	if err != nil {
		return fail("choosing ports: %v", err)
	}
	for i, n := range names {
		path := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(path, []byte(devConfig(i, names, ports, *addresses, simURL)), 0o600); err != nil {
			return fail("%v", err)
		}
		endpoint, err := c.start("serve", "--config", path)
		if err != nil {
			return fail("starting %s: %v", n, err)
		}
		fmt.Fprintf(stdout, "%s\n", mustJSON(map[string]string{"node": n, "endpoint": endpoint, "token_file": secret}))
	}
	fmt.Fprintf(stderr, "ipfence dev: %d nodes and a simulator are running; try\n  ipfence ctl --endpoint %s --token-file %s status\nInterrupt to stop.\n",
		*nodes, fmt.Sprintf("http://127.0.0.1:%d", ports[0]), secret)
	select {
	case <-ctx.Done():
	case err := <-c.exited:
		return fail("a process ended: %v", err)
	}
	return exitValid
}

// devCluster is the processes dev started.
type devCluster struct {
	dir    string
	self   string
	stderr io.Writer
	procs  []*exec.Cmd
	exited chan error
}

// start runs this program with args and waits for its "listening on URL"
// line.
func (c *devCluster) start(args ...string) (string, error) {
	if c.exited == nil {
		c.exited = make(chan error, 64)
	}
	cmd := exec.Command(c.self, args...)
	cmd.Stderr = c.stderr
	// Their own process group: an interrupt at the terminal reaches dev
	// alone, which then stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	c.procs = append(c.procs, cmd)
	lines := bufio.NewReader(out)
	ready := make(chan string, 1)
	go func() {
		line, _ := lines.ReadString('\n')
		ready <- strings.TrimSpace(line)
		io.Copy(io.Discard, lines)
	}()
	go func() { c.exited <- fmt.Errorf("%s: %v", strings.Join(args[:1], " "), cmd.Wait()) }()
	select {
	case line := <-ready:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			return "", fmt.Errorf("unexpected first line %q", line)
		}
		return url, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("no ready line after 30s")
	}
}

// stopAll sends SIGTERM to every process, in reverse order, and waits.
func (c *devCluster) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(10 * time.Second)
	for range c.procs {
		select {
		case <-c.exited:
		case <-deadline:
			for _, p := range c.procs {
				p.Process.Kill()
			}
			return
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

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
