package capturesuite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/jsonhttp"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// Timing of the nodes under test: fast enough that a 60 s run sees many
// failovers, slow enough for two cores under the race detector.
const (
	reconcileInterval = 500 * time.Millisecond
	heartbeatInterval = 200 * time.Millisecond
	heartbeatTTL      = 600 * time.Millisecond
	// deprovisionHold keeps a vacating node's release waiting; a drain
	// that is undone within it leaves a stale release behind, which only
	// the fence stops from running.
	deprovisionHold = 2 * time.Second
	startTimeout    = 30 * time.Second
)

// cluster is the system under test: the cloud simulator and the nodes, each
// a process of the ipfence binary, on loopback or in network namespaces.
type cluster struct {
	bin       string
	dir       string // the run's folder: configs, data, logs
	nodes     []string
	addrs     []netip.Addr
	unfenced  bool
	secret    []byte
	sim       string            // the simulator's URL
	endpoints map[string]string // node → its API URL, as the harness reaches it
	listens   map[string]string // node → host:port it listens on
	// lns are the nodes' listening sockets on loopback, bound by the
	// harness and handed to each start of the node (serve --listen-fd):
	// the port is never chosen free and then lost to another program,
	// not even while a killed node is down. Connections to a node that is
	// down wait in the socket's backlog, as connections to a crashed host
	// do, instead of being refused.
	lns  map[string]*net.TCPListener
	mesh *netfault.Mesh
	ns   *netfault.Netns
	http *http.Client

	// procs are the nodes' processes and the simulator's ("cloudsim",
	// which no fault names); they give Pause, Resume and Kill.
	nemesis.Procs

	// mounts are the tmpfs data folders of the disk nemesis.
	mounts []string

	// cloud is the simulated cloud (one of Clouds); admin reaches its
	// simulator's admin API (trusting its certificate, for the TLS
	// dialects); env is what the nodes' environment adds for the cloud's
	// SDK (cloud.go).
	cloud string
	admin *http.Client
	env   []string
	// latency is the simulator's latency profile (Options.CloudLatency)
	// and seed the seed of its jitter.
	latency string
	seed    uint64
	// line is the epoch line in etcd (nil: passed between the nodes).
	line *etcdLine
	// The OCI API keys the nodes and the clients sign with, and the
	// subnet OCID the simulator made.
	ociNodes, ociHarness ociKey
	ociSubnet            string

	// remote runs the nodes on the machines of a nodes file (nil: on
	// this machine).
	remote *remoteNodes

	mu   sync.Mutex
	logs map[string]*os.File
}

// clusterOptions say how to build a cluster.
type clusterOptions struct {
	bin      string
	dir      string
	nodes    int
	addrs    int
	unfenced bool
	netns    bool
	// disks mounts a tmpfs as each node's data folder, for the disk
	// nemesis.
	disks bool
	// cloud is one of Clouds ("" means aws).
	cloud string
	// latency is the simulator's latency profile ("" means none) and
	// seed the seed of its jitter.
	latency string
	seed    uint64
	// line is the epoch line in etcd of --epochs etcd (nil: the line
	// passes between the nodes).
	line *etcdLine
	// remote, when set, runs the nodes on these machines over SSH.
	remote *remoteOptions
}

// nodeName is the name of the i-th node (from 0).
func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

