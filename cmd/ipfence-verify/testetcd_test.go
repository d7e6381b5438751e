package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/cli"
)

func TestTestEtcdNodesFileUsage(t *testing.T) {
	store := t.TempDir()
	bad := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(bad, []byte("# lab\nn1 address=10.0.0.1\nn2 address=10.0.0.2 port=abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"test", "etcd", "--workload", "register", "--nodes", "3", "--nodes-file", bad, "--store", store}, "--nodes and --nodes-file"},
		{[]string{"test", "etcd", "--workload", "register", "--known-hosts", "kh", "--store", store}, "--known-hosts and --remote-dir need --nodes-file"},
		{[]string{"test", "etcd", "--workload", "register", "--remote-dir", "/x", "--store", store}, "--known-hosts and --remote-dir need --nodes-file"},
		{[]string{"test", "etcd", "--workload", "register", "--nodes-file", bad, "--store", store}, `--nodes-file ` + bad + `: nodes file line 3, node "n2", field port: "abc": want a number from 1 to 65535`},
		{[]string{"test", "etcd", "--workload", "register", "--nodes-file", filepath.Join(store, "none"), "--store", store}, "--nodes-file: open"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != cli.ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", c.args, code, stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a refused command left %d entries in the store", len(entries))
	}
	code, stdout, _ := runCLI("test", "etcd", "--help")
	if code != cli.ExitValid || !strings.Contains(stdout, "--nodes-file") || !strings.Contains(stdout, "NAME address=HOST") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}
