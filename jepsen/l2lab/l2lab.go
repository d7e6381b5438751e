//go:build linux

// Package l2lab builds a layer-2 test network in network namespaces, for the
// on-premises capture driver and the ARP checks: hosts that may capture a
// mobile address by proxy-ARP, an observer on the same LAN that resolves it,
// and behind each host a workload namespace that really serves the address,
// so that a test sees which host the LAN's traffic reaches.
//
// It builds on netfault.Netns (hosts h1..hN and the observer obs are its
// nodes, on one bridge, with eth0 in 10.250.X.0/24) and adds per host:
//
//	namespace <prefix>-hN                 namespace <prefix>-wl-hN
//	eth0 10.250.X.N/24 (the LAN)
//	ip_forward on
//	wl0 198.18.K.M/30 ==================== eth0 198.18.K.M+1/30
//	                                           Address()/32 (10.250.X.200)
//	                                           default via 198.18.K.M
//
// The /30s come from 198.18.0.0/15, the range set aside for testing network
// devices, one per host, outside the LAN. Every workload namespace holds the
// same mobile address, Address(), which lies inside the LAN /24: the
// observer treats it as on-link and ARPs for it, and only a host that
// proxy-answers that ARP and routes the address towards its workload makes
// it reachable. A fresh lab has neither: the hosts have no route to the
// address until a driver acquires it. The LAN's addresses .201 to .253 stay
// unused, for an ARP observer to send its requests from (SpareAddresses).
//
// Everything needs root and the programs ip (iproute2) and nft (nftables).
package l2lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipfence/ipfence/verify/netfault"
)

// Options configure a Lab.
type Options struct {
	// Prefix names the lab's namespaces (<Prefix>-h1, <Prefix>-obs,
	// <Prefix>-wl-h1, ...), so netfault.Sweep(Prefix) removes what a killed
	// test left. Empty picks a prefix unique to this process and lab. A
	// lab holds its prefix while it lives (netfault's lock): New removes
	// what a dead run of the same prefix left, and fails when a live
	// process holds the prefix, so labs that may run at once (test
	// binaries of different packages) need prefixes of their own, such
	// as ones with the pid.
	Prefix string
	// Hosts is the number of hosts, h1..hN: 1 to MaxHosts.
	Hosts int
}

// MaxHosts keeps the hosts' and the observer's addresses (.1 to .N+1) below
// the mobile address (.200).
const MaxHosts = 100

// Names and numbers every lab uses.
const (
	observer = "obs"
	lanDev   = "eth0"
	// wlDev is the host's end of the veth towards its workload; the
	// workload's end is called eth0, its only interface besides lo.
	wlDev = "wl0"
	// mobileHost is the last byte of the mobile address in the LAN /24.
	mobileHost = 200
)

// wlBase is the first /30 of the workload links (198.18.0.0/15, RFC 2544).
var wlBase = netip.MustParseAddr("198.18.0.0")

// labSeq makes default prefixes unique within a process.
var labSeq atomic.Uint64

// Lab is a running test network. Its methods are safe for concurrent use.
type Lab struct {
	prefix  string
	hosts   []string
	ipPath  string
	net     *netfault.Netns
	ips     map[string]netip.Addr
	macs    map[string]net.HardwareAddr
	address netip.Addr
	nextHop map[string]netip.Addr

	// ctx ends with Close: it kills the processes of Command and stops
	// the workload servers.
	ctx    context.Context
	cancel context.CancelFunc
	serve  sync.WaitGroup

	mu        sync.Mutex
	listeners []net.Listener
	// What Close must remove, in that order; an item leaves its list
	// once removed, so that a Close that failed halfway can be repeated.
	wlLinks      []string // host namespaces holding a wl0
	wlNamespaces []string
}

