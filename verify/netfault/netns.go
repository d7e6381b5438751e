//go:build linux

package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Netns is a test network of one network namespace per node, joined by a
// bridge in a namespace of its own and reachable from the root namespace;
// the package documentation draws it. Links are cut with nftables. Netns
// needs root and the programs ip (iproute2) and nft (nftables). It is safe
// for concurrent use.
type Netns struct {
	prefix   string
	nodes    []string
	ips      map[string]netip.Addr
	host     netip.Addr
	subnet   netip.Prefix
	ipPath   string
	nftPath  string
	bridgeNS string

	mu     sync.Mutex
	closed bool
	// lock is the prefix's lock file, flocked while this Netns lives
	// (see claimPrefix); Close releases it last.
	lock *os.File
	// What Close must remove, in that order; an item leaves its list once
	// removed, so a Close that failed halfway can be called again.
	hostLink   string
	bridgePort []string
	namespaces []string
}

// nftTable is the one table Apply owns in each node's namespace.
const nftTable = "inet netfault"

// maxNodes leaves .254 of the /24 to the root namespace's address and .0
// and .255 to the network and broadcast.
const maxNodes = 253

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// NewNetns creates the namespaces <prefix>-<node> for every node and
// <prefix>-br for the bridge, the links between them and the root-side link
// (see the package documentation). On error it removes whatever it created.
// Processes started in the namespaces must be stopped before Close.
func NewNetns(prefix string, nodes []string) (*Netns, error) {
	if err := checkNames(prefix, nodes); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("netfault: network namespaces need root")
	}
	n := &Netns{
		prefix:   prefix,
		nodes:    slices.Clone(nodes),
		ips:      map[string]netip.Addr{},
		bridgeNS: prefix + "-br",
	}
	var err error
	if n.ipPath, err = exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("netfault: program ip (iproute2): %w", err)
	}
	if n.nftPath, err = exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("netfault: program nft (nftables): %w", err)
	}
	// Networks of processes that died before Close go first: their
	// namespaces would otherwise stay until the machine reboots.
	_ = SweepOrphans()
	if n.lock, err = claimPrefix(prefix); err != nil {
		return nil, err
	}
	// Holding the lock, nothing named <prefix>-... belongs to a live
	// Netns: a namespace of that name was left by a run that died.
	if err := Sweep(prefix); err != nil {
		n.releasePrefix()
		return nil, fmt.Errorf("netfault: removing what a dead run with prefix %q left: %w", prefix, err)
	}
	if err := n.build(); err != nil {
		if cerr := n.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("netfault: cleaning up: %w", cerr))
		}
		return nil, err
	}
	return n, nil
}

func checkNames(prefix string, nodes []string) error {
	if !nameRE.MatchString(prefix) {
		return fmt.Errorf("netfault: namespace prefix %q: want letters, digits, '_', '.', '-'", prefix)
	}
	if len(nodes) == 0 || len(nodes) > maxNodes {
		return fmt.Errorf("netfault: %d nodes: want 1 to %d", len(nodes), maxNodes)
	}
	seen := map[string]bool{}
	for _, node := range nodes {
		if !nameRE.MatchString(node) || node == "br" {
			return fmt.Errorf("netfault: node name %q: want letters, digits, '_', '.', '-', and not \"br\"", node)
		}
		if seen[node] {
			return fmt.Errorf("netfault: node %q listed twice", node)
		}
		seen[node] = true
	}
	return nil
}

