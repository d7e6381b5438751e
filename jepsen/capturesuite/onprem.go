//go:build linux

package capturesuite

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/capture/vrrp"
	"github.com/ipfence/ipfence/jepsen/l2lab"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// onpremOptions say how to build an on-premises cluster.
type onpremOptions struct {
	bin   string // the ipfence binary
	dir   string // configs, data, FIFOs, logs
	hosts int
	// Version and Advert are keepalived's VRRP version and advert
	// interval; VIP makes keepalived hold the address itself with ipfence
	// not running at all (keepalived alone, for comparison).
	version int
	advert  time.Duration
	vip     bool
	// garpRepeat is the delay of ipfence's second GARP burst (0: none).
	garpRepeat time.Duration
	// prefix tags the lab's namespaces ("op" when empty); startOnPrem
	// adds this process's pid and a sequence number, so that test
	// binaries running at once, or labs one after another in a process,
	// never share a name.
	prefix string
	// etcdDir, when set, puts the pool's epoch line in a 3-member etcd
	// whose members live there (see startOnPrem).
	etcdDir string
}

// onpremSeq numbers the labs of this process.
var onpremSeq atomic.Uint64

// onprem is ipfence on premises, in an L2 lab: every host runs
// keepalived (unicast peers, priorities falling from h1) and, unless
// keepalived alone is measured, an `ipfence serve` whose authority is
// keepalived's notify FIFO and whose driver is onprem, capturing the lab's
// mobile address for the workload behind the host.
type onprem struct {
	o     onpremOptions
	lab   *l2lab.Lab
	hosts []string

	mu  sync.Mutex
	kas map[string]*vrrp.Process
	// nodes are the ipfence processes, by host.
	nodes nemesis.Procs
	// line is the epoch line in etcd (nil: passed between the nodes).
	line *etcdLine
}

const (
	onpremInstance = "VI_1"
	onpremVRID     = 51
	onpremPort     = 7000
	workloadPort   = 8080
)

