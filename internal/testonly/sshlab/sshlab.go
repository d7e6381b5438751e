//go:build linux

// Package sshlab builds machines to reach over SSH on this host: one
// network namespace per node (netfault.Netns), each running Debian's
// OpenSSH server on the node's namespace address, with a fresh host key,
// a client key allowed to log in as root, a known_hosts file and a nodes
// file that verify/control reads. Nothing listens on a host address: the
// servers are reached through the test network's root-side link only.
//
// Commands run over SSH run inside the node's namespace, so that nftables
// rules a test installs over SSH cut that node's traffic alone, as on a
// machine of its own. The file system is the host's: a file uploaded to a
// node is a file on this machine.
package sshlab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/netfault"
)

// Sshd is where Debian's openssh-server puts the server; sshd must be
// started by its absolute path (it re-executes itself).
const Sshd = "/usr/sbin/sshd"

// Lab is a set of nodes reachable over SSH.
type Lab struct {
	dir   string
	net   *netfault.Netns
	nodes []control.Node

	key        string
	knownHosts string
	nodesFile  string

	// removeDir: New made dir, so Close removes it.
	removeDir bool

	mu   sync.Mutex
	sshd map[string]*exec.Cmd
	done map[string]chan struct{}
}

var labSeq atomic.Int64

// Options configure New.
type Options struct {
	// Nodes are the node names (default n1, n2, n3).
	Nodes []string
	// Prefix names the namespaces (default sshlab<pid>-<seq>); runs at
	// the same time need different prefixes.
	Prefix string
	// Dir holds the keys, configurations and logs (default a new
	// temporary folder, removed by Close).
	Dir string
}

// New builds the lab and waits until every server accepts connections.
// On error it removes whatever it built.
func New(o Options) (l *Lab, err error) {
	if len(o.Nodes) == 0 {
		o.Nodes = []string{"n1", "n2", "n3"}
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("sshlab%d-%d", os.Getpid(), labSeq.Add(1))
	}
	if _, err := os.Stat(Sshd); err != nil {
		return nil, fmt.Errorf("sshlab: the OpenSSH server %s (apt-get install openssh-server): %w", Sshd, err)
	}
	removeDir := false
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "sshlab-"); err != nil {
			return nil, err
		}
		removeDir = true
	}
	l = &Lab{dir: o.Dir, removeDir: removeDir, sshd: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}}
	defer func() {
		if err != nil {
			if cerr := l.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("sshlab: cleaning up: %w", cerr))
			}
		}
	}()
	// sshd refuses to start without its privilege separation folder,
	// which Debian's service unit creates at boot and a container lacks.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshlab: /run/sshd: %w", err)
	}
	if l.net, err = netfault.NewNetns(o.Prefix, o.Nodes); err != nil {
		return nil, err
	}
	if err := l.writeClientKey(); err != nil {
		return nil, err
	}
	var known []string
	for _, name := range o.Nodes {
		line, err := l.startNode(name)
		if err != nil {
			return nil, err
		}
		known = append(known, line)
	}
	l.knownHosts = filepath.Join(l.dir, "known_hosts")
	if err := os.WriteFile(l.knownHosts, []byte(strings.Join(known, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	l.nodesFile = filepath.Join(l.dir, "nodes")
	if err := os.WriteFile(l.nodesFile, []byte(control.FormatNodes(l.nodes)), 0o600); err != nil {
		return nil, err
	}
	for _, n := range l.nodes {
		if err := waitListening(n, 30*time.Second); err != nil {
			return nil, fmt.Errorf("sshlab: sshd of %s: %w; its log: %s", n.Name, err, l.LogTail(n.Name))
		}
	}
	return l, nil
}

// writeClientKey makes the key the lab's nodes accept for root.
func (l *Lab) writeClientKey() error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "sshlab client")
	if err != nil {
		return err
	}
	l.key = filepath.Join(l.dir, "id_ed25519")
	if err := os.WriteFile(l.key, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(sp), 0o600)
}

// startNode writes the node's host key and configuration and starts its
// sshd; it returns the node's known_hosts line.
func (l *Lab) startNode(name string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "sshlab host "+name)
	if err != nil {
		return "", err
	}
	hostKey := filepath.Join(l.dir, "host_"+name)
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	ip := l.net.IP(name)
	// StrictModes no: the files are in a temporary folder whose modes
	// sshd's checks of a home folder do not expect. MaxSessions: the
	// harness runs a node's commands as sessions of one connection, more
	// than OpenSSH's default 10 at once when probes and faults overlap.
	// SetEnv SHLVL=1: sshd runs each command through root's login shell,
	// and Debian's bash, started by sshd at level 1, sources ~/.bashrc;
	// this machine's runs pyenv init, whose rehash lock held concurrent
	// commands for minutes. At level 2 bash leaves .bashrc alone.
	cfg := fmt.Sprintf(`ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 64
MaxStartups 64
SetEnv SHLVL=1
LogLevel VERBOSE
`, ip, hostKey, filepath.Join(l.dir, "authorized_keys"))
	cfgPath := filepath.Join(l.dir, "sshd_"+name+".conf")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	if err := l.startSshd(name); err != nil {
		return "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	l.nodes = append(l.nodes, control.Node{Name: name, Address: ip, Port: 22, User: "root", Key: l.key})
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(ip, "22"))}, sp), nil
}

