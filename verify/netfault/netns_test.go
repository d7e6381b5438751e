//go:build linux

package netfault

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// prefixEnv passes the namespace prefix to a helper process.
const prefixEnv = "NETFAULT_TEST_PREFIX"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "agent":
		runAgent(os.Stdin, os.Stdout)
		os.Exit(0)
	case "hold":
		os.Exit(hold(os.Getenv(prefixEnv), false))
	case "hold-unlocked":
		os.Exit(hold(os.Getenv(prefixEnv), true))
	}
	os.Exit(m.Run())
}

// hold creates a network and keeps it until killed, for TestNetnsSweep.
// Unlocked, it removes its prefix's lock file (it keeps the lock itself),
// so that when it is killed it leaves namespaces with no lock file, as a
// run of a version without lock files did: SweepOrphans in other test
// processes cannot find them, and only Sweep, or a NewNetns of the same
// prefix, removes them.
func hold(prefix string, unlocked bool) int {
	n, err := NewNetns(prefix, []string{"n1", "n2"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if unlocked {
		_ = os.Remove(n.lock.Name())
	}
	// A daemon of the run, which outlives it when it is killed.
	sleep := n.Command("n1", "sleep", "300")
	if err := sleep.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready", n.hostLink, sleep.Process.Pid)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = n.Close()
	return 0
}

// requireNetns skips the test, or fails it under CI=true, when the machine
// cannot make network namespaces.
func requireNetns(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{"ip (iproute2)", "nft (nftables)"} {
		if _, err := exec.LookPath(strings.Fields(p)[0]); err != nil {
			missing = append(missing, "the program "+p)
		}
	}
	if len(missing) > 0 {
		testenv.Missing(t, "network namespace tests need %s", strings.Join(missing, " and "))
	}
}

// testPrefix is a namespace prefix of this test process, so that runs in
// parallel do not meet.
func testPrefix(tag string) string {
	return fmt.Sprintf("nft%s%d", tag, os.Getpid())
}

func newNetns(t *testing.T, prefix string, nodes []string) *Netns {
	t.Helper()
	n, err := NewNetns(prefix, nodes)
	if err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			testenv.Missing(t, "the right to create network namespaces: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

// leftovers lists the namespaces named with prefix.
func leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix+"-") {
			found = append(found, f[0])
		}
	}
	return found
}

// linkExists reports whether the root namespace has a link of that name.
func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

func TestNetnsPartition(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("p")
	nodes := []string{"n1", "n2", "n3"}
	n := newNetns(t, prefix, nodes)
	hostLink := n.hostLink
	if !linkExists(hostLink) || len(leftovers(t, prefix)) != 4 {
		t.Fatalf("after NewNetns: link %s exists %v, namespaces %v", hostLink, linkExists(hostLink), leftovers(t, prefix))
	}
	ip := func(node string) string { return n.IP(node) + ":7000" }
	if n.IP("n1") == "" || n.IP("n1") == n.IP("n2") || n.IP("n9") != "" {
		t.Fatalf("IPs n1 %q n2 %q n9 %q", n.IP("n1"), n.IP("n2"), n.IP("n9"))
	}

	// A service in the root namespace, listening on HostIP, as the cloud
	// simulator does.
	host := startEchoAt(t, n.HostIP()+":0", "")
	agents := map[string]*agent{}
	for _, node := range nodes {
		agents[node] = startAgent(t, n, node)
		agents[node].expect("ok "+ip(node), "listen %s", ip(node))
	}
	// reach checks a new connection from a to b (or to the host) and
	// returns "ok" or the agent's reply.
	reach := func(a, b string) string {
		t.Helper()
		addr := host.addr()
		if b != "host" {
			addr = ip(b)
		}
		id := a + "-" + b
		r := agents[a].do("dial %s %s 500", id, addr)
		if r != "ok" {
			return r
		}
		defer agents[a].expect("ok", "close %s", id)
		if r := agents[a].do("send %s hi 2000", id); r != "ok hi" {
			return r
		}
		return "ok"
	}
	check := func(state string, g Grudge) {
		t.Helper()
		for _, a := range nodes {
			for _, b := range append(nodes, "host") {
				if a == b {
					continue
				}
				want := "ok"
				if g.Cuts(a, b) || g.Cuts(b, a) {
					// Either direction cut breaks the handshake.
					want = "timeout"
				}
				if got := reach(a, b); got != want {
					t.Errorf("%s: %s -> %s: %q, want %q", state, a, b, got, want)
				}
			}
		}
	}
	check("before any cut", nil)
	// The root namespace reaches the nodes as well: the harness's clients
	// run there.
	mustWork(t, dial(t, ip("n2")), "from the root namespace")

	a1 := agents["n1"]
	a1.expect("ok", "dial est %s 2000", ip("n2"))
	a1.expect("ok before", "send est before 2000")

	g := Isolate(nodes, "n1")
	if err := n.Apply(g); err != nil {
		t.Fatal(err)
	}
	rules, err := n.Rules("n2")
	if err != nil || !strings.Contains(rules, "table inet netfault") || !strings.Contains(rules, n.IP("n1")) || strings.Contains(rules, n.IP("n3")) {
		t.Errorf("rules in n2 under %s: %v\n%s", g, err, rules)
	}
	check("n1 isolated", g)
	// The established connection stalls: no reset, no answer.
	a1.expect("timeout", "send est during 500")

	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if rules, err := n.Rules("n2"); err != nil || strings.Contains(rules, "netfault") {
		t.Errorf("rules in n2 after Heal: %v\n%s", err, rules)
	}
	// TCP's retransmission delivers what the partition held up: it was a
	// stall, not a reset.
	a1.expect("ok during", "recv est 15000")
	a1.expect("ok after", "send est after 2000")
	check("healed", nil)

	// One direction cut: packet-level, so TCP fails both ways.
	g = Grudge{"n1": {"n2"}}
	if err := n.Apply(g); err != nil {
		t.Fatal(err)
	}
	check("n1 -/-> n2", g)
	if err := n.Apply(Grudge{"n1": {"n9"}}); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Errorf("Apply with an unknown node: %v", err)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := n.Command("n9", "true").Run(); err == nil {
		t.Error("Command ran on an unknown node")
	}
	if out, err := n.Command("n3", "ip", "-4", "-o", "addr", "show", "dev", "eth0").Output(); err != nil || !strings.Contains(string(out), n.IP("n3")+"/24") {
		t.Errorf("ip addr in n3: %v: %s", err, out)
	}
	// No way out: a node has its /24 and nothing else.
	if out, err := n.Command("n3", "ip", "-4", "route", "show").Output(); err != nil || strings.Contains(string(out), "default") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("routes in n3: %v:\n%s", err, out)
	}

	for _, a := range agents {
		a.stop()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, prefix); len(left) != 0 || linkExists(hostLink) {
		t.Errorf("after Close: namespaces %v, link %s exists %v", left, hostLink, linkExists(hostLink))
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := n.Apply(nil); err == nil {
		t.Error("Apply after Close succeeded")
	}
}

func TestNetnsSubnets(t *testing.T) {
	requireNetns(t)
	a := newNetns(t, testPrefix("a"), []string{"n1"})
	// Another run with the same prefix is refused and leaves the first
	// one alone.
	if n, err := NewNetns(testPrefix("a"), []string{"n1"}); err == nil {
		_ = n.Close()
		t.Fatal("a second network with the same prefix was created")
	}
	if left := leftovers(t, testPrefix("a")); len(left) != 2 || !linkExists(a.hostLink) {
		t.Fatalf("the refused run touched the first: namespaces %v", left)
	}
	// A prefix that hashes to the same /24 gets the next free one.
	hash := func(s string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(s))
		return h.Sum32() % 256
	}
	var other string
	for i := 0; other == ""; i++ {
		if p := fmt.Sprintf("%s%d", testPrefix("b"), i); hash(p) == hash(testPrefix("a")) {
			other = p
		}
	}
	b := newNetns(t, other, []string{"n1"})
	if a.Subnet() == b.Subnet() || a.HostIP() == b.HostIP() || a.hostLink == b.hostLink {
		t.Errorf("two runs share %s / %s", a.Subnet(), b.Subnet())
	}
	if !strings.HasPrefix(a.Subnet(), "10.250.") || !strings.HasSuffix(a.Subnet(), ".0/24") {
		t.Errorf("subnet %s", a.Subnet())
	}
}

