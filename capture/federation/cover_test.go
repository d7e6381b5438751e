package federation

import (
	"errors"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/liveness"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

// Covered measures from the making of the newest heartbeat a majority
// acknowledged, and fails a pass that began before a lapse of the cover,
// even once the cover is back.
func TestCoveredByAcknowledgedHeartbeats(t *testing.T) {
	c := newCluster(t, "n1", "n2", "n3")
	n1 := c.nodes["n1"]
	const window = 2 * time.Second
	n1.mu.Lock()
	n1.cfg.Timing = Timing{TTL: window}
	n1.contact = liveness.New(len(n1.nodes), window)
	clock := handclock.New(time.Now())
	n1.now = clock.Now
	n1.mu.Unlock()
	peer := func(name string) Peer {
		for _, p := range n1.cfg.Peers {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no peer %s", name)
		return Peer{}
	}
	beat := func() {
		t.Helper()
		if _, err := n1.Emit(Heartbeat, "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := n1.deliver(t.Context(), peer("n2")); err != nil {
			t.Fatal(err)
		}
	}
	early := clock.Now()
	if err := n1.Covered(early); !errors.Is(err, ErrUncovered) {
		t.Fatalf("before any acknowledgement: %v", err)
	}
	beat()
	// n2 with n1 is a majority of three: covered from here on, but not a
	// pass that began before the cover did.
	if err := n1.Covered(early); !errors.Is(err, ErrUncovered) {
		t.Fatalf("a pass begun before the first cover: %v", err)
	}
	clock.Advance(time.Millisecond)
	begun := clock.Now()
	if err := n1.Covered(begun); err != nil {
		t.Fatalf("a pass begun under cover: %v", err)
	}
	// Silence for the window: the peers may find n1 stale now.
	clock.Advance(window)
	if err := n1.Covered(begun); !errors.Is(err, ErrUncovered) {
		t.Fatalf("after a window without an acknowledgement: %v", err)
	}
	// Heard again: a pass begun before the lapse stays refused, one
	// begun after it is covered.
	beat()
	if err := n1.Covered(begun); !errors.Is(err, ErrUncovered) {
		t.Fatalf("a pass that spans the lapse, once the cover is back: %v", err)
	}
	clock.Advance(time.Millisecond)
	if err := n1.Covered(clock.Now()); err != nil {
		t.Fatalf("a pass begun after the cover came back: %v", err)
	}
}