// New builds a lab with o.Hosts hosts and the observer. It fails with an
// error naming what is missing when not run as root or without ip or nft;
// on any error it removes whatever it had built.
func New(o Options) (*Lab, error) {
	if o.Hosts < 1 || o.Hosts > MaxHosts {
		return nil, fmt.Errorf("l2lab: %d hosts: want 1 to %d", o.Hosts, MaxHosts)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("l2lab: network namespaces need root")
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("l2lab: program ip (iproute2): %w", err)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("l2lab: program nft (nftables): %w", err)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = fmt.Sprintf("l2lab%d-%d", os.Getpid(), labSeq.Add(1))
	}
	l := &Lab{
		prefix:  prefix,
		ipPath:  ipPath,
		ips:     map[string]netip.Addr{},
		macs:    map[string]net.HardwareAddr{},
		nextHop: map[string]netip.Addr{},
	}
	for i := 1; i <= o.Hosts; i++ {
		l.hosts = append(l.hosts, "h"+strconv.Itoa(i))
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if err := l.build(); err != nil {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("l2lab: cleaning up: %w", cerr))
		}
		return nil, err
	}
	return l, nil
}

func (l *Lab) build() error {
	n, err := netfault.NewNetns(l.prefix, append(slices.Clone(l.hosts), observer))
	if err != nil {
		return err
	}
	l.net = n
	for _, node := range append(slices.Clone(l.hosts), observer) {
		a, err := netip.ParseAddr(n.IP(node))
		if err != nil {
			return fmt.Errorf("l2lab: address of %s: %w", node, err)
		}
		l.ips[node] = a
	}
	subnet, err := netip.ParsePrefix(n.Subnet())
	if err != nil {
		return fmt.Errorf("l2lab: test subnet: %w", err)
	}
	a := subnet.Addr().As4()
	a[3] = mobileHost
	l.address = netip.AddrFrom4(a)

	for i, host := range l.hosts {
		if err := l.buildWorkload(i, host); err != nil {
			return err
		}
	}
	for _, node := range append(slices.Clone(l.hosts), observer) {
		err := l.Do(node, func() error {
			ifi, err := net.InterfaceByName(lanDev)
			if err != nil {
				return err
			}
			l.macs[node] = ifi.HardwareAddr
			return nil
		})
		if err != nil {
			return fmt.Errorf("l2lab: MAC of %s's %s: %w", node, lanDev, err)
		}
	}
	return nil
}

// buildWorkload makes host's workload namespace and the veth pair to it,
// and turns forwarding on in the host.
func (l *Lab) buildWorkload(i int, host string) error {
	hostNS, wlNS := l.net.Namespace(host), l.workloadNamespace(host)
	if err := l.ip("netns", "add", wlNS); err != nil {
		return err
	}
	l.mu.Lock()
	l.wlNamespaces = append(l.wlNamespaces, wlNS)
	l.mu.Unlock()
	if err := l.ip("-n", hostNS, "link", "add", wlDev, "type", "veth", "peer", "name", "eth0", "netns", wlNS); err != nil {
		return err
	}
	l.mu.Lock()
	l.wlLinks = append(l.wlLinks, hostNS)
	l.mu.Unlock()

	base := wlBase.As4()
	off := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	off += uint32(4 * i)
	at := func(k uint32) netip.Addr {
		v := off + k
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	hostSide, wlSide := at(1), at(2)
	l.nextHop[host] = wlSide

	h, w := []string{"-n", hostNS}, []string{"-n", wlNS}
	steps := [][]string{
		// No IPv6 link-local addresses: the lab carries IPv4 only, as
		// the netfault network does.
		append(slices.Clone(h), "link", "set", wlDev, "addrgenmode", "none"),
		append(slices.Clone(w), "link", "set", "eth0", "addrgenmode", "none"),
		append(slices.Clone(h), "addr", "add", hostSide.String()+"/30", "dev", wlDev),
		append(slices.Clone(h), "link", "set", wlDev, "up"),
		append(slices.Clone(w), "link", "set", "lo", "up"),
		append(slices.Clone(w), "addr", "add", wlSide.String()+"/30", "dev", "eth0"),
		append(slices.Clone(w), "addr", "add", l.address.String()+"/32", "dev", "eth0"),
		append(slices.Clone(w), "link", "set", "eth0", "up"),
		append(slices.Clone(w), "route", "add", "default", "via", hostSide.String(), "dev", "eth0"),
	}
	for _, s := range steps {
		if err := l.ip(s...); err != nil {
			return err
		}
	}
	return l.Do(host, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
			return fmt.Errorf("l2lab: ip_forward on in %s: %w", host, err)
		}
		return nil
	})
}

