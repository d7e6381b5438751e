package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/loopback"
)

// Etcd runs a one-member etcd on loopback for the test (skipped, or failed
// in CI, when Debian's etcd-server is not installed) and returns its client
// URL and a func that signals the member (SIGSTOP and SIGCONT, say). The
// member is killed when the test ends.
func Etcd(t testing.TB) (string, func(syscall.Signal)) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		Missing(t, "etcd (apt-get install etcd-server)")
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	dir := t.TempDir()
	cmd := exec.Command(bin, "--name", "e1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "e1="+peer)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(client + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("etcd did not become healthy: %v\n%s", err, b)
		}
	}
	return client, func(sig syscall.Signal) {
		cmd.Process.Signal(sig)
		if sig != syscall.SIGSTOP {
			return
		}
		// A signal is delivered when the process next runs: on a loaded
		// machine it may still answer a request sent right after. Wait
		// until the kernel reports it stopped.
		stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			b, err := os.ReadFile(stat)
			if err != nil {
				return
			}
			if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
				return
			}
		}
	}
}