// TestNetnsFailedCreate makes NewNetns fail halfway, on a node whose
// namespace name is too long for a file name (after the bridge and n1 are
// made), and checks that it removed what it had made. (A namespace of the
// prefix that exists already no longer makes it fail: no live Netns holds
// the prefix, so that namespace is a dead run's, and NewNetns removes it;
// TestNetnsReplacesDeadRun.)
func TestNetnsFailedCreate(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("c")
	long := strings.Repeat("x", 255)
	n, err := NewNetns(prefix, []string{"n1", long, "n3"})
	if err == nil {
		_ = n.Close()
		t.Fatal("NewNetns succeeded with a namespace name too long for a file")
	}
	if !strings.Contains(err.Error(), "ip netns add "+prefix+"-"+long) {
		t.Errorf("error does not name the namespace it could not make: %v", err)
	}
	if left := leftovers(t, prefix); len(left) != 0 {
		t.Errorf("after the failed NewNetns: namespaces %v, want none", left)
	}
	if _, err := os.Stat(lockDir + "/" + prefix + ".lock"); !os.IsNotExist(err) {
		t.Errorf("after the failed NewNetns, the lock file: %v", err)
	}
	after, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	// Other runs may add links meanwhile: look for one whose peer is in a
	// namespace of this prefix.
	if strings.Contains(string(after), "link-netns "+prefix+"-") {
		t.Errorf("the failed NewNetns left a link:\n%s", after)
	}
}