func (l *Lab) workloadNamespace(host string) string { return l.prefix + "-wl-" + host }

// Hosts returns the hosts' names, h1..hN.
func (l *Lab) Hosts() []string { return slices.Clone(l.hosts) }

// Observer returns the observer's name, "obs": a node on the LAN that no
// partition cuts, from which tests resolve and reach the mobile address.
func (l *Lab) Observer() string { return observer }

// LANDevice returns the LAN interface's name in every host and in the
// observer: "eth0".
func (l *Lab) LANDevice() string { return lanDev }

// IP returns a host's or the observer's LAN address; the zero Addr for
// any other name.
func (l *Lab) IP(node string) netip.Addr { return l.ips[node] }

// MAC returns the hardware address of a host's or the observer's eth0; nil
// for any other name.
func (l *Lab) MAC(node string) net.HardwareAddr { return slices.Clone(l.macs[node]) }

// Address returns the mobile /32: inside the LAN /24, so that the observer
// ARPs for it directly, and held by every workload namespace.
func (l *Lab) Address() netip.Addr { return l.address }

// WorkloadDevice returns the name of host's interface towards its workload
// namespace (the same in every host, each in its own namespace).
func (l *Lab) WorkloadDevice(host string) string {
	if !slices.Contains(l.hosts, host) {
		return ""
	}
	return wlDev
}

// WorkloadNextHop returns the workload namespace's address on its link to
// host: a route to Address() may go via it.
func (l *Lab) WorkloadNextHop(host string) netip.Addr { return l.nextHop[host] }

// namespace maps a node name (a host, "obs", or "wl-<host>") to its
// namespace.
func (l *Lab) namespace(node string) (string, error) {
	if node == observer || slices.Contains(l.hosts, node) {
		return l.net.Namespace(node), nil
	}
	if h, ok := strings.CutPrefix(node, "wl-"); ok && slices.Contains(l.hosts, h) {
		return l.workloadNamespace(h), nil
	}
	return "", fmt.Errorf("l2lab: no node %q (hosts %v, %q, or wl-<host>)", node, l.hosts, observer)
}

// Command returns a command that runs name with args in node's namespace:
// a host, the observer, or a workload namespace "wl-<host>". Close kills
// it if it still runs. For an unknown node the command fails to start.
func (l *Lab) Command(node, name string, args ...string) *exec.Cmd {
	ns, err := l.namespace(node)
	// ip netns exec runs the program in its own process, so killing the
	// command kills the program, not a wrapper.
	cmd := exec.CommandContext(l.ctx, l.ipPath, append([]string{"netns", "exec", ns, name}, args...)...)
	if err != nil {
		cmd.Err = err
	}
	return cmd
}

// Do runs f on an OS thread switched into node's namespace and waits for
// it. Sockets (netlink, packet, TCP) that f opens stay in that namespace
// for their whole life, wherever they are used afterwards; so do files f
// opens under /proc/sys/net. Goroutines that f starts run in the root
// namespace. f runs on a goroutine of its own: it must not call
// t.FailNow or t.Fatal.
func (l *Lab) Do(node string, f func() error) error {
	ns, err := l.namespace(node)
	if err != nil {
		return err
	}
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return fmt.Errorf("l2lab: namespace of %s: %w", node, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		returned := false
		// A panic in f becomes an error: on this goroutine it would
		// end the process and skip the test's clean-up, leaving the
		// lab's namespaces behind.
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("l2lab: Do(%s): panic: %v\n%s", node, r, debug.Stack())
			} else if !returned {
				errc <- fmt.Errorf("l2lab: Do(%s): f exited without returning", node)
			}
		}()
		// The thread is locked for good unless it gets back to its own
		// namespace: the runtime then ends it with this goroutine
		// instead of handing a thread in the wrong namespace to other
		// goroutines.
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			returned = true
			errc <- fmt.Errorf("l2lab: Do(%s): own namespace: %w", node, err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			returned = true
			errc <- fmt.Errorf("l2lab: Do(%s): entering %s: %w", node, ns, err)
			return
		}
		defer func() {
			if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
				runtime.UnlockOSThread()
			}
		}()
		ferr := f()
		returned = true
		errc <- ferr
	}()
	return <-errc
}