func (l *Lab) startSshd(name string) error {
	log, err := os.OpenFile(l.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	// -D: in the foreground, so that the lab holds its process; -e: the
	// log on stderr.
	cmd := l.net.Command(name, Sshd, "-D", "-e", "-f", filepath.Join(l.dir, "sshd_"+name+".conf"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshlab: starting sshd for %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	l.mu.Lock()
	l.sshd[name], l.done[name] = cmd, done
	l.mu.Unlock()
	return nil
}

// waitListening dials the node's SSH port until it answers with an SSH
// banner, or until the limit (which only a wedged machine reaches).
func waitListening(n control.Node, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	addr := net.JoinHostPort(n.Address, strconv.Itoa(n.Port))
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4)
			_, err = c.Read(buf)
			c.Close()
			if err == nil && string(buf) == "SSH-" {
				return nil
			}
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no SSH server at %s after %v: %v", addr, limit, last)
}

// Nodes returns the lab's nodes, as its nodes file lists them.
func (l *Lab) Nodes() []control.Node { return append([]control.Node(nil), l.nodes...) }

// NodesFile returns the path of the lab's nodes file.
func (l *Lab) NodesFile() string { return l.nodesFile }

// KnownHosts returns the path of a known_hosts file holding every node's
// host key.
func (l *Lab) KnownHosts() string { return l.knownHosts }

// Key returns the path of the client's private key.
func (l *Lab) Key() string { return l.key }

// Dir returns the lab's folder.
func (l *Lab) Dir() string { return l.dir }

// Net returns the lab's network, for its addresses and namespaces.
func (l *Lab) Net() *netfault.Netns { return l.net }

// LogPath returns the file node's sshd logs to.
func (l *Lab) LogPath(node string) string { return filepath.Join(l.dir, "sshd_"+node+".log") }

// LogTail returns the end of node's sshd log, for error messages.
func (l *Lab) LogTail(node string) string {
	b, err := os.ReadFile(l.LogPath(node))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Remote returns an SSH remote for node, checked against the lab's
// known_hosts.
func (l *Lab) Remote(node string) (*control.SSH, error) {
	for _, n := range l.nodes {
		if n.Name == node {
			return control.NewSSH(n, control.SSHOptions{KnownHosts: []string{l.knownHosts}})
		}
	}
	return nil, fmt.Errorf("sshlab: no node %q", node)
}

// DropConnections kills node's per-connection sshd processes (the
// listener's children) and keeps the listener: every client connection to
// the node breaks at once, as when a node's network flaps or sshd is
// restarted, and new ones are accepted. It returns how many it killed.
func (l *Lab) DropConnections(node string) (int, error) {
	l.mu.Lock()
	cmd := l.sshd[node]
	l.mu.Unlock()
	if cmd == nil {
		return 0, fmt.Errorf("sshlab: no sshd for %q", node)
	}
	// The lab started ip netns exec, which execs sshd: the pid is sshd's.
	pid := cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, fmt.Errorf("sshlab: children of sshd %d: %w", pid, err)
	}
	n := 0
	for _, f := range strings.Fields(string(b)) {
		child, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if syscall.Kill(child, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n, nil
}

// Close stops every process in the nodes' namespaces (the servers, and
// whatever was started over SSH and still runs there), then removes the
// network and, when New made it, the folder. It may be called again after
// an error.
func (l *Lab) Close() error {
	var errs []error
	if l.net != nil {
		for _, name := range l.net.Nodes() {
			if err := killNamespace(l.net.Namespace(name)); err != nil {
				errs = append(errs, err)
			}
		}
		l.mu.Lock()
		done := l.done
		l.mu.Unlock()
		for name, d := range done {
			select {
			case <-d:
			case <-time.After(10 * time.Second):
				errs = append(errs, fmt.Errorf("sshlab: sshd of %s did not exit", name))
			}
		}
		if err := l.net.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && l.removeDir {
		if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killNamespace kills, by pid, each process in the namespace, until none
// is left: a daemon started over SSH outlives the server that started it.
func killNamespace(ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
		if err != nil {
			// A namespace already removed holds nothing.
			if _, serr := os.Stat(filepath.Join("/run/netns", ns)); os.IsNotExist(serr) {
				return nil
			}
			return fmt.Errorf("sshlab: listing the processes of %s: %w", ns, err)
		}
		pids := strings.Fields(string(out))
		alive := 0
		for _, f := range pids {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			// A zombie counts for ip netns pids until its parent
			// reaps it; it holds nothing of the namespace's network.
			if zombie(pid) {
				continue
			}
			alive++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if alive == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sshlab: processes %v of %s outlived SIGKILL", pids, ns)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