func TestNetnsNames(t *testing.T) {
	for _, c := range []struct {
		prefix string
		nodes  []string
	}{
		{"bad/prefix", []string{"n1"}},
		{"", []string{"n1"}},
		{"ok", nil},
		{"ok", []string{"n1", "n1"}},
		{"ok", []string{"br"}},
		{"ok", []string{"-n"}},
	} {
		if n, err := NewNetns(c.prefix, c.nodes); err == nil {
			_ = n.Close()
			t.Errorf("NewNetns(%q, %q) succeeded", c.prefix, c.nodes)
		}
	}
}

// TestNetnsCleanupAfterFailure runs a test that fails halfway through in a
// child process and checks that its t.Cleanup removed the network.
func TestNetnsCleanupAfterFailure(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("f")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestNetnsHelperFailMidway$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=fail-midway", prefixEnv+"="+prefix)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "planned failure") {
		t.Fatalf("helper test: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "created ")
	if !ok {
		t.Fatalf("helper did not say what it created:\n%s", out)
	}
	link := strings.Fields(rest)[0]
	if left := leftovers(t, prefix); len(left) != 0 || linkExists(link) {
		t.Errorf("after the failed test: namespaces %v, link %s exists %v", left, link, linkExists(link))
	}
}

func TestNetnsHelperFailMidway(t *testing.T) {
	if os.Getenv(helperEnv) != "fail-midway" {
		t.Skip("helper of TestNetnsCleanupAfterFailure")
	}
	n := newNetns(t, os.Getenv(prefixEnv), []string{"n1", "n2"})
	startAgent(t, n, "n1").expect("ok "+n.IP("n1")+":7000", "listen %s:7000", n.IP("n1"))
	t.Logf("created %s", n.hostLink)
	t.Fatal("planned failure")
}

// startHolder starts a process that holds a network of prefix (mode
// "hold" or "hold-unlocked") and returns it and its root-side link once
// the network is up, with the pid of a daemon it started in n1 (sleep);
// a clean-up kills them and sweeps the prefix.
func startHolder(t *testing.T, mode, prefix string) (cmd *exec.Cmd, link string, daemon int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, prefixEnv+"="+prefix)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = stdin.Close()
		_ = Sweep(prefix)
		_ = os.Remove(lockDir + "/" + prefix + ".lock")
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ready" {
		t.Fatalf("holder said %q", line)
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatalf("holder said %q", line)
	}
	t.Cleanup(func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, f[1], pid
}

