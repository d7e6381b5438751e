package nemesis

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestLoopbackAddrsAreDistinct(t *testing.T) {
	addrs, err := LoopbackAddrs("a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range []string{"a", "b", "c"} {
		a := addrs[n]
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Fatalf("%s: address %q (all: %v)", n, a, addrs)
		}
		seen[a] = true
	}
}

// Restart waits until the node accepts connections, and says so when the
// process exits first.
func TestLocalRestart(t *testing.T) {
	addrs, _ := LoopbackAddrs("up", "dead")
	ln, err := net.Listen("tcp", addrs["up"])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := &Local{Addrs: addrs, Command: func(n string) *exec.Cmd {
		if n == "dead" {
			return exec.Command("false")
		}
		return exec.Command("sleep", "60")
	}}
	defer l.StopAll(time.Second)
	if err := l.Restart(t.Context(), "up"); err != nil || !l.Running("up") {
		t.Fatalf("up: %v, running %v", err, l.Running("up"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := l.Restart(ctx, "dead"); err == nil || !strings.Contains(err.Error(), "dead exited before it accepted connections") {
		t.Fatalf("dead: %v", err)
	}
	if err := l.Restart(ctx, "nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere has no address") {
		t.Fatalf("nowhere: %v", err)
	}
}
