package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// devConsole is a running `ipfence-verify dev`: its stdout read line by line,
// its stdin to type on, its stderr kept.
type devConsole struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan string
	mu    sync.Mutex
	seen  []string
	logs  bytes.Buffer
}

func (d *devConsole) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.Write(p)
}

// expect reads lines until one matches re, and returns its submatches.
func (d *devConsole) expect(re string, within time.Duration) []string {
	d.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("dev ended before a line matching %q; it printed:\n%s", re, d.output())
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				d.t.Logf("dev: %s", l)
				return m
			}
		case <-deadline:
			d.t.Fatalf("no line matching %q within %s; dev printed:\n%s", re, within, d.output())
		}
	}
}

func (d *devConsole) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.seen, "\n")
}

func (d *devConsole) logged() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

func (d *devConsole) typeLine(s string) {
	d.t.Helper()
	if _, err := io.WriteString(d.stdin, s+"\n"); err != nil {
		d.t.Fatal(err)
	}
}

func startDev(t *testing.T, args ...string) *devConsole {
	d := &devConsole{t: t, lines: make(chan string, 1024)}
	d.cmd = exec.Command(binary(t), append([]string{"dev"}, args...)...)
	in, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdin = in
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Signal(syscall.SIGTERM)
			d.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.mu.Lock()
			d.seen = append(d.seen, sc.Text())
			d.mu.Unlock()
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	return d
}

// TestDevFailover runs `ipfence-verify dev` as a user would: a node killed with
// SIGKILL is named, the others go on and take its addresses (each move a
// line), and "restart" typed on dev's stdin starts it again. --log-level
// reaches the nodes.
func TestDevFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes: a simulator and three nodes")
	}
	d := startDev(t, "--nodes", "3", "--addresses", "2", "--log-level", "info")
	dir := d.expect(`^ipfence-verify dev: a cloud simulator and 3 nodes on loopback, in (\S+) \(log level info\)$`, time.Minute)[1]
	pids, urls := map[string]int{}, map[string]string{}
	for range 3 {
		m := d.expect(`^  (n\d)\s+pid (\d+)\s+(http://127\.0\.0\.1:\d+)$`, 10*time.Second)
		pids[m[1]], _ = strconv.Atoi(m[2])
		urls[m[1]] = m[3]
	}
	d.expect(`^Type here:  kill NODE`, 10*time.Second)

	// Both addresses land on one node, the preferred one.
	holder := map[string]string{}
	for len(holder) < 2 {
		m := d.expect(`^\d\d:\d\d:\d\d\.\d{3}  (10\.0\.0\.1[01])\s+- → (n\d)$`, time.Minute)
		holder[m[1]] = m[2]
	}
	victim := holder["10.0.0.10"]
	if holder["10.0.0.11"] != victim || pids[victim] == 0 {
		t.Fatalf("holders %v, pids %v", holder, pids)
	}
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s exited: signal: killed; type 'restart %s' to start it again$`, victim, victim), 10*time.Second)
	// Each of its addresses moves to a survivor: one line each.
	moved := map[string]string{}
	for len(moved) < 2 {
		m := d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  (10\.0\.0\.1[01])\s+%s → (n\d)$`, victim), 2*time.Minute)
		if m[2] == victim {
			t.Fatalf("%s moved to the dead node: %v", m[1], m)
		}
		moved[m[1]] = m[2]
	}
	if d.cmd.ProcessState != nil || d.cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("dev is gone after a node died:\n%s", d.output())
	}
	for n, pid := range pids {
		if n != victim && syscall.Kill(pid, 0) != nil {
			t.Errorf("%s (pid %d) did not survive %s's death", n, pid, victim)
		}
	}

	// ctl against a survivor agrees with the moves dev printed.
	var st struct {
		Addresses []struct {
			Address        string `json:"address"`
			ProviderHolder string `json:"provider_holder"`
		} `json:"addresses"`
	}
	var survivor string
	for n := range urls {
		if n != victim {
			survivor = n
		}
	}
	out, err := exec.Command(testenv.Operator(t), "ctl", "--endpoint", urls[survivor], "--token-file", dir+"/secret", "--json", "status").Output()
	if err != nil || json.Unmarshal(out, &st) != nil || len(st.Addresses) != 2 {
		t.Fatalf("ctl status: %v\n%s", err, out)
	}
	for _, a := range st.Addresses {
		if moved[a.Address] != a.ProviderHolder {
			t.Errorf("ctl says %s is on %s; dev said it moved to %s", a.Address, a.ProviderHolder, moved[a.Address])
		}
	}

	// A node that cannot start says why, in its own words.
	cfgPath := dir + "/" + victim + ".yaml"
	good, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(good, "bogus: 1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	d.typeLine("restart " + victim)
	d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s did not start: exit status 3; its last log line: "ipfence serve: %s:\d+: bogus: unknown key`, victim, regexp.QuoteMeta(cfgPath)), time.Minute)
	if err := os.WriteFile(cfgPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	d.typeLine("restart " + victim)
	m := d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s started: pid (\d+), (http://\S+)$`, victim), time.Minute)
	if pid, _ := strconv.Atoi(m[1]); pid == pids[victim] || m[2] != urls[victim] {
		t.Errorf("restarted as pid %s at %s; was pid %d at %s", m[1], m[2], pids[victim], urls[victim])
	} else {
		pids[victim] = pid
	}
	resp, err := http.Get(urls[victim] + "/healthz")
	if err != nil {
		t.Fatalf("the restarted node does not answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz of the restarted node: %s", resp.Status)
	}
	d.typeLine("status")
	d.expect(fmt.Sprintf(`^  %s\s+pid %d\s+%s  running$`, victim, pids[victim], regexp.QuoteMeta(urls[victim])), 10*time.Second)
	d.typeLine("kil " + victim)
	d.expect(`^unknown command "kil"; did you mean "kill"\?; type help$`, 10*time.Second)

	d.cmd.Process.Signal(syscall.SIGTERM)
	d.expect(`^\d\d:\d\d:\d\d\.\d{3}  stopping$`, 10*time.Second)
	done := make(chan error, 1)
	go func() {
		for range d.lines {
		}
		done <- d.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30s of SIGTERM")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dev left its folder behind: %v", err)
	}
	// The nodes logged at info, each line after its name.
	logs := d.logged()
	for _, n := range []string{"n1", "n2", "n3"} {
		if !regexp.MustCompile(`(?m)^` + n + `\| time=\S+ level=INFO msg=serving`).MatchString(logs) {
			t.Errorf("no info line of %s in dev's stderr:\n%s", n, logs)
		}
	}
}

// listenInode is the inode of the socket listening on 127.0.0.1:port, from
// /proc/net/tcp; 0 when nothing listens there.
func listenInode(t *testing.T, port int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 9 && f[1] == want && f[3] == "0A" {
			return f[9]
		}
	}
	return "0"
}