// running reports whether the process pid runs (a zombie, dead and not yet
// reaped by whoever adopted it, does not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// kill kills the holder as a crash (or a test binary's timeout) would.
func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// TestNetnsSweep kills a process holding a network, as a crash would, and
// removes what it left with Sweep.
func TestNetnsSweep(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("s")
	cmd, link, daemon := startHolder(t, "hold-unlocked", prefix)
	kill(cmd)
	if left := leftovers(t, prefix); len(left) != 3 || !linkExists(link) || !running(daemon) {
		t.Fatalf("after the kill: namespaces %v, link %s exists %v, its daemon runs %v", left, link, linkExists(link), running(daemon))
	}
	if err := Sweep(prefix); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, prefix); len(left) != 0 || linkExists(link) {
		t.Errorf("after Sweep: namespaces %v, link %s exists %v", left, link, linkExists(link))
	}
	// The daemon went with its namespace; SIGKILL is delivered at once,
	// the exit follows.
	deadline := time.Now().Add(5 * time.Second)
	for running(daemon) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if running(daemon) {
		t.Errorf("the dead run's daemon (pid %d) still runs after Sweep", daemon)
	}
}

// A network whose run died is replaced by the next NewNetns of its
// prefix: before, that failed with "Cannot create namespace file
// /run/netns/<prefix>-br: File exists".
func TestNetnsReplacesDeadRun(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("d")
	cmd, link, _ := startHolder(t, "hold-unlocked", prefix)
	kill(cmd)
	if left := leftovers(t, prefix); len(left) != 3 {
		t.Fatalf("after the kill: namespaces %v", left)
	}
	n, err := NewNetns(prefix, []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if linkExists(link) && link != n.hostLink {
		t.Errorf("the dead run's link %s is still there", link)
	}
	// The new network carries traffic: n1 connects to n2.
	a1, a2 := startAgent(t, n, "n1"), startAgent(t, n, "n2")
	to := n.IP("n2") + ":7000"
	a2.expect("ok "+to, "listen %s", to)
	a1.expect("ok", "dial c %s 2000", to)
	a1.expect("ok hi", "send c hi 2000")
	a1.expect("ok", "close c")
	a1.stop()
	a2.stop()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, prefix); len(left) != 0 {
		t.Errorf("after Close: namespaces %v", left)
	}
	if _, err := os.Stat(lockDir + "/" + prefix + ".lock"); !os.IsNotExist(err) {
		t.Errorf("after Close, the lock file: %v", err)
	}
}

// A prefix a live process holds is refused, naming that process, and its
// network is left alone; once the process is killed, SweepOrphans removes
// what it left, lock file included.
func TestNetnsPrefixOfLiveRun(t *testing.T) {
	requireNetns(t)
	prefix := testPrefix("l")
	cmd, link, _ := startHolder(t, "hold", prefix)
	_, err := NewNetns(prefix, []string{"n1", "n2"})
	if want := fmt.Sprintf("netfault: prefix %q is in use by a live process (pid %d, lock %s/%s.lock)", prefix, cmd.Process.Pid, lockDir, prefix); err == nil || err.Error() != want {
		t.Fatalf("NewNetns of a held prefix: %v, want %s", err, want)
	}
	if left := leftovers(t, prefix); len(left) != 3 || !linkExists(link) {
		t.Fatalf("the live run's network: namespaces %v, link %s exists %v", left, link, linkExists(link))
	}
	kill(cmd)
	// Another test process may sweep it first; either way it is gone.
	if err := SweepOrphans(); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, prefix); len(left) != 0 || linkExists(link) {
		t.Errorf("after SweepOrphans: namespaces %v, link %s exists %v", left, link, linkExists(link))
	}
	if _, err := os.Stat(lockDir + "/" + prefix + ".lock"); !os.IsNotExist(err) {
		t.Errorf("after SweepOrphans, the lock file: %v", err)
	}
}