// startOnPrem builds the lab, starts the ipfence nodes (they create their
// FIFOs before keepalived writes to them) and then keepalived, and waits
// until one host holds the address and the observer reaches its workload.
func startOnPrem(ctx context.Context, o onpremOptions) (c *onprem, err error) {
	if o.prefix == "" {
		o.prefix = "op"
	}
	o.prefix = fmt.Sprintf("%s%d-%d", o.prefix, os.Getpid(), onpremSeq.Add(1))
	lab, err := l2lab.New(l2lab.Options{Prefix: o.prefix, Hosts: o.hosts})
	if err != nil {
		return nil, err
	}
	c = &onprem{o: o, lab: lab, hosts: lab.Hosts(), kas: map[string]*vrrp.Process{}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if o.etcdDir != "" {
		// The members run on this namespace's loopback, outside the
		// lab; each node reaches each member through a proxy that
		// listens on the loopback of the node's namespace, so the lab's
		// hosts carry no route out and a partition cuts a node off from
		// a member by cutting its proxy (lineNet).
		listen := func(h string) (ln net.Listener, err error) {
			err = lab.Do(h, func() error {
				ln, err = net.Listen("tcp", "127.0.0.1:0")
				return err
			})
			return ln, err
		}
		if c.line, err = startEtcdLine(ctx, o.etcdDir, c.hosts, listen); err != nil {
			return c, err
		}
	}
	for _, h := range c.hosts {
		if err := lab.ServeWorkload(h, workloadPort); err != nil {
			return c, err
		}
		if err := os.MkdirAll(filepath.Join(o.dir, h), 0o700); err != nil {
			return c, err
		}
	}
	if !o.vip {
		if err := os.WriteFile(filepath.Join(o.dir, "secret"), []byte(strings.Repeat("onprem-secret-", 3)), 0o600); err != nil {
			return c, err
		}
		for _, h := range c.hosts {
			if err := os.WriteFile(c.configPath(h), []byte(c.config(h)), 0o600); err != nil {
				return c, err
			}
			if err := c.startNode(ctx, h); err != nil {
				return c, err
			}
		}
	}
	for _, h := range c.hosts {
		if err := c.startKeepalived(h); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *onprem) configPath(h string) string { return filepath.Join(c.o.dir, h+".yaml") }
func (c *onprem) fifo(h string) string       { return filepath.Join(c.o.dir, h, "notify.fifo") }

// priority is host i's ipfence priority (1 first) and keepalived priority
// (highest first): the same order.
func (c *onprem) priority(h string) (ipfence, keepalived int) {
	for i, x := range c.hosts {
		if x == h {
			return i + 1, 150 - 50*i
		}
	}
	return 0, 0
}

// config is host h's ipfence configuration.
func (c *onprem) config(h string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node: %s\nlisten: %s\ndata_dir: %s\npeers:\n", h, net.JoinHostPort(c.lab.IP(h).String(), fmt.Sprint(onpremPort)), filepath.Join(c.o.dir, h, "data"))
	for _, p := range c.hosts {
		if p != h {
			fmt.Fprintf(&b, "  - {name: %s, url: http://%s}\n", p, net.JoinHostPort(c.lab.IP(p).String(), fmt.Sprint(onpremPort)))
		}
	}
	fmt.Fprintf(&b, "federation:\n  secret_file: %s\n", filepath.Join(c.o.dir, "secret"))
	fmt.Fprintf(&b, "providers:\n  lan:\n    type: onprem\n    workload_device: %s\n    workload_next_hop: %s\n    garp_repeat_after: %s\n",
		c.lab.WorkloadDevice(h), c.lab.WorkloadNextHop(h), c.o.garpRepeat)
	fmt.Fprintf(&b, "pools:\n  - name: vip\n    provider: lan\n    l2_domain: lab\n    addresses: [%s]\n    members:\n", c.lab.Address())
	for _, m := range c.hosts {
		prio, _ := c.priority(m)
		fmt.Fprintf(&b, "      - {node: %s, priority: %d, target: %s}\n", m, prio, c.lab.LANDevice())
	}
	if c.line != nil {
		b.WriteString("    epoch_line: etcd\n")
	}
	fmt.Fprintf(&b, "approval:\n  auto: true\n  providers: [\"*\"]\n  kinds: [\"*\"]\n  cidrs: [\"%s/32\"]\n  max_per_run: 100000\n", c.lab.Address())
	fmt.Fprintf(&b, "authority:\n  vrrp: {notify_fifo: %s, instance: %s}\n", c.fifo(h), onpremInstance)
	fmt.Fprintf(&b, "timing:\n  reconcile_interval: %s\n  heartbeat_interval: %s\n  heartbeat_ttl: %s\n", reconcileInterval, heartbeatInterval, heartbeatTTL)
	if c.line != nil {
		b.WriteString(c.line.yaml(h))
	}
	return b.String()
}

// startNode starts host h's ipfence node in h's namespace and waits for
// its "listening on" line.
func (c *onprem) startNode(ctx context.Context, h string) error {
	logf, err := os.OpenFile(filepath.Join(c.o.dir, h, "ipfence.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := c.lab.Command(h, c.o.bin, "serve", "--config", c.configPath(h), "--log-level", "info")
	if _, err := startListening(ctx, cmd, "ipfence on "+h, logf, func() { logf.Close() }); err != nil {
		logf.Close() // closing twice does no harm
		return err
	}
	c.nodes.Add(h, cmd)
	return nil
}

// keepalivedConfig is host h's VRRP instance.
func (c *onprem) keepalivedConfig(h string) vrrp.Config {
	_, prio := c.priority(h)
	cfg := vrrp.Config{
		Instance: onpremInstance, Interface: c.lab.LANDevice(), VirtualRouterID: onpremVRID,
		Priority: prio, AdvertInterval: c.o.advert, Version: c.o.version,
		UnicastSrc: c.lab.IP(h), NotifyFIFO: c.fifo(h), Preempt: true, NoVIP: !c.o.vip,
	}
	if c.o.vip {
		cfg.VIPs = []netip.Prefix{netip.PrefixFrom(c.lab.Address(), 24)}
	}
	for _, p := range c.hosts {
		if p != h {
			cfg.UnicastPeers = append(cfg.UnicastPeers, c.lab.IP(p))
		}
	}
	return cfg
}

// startKeepalived starts host h's keepalived.
func (c *onprem) startKeepalived(h string) error {
	dir := filepath.Join(c.o.dir, h, "keepalived")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p, err := vrrp.Start(context.Background(), func(name string, args ...string) *exec.Cmd { return c.lab.Command(h, name, args...) }, c.keepalivedConfig(h), dir)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.kas[h] = p
	c.mu.Unlock()
	return nil
}

// stopKeepalived stops host h's keepalived gracefully (SIGTERM: it sends a
// priority-0 advert, a planned move).
func (c *onprem) stopKeepalived(h string) error {
	c.mu.Lock()
	p := c.kas[h]
	delete(c.kas, h)
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("keepalived on %s is not running", h)
	}
	return p.Stop()
}

// stop stops every keepalived and node, then removes the lab.
func (c *onprem) stop() {
	c.mu.Lock()
	kas := c.kas
	c.kas = map[string]*vrrp.Process{}
	c.mu.Unlock()
	for _, p := range kas {
		_ = p.Kill()
	}
	c.nodes.StopAll(10 * time.Second)
	if c.line != nil {
		c.line.stop()
	}
	_ = c.lab.Close()
}