func (n *Netns) build() error {
	if err := n.ip("netns", "add", n.bridgeNS); err != nil {
		return err
	}
	n.namespaces = append(n.namespaces, n.bridgeNS)
	if err := n.claimSubnet(); err != nil {
		return err
	}
	br := []string{"-n", n.bridgeNS}
	if err := n.ip(append(br, "link", "add", "br0", "type", "bridge")...); err != nil {
		return err
	}
	n.noIPv6(br, "br0")
	n.noIPv6(br, "host")
	steps := [][]string{
		append(br, "link", "set", "br0", "up"),
		append(br, "link", "set", "host", "master", "br0", "up"),
		{"addr", "add", n.host.String() + "/24", "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
	}
	for _, s := range steps {
		if err := n.ip(s...); err != nil {
			return err
		}
	}
	// Nothing that arrives from the test network may be routed on, even
	// on a machine that forwards between its other interfaces. The nodes
	// have no route out anyway; this is the second lock, and only a
	// read-only /proc/sys refuses it, which leaves the first one in place.
	_ = os.WriteFile("/proc/sys/net/ipv4/conf/"+n.hostLink+"/forwarding", []byte("0"), 0)

	for i, node := range n.nodes {
		ns := n.Namespace(node)
		if err := n.ip("netns", "add", ns); err != nil {
			return err
		}
		n.namespaces = append(n.namespaces, ns)
		port := "v" + strconv.Itoa(i)
		if err := n.ip(append(br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)...); err != nil {
			return err
		}
		n.bridgePort = append(n.bridgePort, port)
		addr := n.subnet.Addr().As4()
		addr[3] = byte(i + 1)
		n.ips[node] = netip.AddrFrom4(addr)
		in := []string{"-n", ns}
		n.noIPv6(in, "eth0")
		n.noIPv6(br, port)
		steps := [][]string{
			append(in, "link", "set", "lo", "up"),
			append(in, "addr", "add", n.ips[node].String()+"/24", "dev", "eth0"),
			append(in, "link", "set", "eth0", "up"),
			append(br, "link", "set", port, "master", "br0", "up"),
		}
		for _, s := range steps {
			if err := n.ip(s...); err != nil {
				return err
			}
		}
	}
	return nil
}

// noIPv6 stops a link from giving itself an IPv6 link-local address, so the
// test network carries IPv4 only, which is all the nftables rules filter.
// A kernel without IPv6 refuses the setting and has nothing to switch off.
func (n *Netns) noIPv6(nsArgs []string, link string) {
	_ = n.ip(append(slices.Clone(nsArgs), "link", "set", link, "addrgenmode", "none")...)
}

// claimSubnet picks the /24 of 10.250.0.0/16 for this run: the one the
// prefix hashes to, or the next one free. Free means that no address or
// route of the root namespace overlaps it and no other run holds it; a run
// holds X while the root-side link nf250-X exists, and creating a link
// that exists fails, which makes the claim atomic between processes.
func (n *Netns) claimSubnet() error {
	used, err := n.usedPrefixes()
	if err != nil {
		return err
	}
	h := fnv.New32a()
	h.Write([]byte(n.prefix))
	base := h.Sum32() % 256
	for i := range uint32(256) {
		x := byte((base + i) % 256)
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, x, 0}), 24)
		if slices.ContainsFunc(used, subnet.Overlaps) {
			continue
		}
		link := "nf250-" + strconv.Itoa(int(x))
		err := n.ip("link", "add", link, "type", "veth", "peer", "name", "host", "netns", n.bridgeNS)
		if err != nil && strings.Contains(err.Error(), "File exists") {
			continue
		}
		if err != nil {
			return err
		}
		n.hostLink = link
		n.subnet = subnet
		n.host = netip.AddrFrom4([4]byte{10, 250, x, 254})
		n.noIPv6(nil, link)
		return nil
	}
	return errors.New("netfault: every /24 of 10.250.0.0/16 overlaps an address or route of this machine or another run")
}

// usedPrefixes lists the IPv4 addresses and routes of the root namespace,
// except the default route, which overlaps everything.
func (n *Netns) usedPrefixes() ([]netip.Prefix, error) {
	var used []netip.Prefix
	addrs, err := n.output("-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(addrs) {
		f := strings.Fields(line)
		if i := slices.Index(f, "inet"); i >= 0 && i+1 < len(f) {
			if p, err := netip.ParsePrefix(f[i+1]); err == nil {
				used = append(used, p.Masked())
			}
		}
	}
	routes, err := n.output("-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(routes) {
		// A line starts with the destination, or with the route type
		// ("local", "broadcast", ...) and then the destination.
		f := strings.Fields(line)
		for _, tok := range f[:min(2, len(f))] {
			if p, err := netip.ParsePrefix(tok); err == nil {
				used = append(used, p.Masked())
				break
			}
			if a, err := netip.ParseAddr(tok); err == nil {
				used = append(used, netip.PrefixFrom(a, 32))
				break
			}
		}
	}
	return used, nil
}

// Namespace returns the name of node's network namespace.
func (n *Netns) Namespace(node string) string { return n.prefix + "-" + node }

// Nodes returns the nodes in the order given to NewNetns.
func (n *Netns) Nodes() []string { return slices.Clone(n.nodes) }

// IP returns node's address, or "" for a node that is not in the network.
func (n *Netns) IP(node string) string {
	a, ok := n.ips[node]
	if !ok {
		return ""
	}
	return a.String()
}

