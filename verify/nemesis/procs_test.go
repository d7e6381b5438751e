package nemesis

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// state reads a process's state letter from /proc (T: stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// Procs pauses, resumes, kills and reaps real processes, and StopAll ends
// a paused one too.
func TestProcs(t *testing.T) {
	var p Procs
	start := func(node string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skipf("sleep: %v", err)
		}
		p.Add(node, cmd)
		return cmd
	}
	a, b := start("a"), start("b")
	if !p.Running("a") || p.Running("c") {
		t.Fatal("Running")
	}
	if err := p.Pause("a"); err != nil {
		t.Fatal(err)
	}
	waitProcState(t, a.Process.Pid, "T")
	if err := p.Resume("a"); err != nil {
		t.Fatal(err)
	}
	waitProcState(t, a.Process.Pid, "S")
	if err := p.Kill("a"); err != nil {
		t.Fatal(err)
	}
	if p.Running("a") {
		t.Fatal("a still running after Kill")
	}
	if err := p.Kill("a"); err == nil || err.Error() != "a is not running" {
		t.Fatalf("second Kill: %v", err)
	}
	if err := p.Pause("c"); err == nil {
		t.Fatal("Pause of an unknown node: no error")
	}
	if err := p.Resume("c"); err != nil {
		t.Fatalf("Resume of an absent node: %v", err)
	}
	if err := p.Pause("b"); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	p.StopAll(5 * time.Second)
	if b.ProcessState == nil || time.Since(begin) > 4*time.Second {
		t.Fatalf("paused b not ended by SIGTERM after SIGCONT: %v after %v", b.ProcessState, time.Since(begin))
	}
	if p.Running("b") {
		t.Fatal("b still listed")
	}
}

func waitProcState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for procState(t, pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %s, want %s", pid, procState(t, pid), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	// More than the 8 KiB window: only the end is read, blank lines skipped.
	body := strings.Repeat("padding line\n", 1000) + "listening\n\nbind: address already in use\n  exit 1  \n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := LogTail(path, 3), "listening | bind: address already in use | exit 1"; got != want {
		t.Fatalf("LogTail = %q, want %q", got, want)
	}
	if got := LogTail(filepath.Join(t.TempDir(), "missing.log"), 3); got != "" {
		t.Fatalf("LogTail of a missing log = %q", got)
	}
}