// startCluster starts the simulator and the nodes and waits until every
// node serves. On error it stops whatever it started.
func startCluster(ctx context.Context, o clusterOptions) (c *cluster, err error) {
	c = &cluster{bin: o.bin, dir: o.dir, unfenced: o.unfenced, endpoints: map[string]string{}, listens: map[string]string{},
		lns: map[string]*net.TCPListener{}, logs: map[string]*os.File{}, cloud: o.cloud, admin: http.DefaultClient,
		latency: o.latency, seed: o.seed, line: o.line}
	if c.cloud == "" {
		c.cloud = "aws"
	}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if o.remote != nil {
		for _, n := range o.remote.nodes {
			c.nodes = append(c.nodes, n.Name)
		}
	} else {
		for i := range o.nodes {
			c.nodes = append(c.nodes, nodeName(i))
		}
	}
	for i := range o.addrs {
		c.addrs = append(c.addrs, netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + i)}))
	}
	c.secret = []byte(strings.Repeat("harness-secret-", 3))
	if err := os.WriteFile(filepath.Join(c.dir, "secret"), c.secret, 0o600); err != nil {
		return c, err
	}
	signer := &auth.Signer{Secret: c.secret, Node: "harness"}
	c.http = &http.Client{Timeout: 5 * time.Second, Transport: signer.Transport(&http.Transport{MaxIdleConnsPerHost: 16})}

	simListen := "127.0.0.1:0"
	if o.netns {
		if c.ns, err = netfault.NewNetns(fmt.Sprintf("ipf%d", os.Getpid()%100000), c.nodes); err != nil {
			return c, err
		}
		simListen = net.JoinHostPort(c.ns.HostIP(), "0")
	}
	if o.remote != nil {
		if c.remote, err = dialRemote(*o.remote, c.dir); err != nil {
			return c, err
		}
		host, err := c.remote.simHost()
		if err != nil {
			return c, err
		}
		simListen = net.JoinHostPort(host, "0")
	}
	if err := c.prepareCloud(); err != nil {
		return c, err
	}
	simURL, cmd, err := c.spawn(ctx, "cloudsim", nil, nil, c.simArgs(simListen)...)
	if err != nil {
		return c, err
	}
	c.sim = simURL
	c.Add("cloudsim", cmd)
	if err := c.cloudStarted(ctx); err != nil {
		return c, err
	}

	// Where each node listens, and the address every other node dials to
	// reach it: through the harness's proxy for that link, or directly in
	// namespaces (where nftables cuts the links).
	peerAddr := map[[2]string]string{}
	if c.ns != nil || c.remote != nil {
		for _, n := range c.nodes {
			if c.remote != nil {
				c.listens[n] = net.JoinHostPort(c.remote.address(n), strconv.Itoa(remotePort))
			} else {
				c.listens[n] = net.JoinHostPort(c.ns.IP(n), "7000")
			}
			c.endpoints[n] = "http://" + c.listens[n]
		}
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				peerAddr[[2]string{a, b}] = c.listens[b]
			}
		}
	} else {
		targets := map[string]string{}
		for _, n := range c.nodes {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return c, fmt.Errorf("a loopback socket for %s: %w", n, err)
			}
			c.lns[n] = ln.(*net.TCPListener)
			c.listens[n] = ln.Addr().String()
			c.endpoints[n] = "http://" + c.listens[n]
			targets[n] = c.listens[n]
		}
		if c.mesh, err = netfault.NewMesh(targets); err != nil {
			return c, err
		}
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				if a != b {
					peerAddr[[2]string{a, b}] = c.mesh.Addr(a, b)
				}
			}
		}
	}
	if o.disks {
		if err := c.mountDisks(); err != nil {
			return c, err
		}
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(c.configPath(n), []byte(c.config(n, peerAddr)), 0o600); err != nil {
			return c, err
		}
	}
	if c.remote != nil {
		if err := c.installRemote(ctx, peerAddr); err != nil {
			return c, err
		}
	}
	for _, n := range c.nodes {
		if err := c.startNode(ctx, n); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *cluster) configPath(n string) string { return filepath.Join(c.dir, n+".yaml") }