// HostIP returns the root namespace's address on the test network: a
// service there (the cloud simulator) that listens on it, or on all
// addresses, is reachable from every node, partitions or not.
func (n *Netns) HostIP() string { return n.host.String() }

// Subnet returns the test network's /24.
func (n *Netns) Subnet() string { return n.subnet.String() }

// Command returns a command that runs name with args inside node's
// namespace (ip netns exec). For a node not in the network the command
// fails to start.
func (n *Netns) Command(node string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(n.ipPath, append([]string{"netns", "exec", n.Namespace(node), name}, args...)...)
	if _, ok := n.ips[node]; !ok {
		cmd.Err = fmt.Errorf("netfault: no node %q in the network %s", node, n.prefix)
	}
	return cmd
}

// Apply cuts exactly the grudge's links and heals all others: in the
// namespace of every node b it replaces the table inet netfault, in one nft
// transaction, with one whose input chain drops the packets from each node
// that cannot reach b. Established connections stall and new ones time
// out. A directed cut (a cannot reach b) drops a's packets to b only, which
// is enough to break TCP both ways. Namespaces are updated one after
// another, not all at once.
func (n *Netns) Apply(g Grudge) error {
	for _, node := range g.Nodes() {
		if _, ok := n.ips[node]; !ok {
			return fmt.Errorf("netfault: grudge %s names node %q, not in the network %v", g, node, n.nodes)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netfault: Apply after Close")
	}
	var errs []error
	for _, b := range n.nodes {
		var from []string
		for _, a := range n.nodes {
			if g.Cuts(a, b) {
				from = append(from, n.ips[a].String())
			}
		}
		if err := n.nft(b, rules(from)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rules is the nft script that replaces the table with one dropping packets
// from the addresses given; with none, it only removes the table. Declaring
// the table before deleting it makes the delete succeed when the table
// does not exist yet, and the whole script is one transaction.
func rules(from []string) string {
	s := "table " + nftTable + "\ndelete table " + nftTable + "\n"
	if len(from) == 0 {
		return s
	}
	return s + "table " + nftTable + " {\n" +
		"\tchain input {\n" +
		"\t\ttype filter hook input priority filter; policy accept;\n" +
		"\t\tip saddr { " + strings.Join(from, ", ") + " } drop\n" +
		"\t}\n" +
		"}\n"
}

// Heal removes every cut.
func (n *Netns) Heal() error { return n.Apply(nil) }

// Rules returns the nftables ruleset of node's namespace, for logs and for
// tests.
func (n *Netns) Rules(node string) (string, error) {
	if _, ok := n.ips[node]; !ok {
		return "", fmt.Errorf("netfault: no node %q in the network %s", node, n.prefix)
	}
	cmd := exec.Command(n.ipPath, "netns", "exec", n.Namespace(node), n.nftPath, "list", "ruleset")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("netfault: nft list ruleset in %s: %w: %s", n.Namespace(node), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Close removes every link and namespace the network created. It may be
// called again, also after a failed NewNetns or a failed Close, and then
// removes what is left. Processes still running in a node's namespace keep
// that namespace alive, with loopback only, until they exit.
func (n *Netns) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	var errs []error
	// Deleting one end of a veth deletes the other at once, whereas a
	// deleted namespace is torn down by the kernel later: remove the
	// links first, so none is left behind when Close returns.
	if n.hostLink != "" {
		if err := n.ip("link", "del", n.hostLink); err != nil && !gone(err) {
			errs = append(errs, err)
		} else {
			n.hostLink = ""
		}
	}
	n.bridgePort = slices.DeleteFunc(n.bridgePort, func(port string) bool {
		err := n.ip("-n", n.bridgeNS, "link", "del", port)
		if err != nil && !gone(err) {
			errs = append(errs, err)
			return false
		}
		return true
	})
	n.namespaces = slices.DeleteFunc(n.namespaces, func(ns string) bool {
		err := n.ip("netns", "del", ns)
		if err != nil && !gone(err) {
			errs = append(errs, err)
			return false
		}
		return true
	})
	// The prefix stays claimed while anything of it is left, so that a
	// repeated Close, not another run, removes the rest.
	if len(errs) == 0 {
		n.releasePrefix()
	}
	return errors.Join(errs...)
}

// lockDir holds one lock file per prefix in use, <prefix>.lock, flocked by
// the process whose Netns uses it. The kernel drops a flock when its
// process dies, however it dies (SIGKILL at a test timeout included): a
// lock file nobody holds marks a prefix whose namespaces, if any, a dead
// run left.
const lockDir = "/run/netfault"

// claimPrefix takes the prefix's lock, waiting a little for a sweeper that
// holds it briefly (SweepOrphans of another process), and fails naming the
// holder when a live Netns has it.
func claimPrefix(prefix string) (*os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, fmt.Errorf("netfault: lock directory: %w", err)
	}
	path := lockDir + "/" + prefix + ".lock"
	deadline := time.Now().Add(3 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("netfault: lock of prefix %q: %w", prefix, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// A sweeper may have removed the file between our open and
			// our flock: a lock on an unlinked file guards nothing.
			if fi, serr := f.Stat(); serr == nil {
				if pi, perr := os.Stat(path); perr == nil && os.SameFile(fi, pi) {
					_ = f.Truncate(0)
					_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
					return f, nil
				}
			}
			f.Close()
			continue
		}
		holder, _ := os.ReadFile(path)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("netfault: lock of prefix %q: %w", prefix, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("netfault: prefix %q is in use by a live process (pid %s, lock %s)", prefix, strings.TrimSpace(string(holder)), path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// releasePrefix removes and unlocks the prefix's lock file.
func (n *Netns) releasePrefix() {
	if n.lock == nil {
		return
	}
	_ = os.Remove(n.lock.Name())
	_ = n.lock.Close()
	n.lock = nil
}

// SweepOrphans removes the networks whose process died before Close: for
// every lock file in /run/netfault that no live process holds, the
// prefix's namespaces (Sweep) and the lock file. Networks of live
// processes are left alone. NewNetns calls it.
func SweepOrphans() error {
	entries, err := os.ReadDir(lockDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("netfault: %w", err)
	}
	var errs []error
	for _, e := range entries {
		prefix, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !nameRE.MatchString(prefix) {
			continue
		}
		path := lockDir + "/" + e.Name()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // a live Netns holds it
			continue
		}
		if err := Sweep(prefix); err != nil {
			errs = append(errs, err)
		} else {
			_ = os.Remove(path)
		}
		f.Close()
	}
	return errors.Join(errs...)
}

// Sweep removes what a Netns with this prefix left behind when its process
// died before Close: every namespace named <prefix>-..., the processes
// still running in them (SIGKILL), and the veth links in them, whose peers
// go with them. NewNetns calls it for its prefix once it holds the
// prefix's lock, and SweepOrphans for prefixes nobody holds. It needs root
// and ip.
func Sweep(prefix string) error {
	if !nameRE.MatchString(prefix) {
		return fmt.Errorf("netfault: namespace prefix %q: want letters, digits, '_', '.', '-'", prefix)
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("netfault: program ip (iproute2): %w", err)
	}
	n := &Netns{ipPath: ipPath}
	list, err := n.output("netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for line := range strings.Lines(list) {
		// "name" or "name (id: 3)"
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix+"-") {
			continue
		}
		ns := f[0]
		// What the dead run started in its namespaces outlives it (a
		// test binary killed at its timeout leaves its daemons behind,
		// adopted by init): they go with the namespace they were
		// started for, or they would run on, forever, in a namespace
		// with nothing but loopback.
		pids, err := n.output("netns", "pids", ns)
		if err != nil && !gone(err) {
			errs = append(errs, err)
		}
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		links, err := n.output("-n", ns, "-o", "link", "show", "type", "veth")
		if err != nil && !gone(err) {
			errs = append(errs, err)
		}
		for line := range strings.Lines(links) {
			// "5: host@if6: <BROADCAST,..."
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if err := n.ip("-n", ns, "link", "del", name); err != nil && !gone(err) {
				errs = append(errs, err)
			}
		}
		if err := n.ip("netns", "del", ns); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gone reports whether err says that what was to be removed is not there.
func gone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") ||
		strings.Contains(s, "No such file or directory") ||
		strings.Contains(s, "does not exist")
}

// ip runs the ip program with args.
func (n *Netns) ip(args ...string) error {
	_, err := n.output(args...)
	return err
}

// output runs the ip program with args and returns its standard output; an
// error carries the command and its standard error.
func (n *Netns) output(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(n.ipPath, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netfault: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// nft runs an nft script in node's namespace.
func (n *Netns) nft(node, script string) error {
	cmd := exec.Command(n.ipPath, "netns", "exec", n.Namespace(node), n.nftPath, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netfault: nft in %s: %w: %s", n.Namespace(node), err, bytes.TrimSpace(out))
	}
	return nil
}
