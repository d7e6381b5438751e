package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/cli"
)

// What test capture --nodes-file refuses, before anything is started:
// exit 3 and a message naming the flags, and nothing in the store.
func TestTestCaptureNodesFileUsage(t *testing.T) {
	store := t.TempDir()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "n1 address=10.0.0.1\nn2 address=10.0.0.2\nn3 address=10.0.0.3\n")
	bad := write("bad", "# lab\nn1 address=10.0.0.1\nn2 address=10.0.0.2 port=abc\n")
	one := write("one", "n1 address=10.0.0.1\n")
	dashed := write("dashed", "n1 address=10.0.0.1\nnode-2 address=10.0.0.2\n")
	base := []string{"test", "capture", "--store", store, "--time-limit", "10s"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--nodes-file", good, "--net", "netns"}, "--nodes-file and --net netns: the nodes file's machines are the network"},
		{[]string{"--nodes-file", good, "--provider", "onprem"}, "--nodes-file and --provider onprem: "},
		{[]string{"--nodes-file", good, "--epochs", "etcd"}, "--nodes-file and --epochs etcd: "},
		{[]string{"--nodes-file", good, "--nodes", "3"}, "--nodes and --nodes-file: the nodes file says how many nodes there are"},
		{[]string{"--known-hosts", "kh"}, "--known-hosts and --remote-dir need --nodes-file"},
		{[]string{"--remote-dir", "/x"}, "--known-hosts and --remote-dir need --nodes-file"},
		{[]string{"--nodes-file", good, "--provider", "azure"}, "--nodes-file and --provider azure: runs on a nodes file's machines are built for aws (the EC2 simulator) only"},
		{[]string{"--nodes-file", good, "--nemesis", "partition,wipe,disk"}, "--nodes-file: the nemeses wipe,disk cannot run on the nodes file's machines: wipe (it empties the node's data folder"},
		{[]string{"--nodes-file", good, "--remote-dir", "relative"}, `--remote-dir must be an absolute folder other than /, not "relative"`},
		{[]string{"--nodes-file", good, "--remote-dir", "/"}, `--remote-dir must be an absolute folder other than /, not "/"`},
		{[]string{"--nodes-file", bad}, `--nodes-file ` + bad + `: nodes file line 3, node "n2", field port: "abc": want a number from 1 to 65535`},
		{[]string{"--nodes-file", one}, "--nodes-file " + one + ": 1 nodes: the capture test takes 2 to 9"},
		{[]string{"--nodes-file", dashed}, "--nodes-file " + dashed + ` line 2: node name "node-2": the capture test's node names may not hold '-' or '.'`},
		{[]string{"--nodes-file", filepath.Join(dir, "none")}, "--nodes-file: open"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(append(append([]string(nil), base...), c.args...)...)
		if code != cli.ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", c.args, code, stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a refused command left %d entries in the store", len(entries))
	}
	code, stdout, _ := runCLI("test", "capture", "--help")
	if code != cli.ExitValid || !strings.Contains(stdout, "--nodes-file") || !strings.Contains(stdout, "NAME address=HOST") || !strings.Contains(stdout, "--remote-dir") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}

// Without --nemesis, a run on a nodes file's machines leaves out the
// nemeses it cannot make, and says so before it starts.
func TestTestCaptureNodesFileDefaultNemeses(t *testing.T) {
	// Nothing listens on port 1 of loopback: the run stops at its first
	// SSH connection, after the line.
	nodes := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(nodes, []byte("n1 address=127.0.0.1 port=1\nn2 address=127.0.0.1 port=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("test", "capture", "--store", t.TempDir(), "--nodes-file", nodes, "--known-hosts", filepath.Join(t.TempDir(), "kh"))
	want := "--nodes-file: leaving out the nemeses wipe (it empties the node's data folder on the harness's own file system), corrupt (it damages the node's state file on the harness's own file system), disk (it mounts a tmpfs on the harness's machine as each node's data folder)\n"
	if code != cli.ExitError || !strings.HasPrefix(stdout, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3 and %q first", code, stdout, stderr, want)
	}
}
