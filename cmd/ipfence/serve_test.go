package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testenv"
)

func TestServeBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	os.WriteFile(path, []byte("node: n1\nlisten: nowhere\ndata_dir: d\nbogus: 1\n"), 0o600)
	code, _, stderr := runCLI("serve", "--config", path)
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{path + ":2: listen:", path + ":4: bogus:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := runCLI("serve"); code != exitError || !strings.Contains(stderr, "--config is required") {
		t.Errorf("no config: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI("serve", "--config", filepath.Join(dir, "missing.yaml")); code != exitError || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing config: %d %s", code, stderr)
	}
}

func TestCtlUsage(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("too short"), 0o600)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(strings.Repeat("s", 40)), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ctl", "status"}, "--endpoint and --token-file are required"},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", short, "status"}, "--token-file:"},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", good}, "no command"},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", good, "frob"}, `unknown command "frob"`},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", good, "approve"}, "approve takes one idempotency key"},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", good, "status"}, "connection refused"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", c.args, code, stderr, c.want)
		}
	}
}

// ipfence dev starts a simulator and nodes, prints where they are, and
// cleans everything up on SIGTERM; ctl then works against the nodes.
func TestDevAndCtl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := testenv.Binary(t)
	dev := exec.Command(bin, "dev", "--nodes", "2", "--addresses", "2")
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dev.Stderr = os.Stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer dev.Process.Kill()
	lines := bufio.NewScanner(out)
	var sim string
	type nodeLine struct{ Node, Endpoint, TokenFile string }
	var nodes []nodeLine
	for len(nodes) < 2 && lines.Scan() {
		var m map[string]string
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		if m["cloudsim"] != "" {
			sim = m["cloudsim"]
			continue
		}
		nodes = append(nodes, nodeLine{m["node"], m["endpoint"], m["token_file"]})
	}
	if sim == "" || len(nodes) != 2 || nodes[0].Node != "n1" || !strings.HasPrefix(nodes[1].Endpoint, "http://127.0.0.1:") {
		t.Fatalf("dev printed %q and %+v", sim, nodes)
	}
	ctl := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"ctl", "--endpoint", nodes[0].Endpoint, "--token-file", nodes[0].TokenFile}, args...)...)
		b, err := cmd.Output()
		return string(b), err
	}
	// Wait until n1 holds both addresses at the provider.
	deadline := time.Now().Add(20 * time.Second)
	var st struct {
		Addresses []map[string]any `json:"addresses"`
	}
	for {
		b, err := ctl("--json", "status")
		if err == nil && json.Unmarshal([]byte(b), &st) == nil && len(st.Addresses) == 2 &&
			st.Addresses[0]["provider_holder"] == "n1" && st.Addresses[1]["provider_holder"] == "n1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed n1 holding both: %s %v", b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, field := range []string{"address", "pool", "desired_holder", "epoch", "provider_holder"} {
		if _, ok := st.Addresses[0][field]; !ok {
			t.Errorf("status --json lacks %q: %v", field, st.Addresses[0])
		}
	}
	if table, err := ctl("status"); err != nil || !strings.Contains(table, "ADDRESS") || !strings.Contains(table, "10.0.0.10") {
		t.Errorf("status table: %v\n%s", err, table)
	}
	if rows, err := ctl("actions", "--state", "succeeded"); err != nil || !strings.Contains(rows, "assign-secondary-ip") {
		t.Errorf("actions table: %v\n%s", err, rows)
	}
	if b, err := ctl("drain", "n1"); err != nil || !strings.Contains(b, `"intent": "drain"`) {
		t.Errorf("drain: %v %s", err, b)
	}
	var ee *exec.ExitError
	if _, err := ctl("drain", "n9"); !errors.As(err, &ee) || ee.ExitCode() != exitError {
		t.Errorf("drain of an unknown node: %v", err)
	}

	tokenDir := filepath.Dir(nodes[0].TokenFile)
	dev.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- dev.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("dev did not stop within 20s of SIGTERM")
	}
	if _, err := os.Stat(tokenDir); !os.IsNotExist(err) {
		t.Fatalf("dev left its folder behind: %v", err)
	}
}