// fdSockets are the socket inodes among pid's open files, by descriptor.
func fdSockets(t *testing.T, pid int) map[string]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			out[e.Name()] = strings.TrimSuffix(inode, "]")
		}
	}
	return out
}

// TestDevHandsNodesTheirSockets: dev binds each node's socket itself and
// hands it to every start of the node as fd 3 (serve --listen-fd 3), so
// no port is chosen free and then bound (another program could take it in
// between). The socket listening on the node's port is one dev holds and
// the node, started with --listen-fd 3, holds too; while the node is killed the port stays bound (no
// one else can listen there) and a connection made meanwhile waits in the
// backlog and is served by the restarted node, on the same URL. The
// simulator binds a port of its own choosing (port 0) and reports it.
func TestDevHandsNodesTheirSockets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes: a simulator and a node")
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		testenv.Missing(t, "/proc/net/tcp (Linux) to see which process holds a socket")
	}
	d := startDev(t, "--nodes", "1", "--addresses", "1")
	simPid, _ := strconv.Atoi(d.expect(`^  cloudsim\s+pid (\d+)\s+http://127\.0\.0\.1:\d+$`, time.Minute)[1])
	m := d.expect(`^  n1\s+pid (\d+)\s+(http://127\.0\.0\.1:(\d+))$`, 10*time.Second)
	pid, _ := strconv.Atoi(m[1])
	url := m[2]
	port, _ := strconv.Atoi(m[3])
	d.expect(`^\d\d:\d\d:\d\d\.\d{3}  10\.0\.0\.10\s+- → n1$`, time.Minute)

	cmdline := func(pid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), "\x00", " ")
	}
	if c := cmdline(simPid); !strings.Contains(c, " cloudsim --listen 127.0.0.1:0 ") {
		t.Errorf("the simulator does not bind a port of its own choosing: %q", c)
	}
	inode := listenInode(t, port)
	if inode == "0" {
		t.Fatalf("nothing listens on %s", url)
	}
	// held checks that the socket listening on the port is the one dev
	// bound, and that the node (when pid is not 0) was started on fd 3 and
	// holds it.
	held := func(pid int) {
		t.Helper()
		if got := listenInode(t, port); got != inode {
			t.Errorf("the socket listening on %s is inode %s, not dev's %s", url, got, inode)
		}
		devHolds := false
		for _, in := range fdSockets(t, d.cmd.Process.Pid) {
			devHolds = devHolds || in == inode
		}
		if !devHolds {
			t.Errorf("dev does not hold the socket listening on %s (inode %s); its sockets: %v", url, inode, fdSockets(t, d.cmd.Process.Pid))
		}
		if pid == 0 {
			return
		}
		// serve turns fd 3 into its listener (a duplicate, fd 3 itself
		// closed): the node holds the very socket dev bound.
		nodeHolds := false
		for _, in := range fdSockets(t, pid) {
			nodeHolds = nodeHolds || in == inode
		}
		if !nodeHolds {
			t.Errorf("n1 (pid %d) does not hold the socket listening on %s (inode %s); its sockets: %v", pid, url, inode, fdSockets(t, pid))
		}
		if c := cmdline(pid); !strings.Contains(c, " serve --config ") || !strings.Contains(c, " --listen-fd 3 ") {
			t.Errorf("n1 (pid %d) was not started on fd 3: %q", pid, c)
		}
	}
	held(pid)

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.expect(`^\d\d:\d\d:\d\d\.\d{3}  n1 exited: signal: killed; type 'restart n1' to start it again$`, 10*time.Second)
	held(0)
	addr := strings.TrimPrefix(url, "http://")
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("another program could listen on %s while n1 was down", addr)
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listening on %s: %v, not address in use", addr, err)
	}
	// A request made while the node is down waits in the backlog.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connecting to n1's socket while it is down: %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	d.typeLine("restart n1")
	m = d.expect(`^\d\d:\d\d:\d\d\.\d{3}  n1 started: pid (\d+), (http://\S+)$`, time.Minute)
	npid, _ := strconv.Atoi(m[1])
	if npid == pid || m[2] != url {
		t.Fatalf("restarted as pid %d at %s; was pid %d at %s", npid, m[2], pid, url)
	}
	held(npid)
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request made while n1 was down got no answer from the restarted node: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz asked while n1 was down, answered after its restart: %s", resp.Status)
	}
}