// Partition cuts the links of g between hosts, as netfault.Netns.Apply
// does: IP packets from a host to another host's own address are dropped
// on arrival. ARP still flows, and so does traffic a host forwards (to its
// workload), which never reaches the input hook the cut is made in. g may
// name hosts only: the observer is never cut.
func (l *Lab) Partition(g netfault.Grudge) error {
	for _, node := range g.Nodes() {
		if !slices.Contains(l.hosts, node) {
			return fmt.Errorf("l2lab: grudge %s names %q: a partition cuts hosts %v only", g, node, l.hosts)
		}
	}
	return l.net.Apply(g)
}

// Heal removes every cut.
func (l *Lab) Heal() error { return l.net.Heal() }

// ServeWorkload starts a TCP server in host's workload namespace, on
// Address():port, that writes the host's name to each connection and
// closes it: a client learns which host's workload it reached. Close stops
// it.
func (l *Lab) ServeWorkload(host string, port int) error {
	if !slices.Contains(l.hosts, host) {
		return fmt.Errorf("l2lab: serve workload: no host %q", host)
	}
	addr := netip.AddrPortFrom(l.address, uint16(port)).String()
	var ln net.Listener
	err := l.Do("wl-"+host, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return fmt.Errorf("l2lab: serve workload of %s on %s: %w", host, addr, err)
	}
	l.mu.Lock()
	if l.ctx.Err() != nil {
		l.mu.Unlock()
		ln.Close()
		return errors.New("l2lab: serve workload after Close")
	}
	l.listeners = append(l.listeners, ln)
	l.serve.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.serve.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, host)
			_ = c.Close()
		}
	}()
	return nil
}

// Close stops the workload servers, kills the processes started through
// Command, and removes every link and namespace of the lab. It may be
// called again, also after a failed New or a failed Close, and then removes
// what is left.
func (l *Lab) Close() error {
	l.cancel()
	l.mu.Lock()
	for _, ln := range l.listeners {
		_ = ln.Close()
	}
	l.listeners = nil
	l.mu.Unlock()
	l.serve.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	// Links first: a deleted namespace is torn down by the kernel later,
	// a deleted veth end takes its peer at once.
	l.wlLinks = slices.DeleteFunc(l.wlLinks, func(ns string) bool {
		err := l.ip("-n", ns, "link", "del", wlDev)
		if err != nil && !gone(err) {
			errs = append(errs, err)
			return false
		}
		return true
	})
	l.wlNamespaces = slices.DeleteFunc(l.wlNamespaces, func(ns string) bool {
		err := l.ip("netns", "del", ns)
		if err != nil && !gone(err) {
			errs = append(errs, err)
			return false
		}
		return true
	})
	if l.net != nil {
		if err := l.net.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// defaultPrefixRE matches the namespaces of labs built with a default
// prefix, l2lab<pid>-<n>-<node>, and captures the prefix and the pid.
var defaultPrefixRE = regexp.MustCompile(`^(l2lab([0-9]+)-[0-9]+)-`)

// SweepOrphans removes the labs with default prefixes whose process has
// died without closing them (a test binary killed at its timeout, or a
// crash); labs of live processes are left alone. l2labtest.New calls it, so
// that one crashed run does not leave its namespaces behind for good.
func SweepOrphans() error {
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("l2lab: program ip (iproute2): %w", err)
	}
	out, err := exec.Command(ipPath, "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("l2lab: ip netns list: %w", err)
	}
	dead := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := defaultPrefixRE.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[2])
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		dead[m[1]] = true
	}
	var errs []error
	for prefix := range dead {
		errs = append(errs, netfault.Sweep(prefix))
	}
	return errors.Join(errs...)
}

// alive reports whether a process with that pid exists.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// gone reports whether err says that what was to be removed is not there.
func gone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") ||
		strings.Contains(s, "No such file or directory") ||
		strings.Contains(s, "does not exist")
}

// ip runs the ip program; an error carries the command and its standard
// error.
func (l *Lab) ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command(l.ipPath, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("l2lab: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
