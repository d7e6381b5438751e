//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/sshlab"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// The etcd test through the binary on machines reached over SSH: the SSH
// lab's three namespaces, as a user would run it against their own, with
// every nemesis.
func TestTestEtcdNodesFileRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 20 s etcd test over SSH")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		testenv.Missing(t, "etcd (Debian package etcd-server)")
	}
	lab := sshlab.ForTest(t, sshlab.Options{})
	bin := binary(t)
	work := t.TempDir()
	run := exec.Command(bin, "test", "etcd", "--workload", "list-append", "--time-limit", "20s", "--seed", "7", "--nemesis", "partition,pause,kill,leader,member", "--store", "store",
		"--nodes-file", lab.NodesFile(), "--known-hosts", lab.KnownHosts(), "--remote-dir", filepath.Join(lab.Dir(), "remote"))
	run.Dir = work
	out, err := run.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"  strict-serializable true ", "  faults          true    confirmed: ", "\nVALID  " + filepath.Join(work, "store") + "/etcd/"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	txt, err := os.ReadFile(filepath.Join(work, "store", "etcd", "latest", "etcd.txt"))
	if err != nil || !strings.Contains(string(txt), "nodes file: "+lab.NodesFile()) || !strings.Contains(string(txt), "http://"+lab.Net().IP("n3")+":2380") {
		t.Errorf("etcd.txt: %v\n%s", err, txt)
	}
}
