//go:build linux

package vrrp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run a shell in keepalived's place, through the CmdFunc, to
// check how Process signals and waits; the keepalived tests run the real
// one.

// fake returns a CmdFunc running script with sh, recording the keepalived
// arguments it was given in dir/args.
func fake(t *testing.T, dir, script string) CmdFunc {
	return func(name string, args ...string) *exec.Cmd {
		if err := os.WriteFile(filepath.Join(dir, "args"), []byte(name+" "+strings.Join(args, " ")), 0o600); err != nil {
			t.Error(err)
		}
		return exec.Command("sh", "-c", script)
	}
}

func fakeConfig(dir string) Config {
	c := validConfig()
	c.NotifyFIFO = filepath.Join(dir, "notify")
	return c
}

func alive(pid int) bool {
	// A zombie still answers signal 0; /proc says what it is.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStartWritesConfigAndArgs(t *testing.T) {
	dir := t.TempDir()
	cfg := fakeConfig(dir)
	p, err := Start(context.Background(), fake(t, dir, "echo hello from keepalived"), cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	conf, err := os.ReadFile(filepath.Join(dir, "keepalived.conf"))
	if err != nil || string(conf) != cfg.Render() {
		t.Fatalf("keepalived.conf = %q (%v), want the rendered config", conf, err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	want := "keepalived --dont-fork --log-console --no-syslog --vrrp --use-file " + dir + "/keepalived.conf --pid " + dir + "/keepalived.pid --vrrp_pid " + dir + "/vrrp.pid"
	if string(args) != want {
		t.Errorf("ran %q\nwant %q", args, want)
	}
	log, _ := os.ReadFile(p.LogPath())
	if string(log) != "hello from keepalived\n" {
		t.Errorf("log %q, want the program's output", log)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop after exit: %v", err)
	}
}

// A keepalived that exits by itself with an error (one that refuses its
// configuration exits 1) makes Stop fail, naming the log.
func TestStopReportsEarlyExit(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(context.Background(), fake(t, dir, `echo "No VIP specified; at least one is required"; exit 1`), fakeConfig(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	err = p.Stop()
	if err == nil || !strings.Contains(err.Error(), "had exited: exit status 1 (log "+p.LogPath()+")") {
		t.Errorf("Stop: %v, want it to report the exit and the log", err)
	}
}

func TestStartRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := fakeConfig(dir)
	bad.Priority = 0
	if _, err := Start(context.Background(), nil, bad, dir); err == nil || !strings.Contains(err.Error(), "priority 0") {
		t.Errorf("Start with priority 0: %v, want the validation error", err)
	}
	missing := func(string, ...string) *exec.Cmd { return exec.Command(filepath.Join(dir, "no-keepalived")) }
	if _, err := Start(context.Background(), missing, fakeConfig(dir), dir); err == nil || !strings.Contains(err.Error(), `starting keepalived for instance VI_1`) {
		t.Errorf("Start of a missing program: %v, want an error naming the instance", err)
	}
}

// Stop sends SIGTERM and waits; Kill takes the whole process group, as a
// crash takes keepalived's parent and VRRP child.
func TestStopAndKill(t *testing.T) {
	dir := t.TempDir()
	// The child stands for the VRRP child: a second process in the group.
	script := `sleep 60 & echo $! > child.pid; trap 'echo got TERM; kill $!; exit 0' TERM; echo $$ > parent.pid; wait`
	cmd := func(name string, args ...string) *exec.Cmd {
		c := exec.Command("sh", "-c", script)
		c.Dir = dir
		return c
	}
	p, err := Start(context.Background(), cmd, fakeConfig(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	readPid(t, filepath.Join(dir, "parent.pid"))
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(p.LogPath()); !strings.Contains(string(log), "got TERM") {
		t.Errorf("Stop did not send SIGTERM: log %q", log)
	}

	os.Remove(filepath.Join(dir, "parent.pid"))
	p, err = Start(context.Background(), cmd, fakeConfig(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	readPid(t, filepath.Join(dir, "parent.pid"))
	child := readPid(t, filepath.Join(dir, "child.pid"))
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v", err)
	}
	deadline := time.Now().Add(wait)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d alive after Kill", child)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if log, _ := os.ReadFile(p.LogPath()); strings.Count(string(log), "got TERM") != 1 {
		t.Errorf("Kill sent SIGTERM: log %q", log)
	}
}

// A keepalived that does not exit on SIGTERM is killed after the bound,
// and Stop says so.
func TestStopKillsAfterTimeout(t *testing.T) {
	old := stopTimeout
	stopTimeout = 200 * time.Millisecond
	t.Cleanup(func() { stopTimeout = old })
	dir := t.TempDir()
	p, err := Start(context.Background(), fake(t, dir, `trap '' TERM; echo ready; sleep 60 & wait`), fakeConfig(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	for log, _ := os.ReadFile(p.LogPath()); !strings.Contains(string(log), "ready"); log, _ = os.ReadFile(p.LogPath()) {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	err = p.Stop()
	if err == nil || !strings.Contains(err.Error(), "did not exit within 200ms of SIGTERM; killed it") {
		t.Fatalf("Stop: %v, want it to say it killed keepalived", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("keepalived ended with %v, want SIGKILL", p.cmd.ProcessState)
	}
}

func TestStopsWithContext(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, fake(t, dir, `exec sleep 60`), fakeConfig(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-p.Exited():
	case <-time.After(wait):
		t.Fatal("still running after the context ended")
	}
}
