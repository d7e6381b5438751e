//go:build linux

package vrrp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

// requireKeepalived skips the test, or fails it under CI=true, unless it
// runs as root with keepalived, ip and nft installed.
func requireKeepalived(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{"keepalived (Debian package keepalived)", "ip (iproute2)", "nft (nftables)"} {
		if _, err := exec.LookPath(strings.Fields(p)[0]); err != nil {
			missing = append(missing, "the program "+p)
		}
	}
	if len(missing) > 0 {
		testenv.Missing(t, "keepalived tests in network namespaces need %s", strings.Join(missing, " and "))
	}
}

var labSeq atomic.Int32

// newLab builds an l2lab network of n hosts, removed when the test ends
// (after the keepalived processes, whose cleanups run first).
func newLab(t *testing.T, n int) *l2lab.Lab {
	t.Helper()
	lab, err := l2lab.New(l2lab.Options{Prefix: fmt.Sprintf("vr%d-%d", os.Getpid(), labSeq.Add(1)), Hosts: n})
	if err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			testenv.Missing(t, "the right to create network namespaces: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return lab
}

// member is one host's keepalived and the Watcher of its FIFO.
type member struct {
	host string
	cfg  Config
	dir  string
	w    *Watcher
	p    *Process
	lab  *l2lab.Lab
}

// newMember watches the host's FIFO and starts its keepalived, with every
// other host as a unicast peer.
func newMember(t *testing.T, lab *l2lab.Lab, host string, priority, version int, advert time.Duration) *member {
	t.Helper()
	dir := t.TempDir()
	var peers []netip.Addr
	for _, h := range lab.Hosts() {
		if h != host {
			peers = append(peers, lab.IP(h))
		}
	}
	m := &member{
		host: host,
		dir:  dir,
		lab:  lab,
		cfg: Config{
			Instance:        "VI_1",
			Interface:       lab.LANDevice(),
			VirtualRouterID: 51,
			Priority:        priority,
			AdvertInterval:  advert,
			Version:         version,
			UnicastSrc:      lab.IP(host),
			UnicastPeers:    peers,
			NotifyFIFO:      filepath.Join(dir, "notify"),
			NoVIP:           true,
			Preempt:         true,
			CheckUnicastSrc: true,
		},
	}
	w, err := Watch(context.Background(), m.cfg.NotifyFIFO, m.cfg.Instance)
	if err != nil {
		t.Fatal(err)
	}
	m.w = w
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("%s: closing the Watcher: %v", host, err)
		}
	})
	m.start(t)
	return m
}

// start starts the member's keepalived; the test's end stops it.
func (m *member) start(t *testing.T) {
	t.Helper()
	cmd := func(name string, args ...string) *exec.Cmd { return m.lab.Command(m.host, name, args...) }
	p, err := Start(context.Background(), cmd, m.cfg, m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.p = p
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%s: stopping keepalived: %v", m.host, err)
		}
		select {
		case <-p.Exited():
		default:
			t.Errorf("%s: keepalived %d still runs after Stop", m.host, p.Pid())
		}
		if t.Failed() {
			logTail(t, m.host, p.LogPath())
		}
	})
}

func logTail(t *testing.T, host, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: keepalived log: %v", host, err)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	t.Logf("%s: last lines of %s:\n%s", host, path, strings.Join(lines[max(0, len(lines)-25):], "\n"))
}

// until waits for the Watcher's next change to want, skipping others, and
// returns when it arrived.
func until(t *testing.T, m *member, want State, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case e, ok := <-m.w.Changes():
			if !ok {
				t.Fatalf("%s: Changes closed while waiting for %v", m.host, want)
			}
			at := time.Now()
			seen = append(seen, e.State.String())
			if e.State == want {
				return at
			}
		case <-deadline:
			t.Fatalf("%s: no %v within %v (changes %v, state %v, err %v)", m.host, want, timeout, seen, m.w.State(), m.w.Err())
		}
	}
}

// settle waits until the members' states are want (one per member), then
// checks that they stay so for hold.
func settle(t *testing.T, ms []*member, want []State, timeout, hold time.Duration) {
	t.Helper()
	states := func() []State {
		var s []State
		for _, m := range ms {
			s = append(s, m.w.State())
		}
		return s
	}
	deadline := time.Now().Add(timeout)
	for !slices.Equal(states(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("states %v after %v, want %v", states(), timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		if s := states(); !slices.Equal(s, want) {
			t.Fatalf("states %v within %v of reaching %v", s, hold, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drain empties the Watcher's buffered changes.
func drain(m *member) {
	for {
		select {
		case <-m.w.Changes():
		default:
			return
		}
	}
}
