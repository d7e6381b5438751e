package daemon_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// TestClusterFullDiskHolder: the holder's data folder is a small tmpfs,
// and it fills up. The holder becomes unhealthy (/healthz 503 naming the
// failure), stops heartbeating, its peers find it stale, and every address
// moves to the next member, with no stale mutation.
func TestClusterFullDiskHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to mount a small tmpfs as a node's data folder")
	}
	var mnt string
	c := startCluster(t, settings{nodes: 3, addresses: 4, before: func(dir string) {
		mnt = filepath.Join(dir, "n1-data")
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
			testenv.Missing(t, "mount -t tmpfs (%v: %s)", err, out)
		}
		// Lazily: the node may still have its files open when this runs.
		t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	}})
	c.waitAllOn("eni-n1", generous)
	if code, body := healthz(t, c.endpoint("n1")); code != http.StatusOK {
		t.Fatalf("n1 before the disk fills: %d %s", code, body)
	}

	// Fill the disk.
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling: %v", err)
			}
			break
		}
	}
	f.Close()

	took := c.waitAllOn("eni-n2", generous)
	t.Logf("the addresses moved to n2 %v after n1's disk filled", took)
	code, body := healthz(t, c.endpoint("n1"))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Fatalf("n1 with a full disk: %d %s", code, body)
	}
	// Its peers see it stale: it stopped heartbeating.
	st := c.status("n2")
	for _, m := range st.Members {
		if m.Node == "n1" && !m.Stale {
			t.Fatalf("n2 does not find n1 stale: %+v", m)
		}
	}
	// And it stays put: the addresses do not come back while its disk is
	// full.
	time.Sleep(3 * ttl)
	if !c.allOn("eni-n2") {
		t.Fatalf("addresses left n2: %v", c.holders())
	}
	checkFence(t, c.mutations())
}

// healthz gets a node's /healthz.
func healthz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]string
	json.NewDecoder(resp.Body).Decode(&v)
	b, _ := json.Marshal(v)
	return resp.StatusCode, string(b)
}