// config is node n's configuration: every node alike but for its name,
// listen address, data and peers.
func (c *cluster) config(n string, peerAddr map[[2]string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node: %s\nlisten: %s\ndata_dir: %s\npeers:\n", n, c.listens[n], c.dataDir(n))
	for _, p := range c.nodes {
		if p != n {
			fmt.Fprintf(&b, "  - name: %s\n    url: http://%s\n", p, peerAddr[[2]string{n, p}])
		}
	}
	fmt.Fprintf(&b, "federation:\n  secret_file: %s\nproviders:\n%s", c.secretPath(n), c.providerYAML())
	b.WriteString("pools:\n  - name: web\n    provider: sim\n    group: g1\n    addresses: [")
	for i, a := range c.addrs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteString("]\n")
	if c.line != nil {
		b.WriteString("    epoch_line: etcd\n")
	}
	b.WriteString("    members:\n")
	for i, m := range c.nodes {
		fmt.Fprintf(&b, "      - {node: %s, priority: %d, target: %s}\n", m, i+1, c.nic(m))
	}
	b.WriteString("approval:\n  auto: true\n  providers: [\"*\"]\n  kinds: [\"*\"]\n  cidrs: [\"10.0.0.0/16\"]\n  max_per_run: 100000\n")
	fmt.Fprintf(&b, "timing:\n  reconcile_interval: %s\n  heartbeat_interval: %s\n  heartbeat_ttl: %s\n  deprovision_hold: %s\n",
		reconcileInterval, heartbeatInterval, heartbeatTTL, deprovisionHold)
	if c.line != nil {
		b.WriteString(c.line.yaml(n))
	}
	return b.String()
}

// spawn starts the binary (in node's namespace, when there is one) with
// its output appended to logs/<name>.log and extra as its file
// descriptors from 3 on, and returns the URL its "listening on" line
// names.
func (c *cluster) spawn(ctx context.Context, name string, nodeNS *string, extra []*os.File, args ...string) (string, *exec.Cmd, error) {
	var cmd *exec.Cmd
	if nodeNS != nil && c.ns != nil {
		cmd = c.ns.Command(*nodeNS, c.bin, args...)
	} else {
		cmd = exec.Command(c.bin, args...)
	}
	cmd.Dir = c.dir
	cmd.ExtraFiles = extra
	if nodeNS != nil {
		cmd.Env = c.nodeEnv(*nodeNS)
	}
	c.mu.Lock()
	logf := c.logs[name]
	if logf == nil {
		var err error
		logf, err = os.OpenFile(filepath.Join(c.dir, "logs", name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			c.mu.Unlock()
			return "", nil, err
		}
		c.logs[name] = logf
	}
	c.mu.Unlock()
	url, err := startListening(ctx, cmd, name, logf, nil)
	if err != nil {
		return "", nil, err
	}
	return url, cmd, nil
}

// startListening starts cmd in a process group of its own (a Ctrl-C at
// the terminal goes to the harness, which heals and stops the processes
// itself; one must not die of it halfway through the heal), with its
// output appended to logf, and waits for the "listening on URL" line
// every ipfence command that serves prints once ready; it returns the
// URL. A process that prints anything else first, or nothing within
// startTimeout, is killed. done, when set, runs once the output ends.
func startListening(ctx context.Context, cmd *exec.Cmd, name string, logf *os.File, done func()) (string, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = logf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", name, err)
	}
	lines := make(chan string, 1)
	go func() {
		if done != nil {
			defer done()
		}
		r := bufio.NewReader(pipe)
		line, err := r.ReadString('\n')
		if err != nil {
			close(lines)
			return
		}
		lines <- line
		_, _ = io.Copy(logf, r)
	}()
	why := fmt.Sprintf("did not start within %v", startTimeout)
	select {
	case line, ok := <-lines:
		if url, found := strings.CutPrefix(line, "listening on "); ok && found {
			return strings.TrimSpace(url), nil
		}
		why = "did not start"
		if ok {
			why = fmt.Sprintf("did not start (it printed %q)", strings.TrimSpace(line))
		}
	case <-time.After(startTimeout):
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	werr := cmd.Wait()
	if st := cmd.ProcessState; st != nil && st.Exited() {
		why += fmt.Sprintf(", %v", werr)
	}
	if t := nemesis.LogTail(logf.Name(), 3); t != "" {
		why += ": " + t
	}
	return "", fmt.Errorf("%s %s; see %s", name, why, logf.Name())
}

// startNode starts node n and waits until it answers.
func (c *cluster) startNode(ctx context.Context, n string) error {
	if c.remote != nil {
		if err := c.remote.procs.Start(ctx, n); err != nil {
			return err
		}
		return c.remote.listening(ctx, n)
	}
	args := []string{"serve", "--config", c.configPath(n), "--test-endpoints", "--log-level", "info"}
	if c.unfenced {
		args = append(args, "--unsafe-disable-fence")
	}
	var extra []*os.File
	if ln := c.lns[n]; ln != nil {
		// A duplicate of the harness's socket; the child gets it as fd 3.
		f, err := ln.File()
		if err != nil {
			return fmt.Errorf("handing %s its socket: %w", n, err)
		}
		defer f.Close()
		extra = []*os.File{f}
		args = append(args, "--listen-fd", "3")
	}
	_, cmd, err := c.spawn(ctx, n, &n, extra, args...)
	if err != nil {
		return err
	}
	c.Add(n, cmd)
	return nil
}

// Restart starts node n again, with the same configuration and state.
func (c *cluster) Restart(ctx context.Context, n string) error {
	if c.remote != nil {
		return c.remote.procs.Restart(ctx, n)
	}
	if c.Running(n) {
		return nil
	}
	return c.startNode(ctx, n)
}

// SetOffset moves node n's clock by offset through its test endpoint.
func (c *cluster) SetOffset(ctx context.Context, n string, offset time.Duration) error {
	return c.post(ctx, n, "/v1/test/clock", map[string]string{"offset": offset.String()})
}

// post sends a signed POST to node n's API.
func (c *cluster) post(ctx context.Context, n, path string, body any) error {
	return jsonhttp.Do(ctx, c.http, http.MethodPost, c.endpoints[n]+path, body, nil)
}

// status reads node n's status.
func (c *cluster) status(ctx context.Context, n string) (daemon.Status, error) {
	var st daemon.Status
	err := jsonhttp.Do(ctx, c.http, http.MethodGet, c.endpoints[n]+"/v1/status", nil, &st)
	return st, err
}

// healthz reads node n's /healthz: the code and the body (0 and the
// error when it does not answer).
func (c *cluster) healthz(ctx context.Context, n string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoints[n]+"/healthz", nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(b)
}

// mutationRecord is a simulator record entry as the admin API shows it.
// Accepted is ARM's: when it accepted the change, from which its reads
// showed it (armsim.AcceptedTimes); 0 from the other dialects, whose
// reads follow the record.
type mutationRecord struct {
	Mono     int64  `json:"mono"`
	Accepted int64  `json:"acceptedMono,omitempty"`
	Call     string `json:"call"`
	NIC      string `json:"nic"`
	Address  string `json:"address"`
	Epoch    uint64 `json:"epoch"`
	// LineRevision is the etcd line's token the call carried (--epochs
	// etcd); zero for none.
	LineRevision int64  `json:"lineRevision,omitempty"`
	From         string `json:"from"`
	Enabled      bool   `json:"enabled"`
}

// simGet reads a simulator admin path into out.
func (c *cluster) simGet(ctx context.Context, path string, out any) error {
	return jsonhttp.Do(ctx, c.admin, http.MethodGet, c.sim+path, nil, out)
}

// simSend sends a simulator admin request with a JSON body.
func (c *cluster) simSend(ctx context.Context, method, path string, body any) error {
	return jsonhttp.Do(ctx, c.admin, method, c.sim+path, body, nil)
}

// stop stops every process (with SIGCONT in case one is paused), closes
// the network, and the logs.
func (c *cluster) stop() {
	if c.remote != nil {
		c.remote.stop()
	}
	c.StopAll(10 * time.Second)
	c.unmountDisks()
	for _, ln := range c.lns {
		ln.Close()
	}
	if c.mesh != nil {
		c.mesh.Close()
	}
	if c.ns != nil {
		c.ns.Close()
	}
	c.mu.Lock()
	for _, f := range c.logs {
		f.Close()
	}
	c.mu.Unlock()
}
