package federation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/liveness"
)

// keptState reports whether n never lost its state or has learned the
// cluster's records back.
func keptState(n *Node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.synced
}

// settles polls cond for up to 30 s: what the links deliver after a heal
// waits out the senders' backoffs and a hung request's timeout, which on
// a loaded machine (two race-detector suites at once) took longer than
// eventually's 5 s.
func settles(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// runAll runs every node of c until the test ends and waits until each
// has synced (a cluster starting for the first time).
func runAll(t *testing.T, c *cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range c.nodes {
		go n.Run(ctx)
	}
	for name, n := range c.nodes {
		eventually(t, name+" syncs", func() bool { return keptState(n) })
	}
}

// An intent answered on one node is ordered before any intent asked
// afterwards on another, even one that has not yet received it: the
// later node reads a majority's records before stamping its own. This is
// the operator's view of linearizability: "drain b" answered, then
// "undrain b" answered elsewhere, must leave x undrained. With plain Emit
// (no read), c's undrain is stamped below a's drain — a's clock is ahead,
// and c has heard nothing of it — and the drain wins everywhere.
func TestIntentOrderedAfterAnsweredIntent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	// c pulls records outside EmitIntent only to sync and to catch up:
	// at its first cover, and after a lapse of its cover (its heartbeats
	// unacknowledged for the contact window, which a loaded machine
	// stretches past 100 ms). Such a pull that brought the drain before
	// c's own intent made the test void; one that brought it during the
	// intent would let an undrain stamped without EmitIntent's read pass.
	// With an hour's window and its first cover in, c starts no pull by
	// itself; the pull cut below drops a late answer to one it started
	// before.
	nc := c.nodes["c"]
	nc.mu.Lock()
	nc.cfg.Timing = Timing{TTL: time.Hour}
	nc.contact = liveness.New(len(nc.nodes), time.Hour)
	nc.mu.Unlock()
	runAll(t, c)
	// Covered first: once the first cover is in, a catch-up it called
	// for is what Synced waits for.
	settles(t, "c is covered and has caught up", func() bool {
		if nc.Covered(time.Now()) != nil {
			return false
		}
		ok, _ := nc.Synced()
		return ok
	})
	// c hears nothing pushed: neither batches nor heartbeats. Nor does it
	// pull a's and b's records until it asks for its own intent: not even
	// a pull of its own that was on its way.
	c.setPushCut("a", "c", true)
	c.setPushCut("b", "c", true)
	c.setPullCut("c", "a", true)
	c.setPullCut("c", "b", true)
	// a's Lamport clock runs far ahead of c's, as after a burst of events
	// c has not heard of: a million ticks, which c's heartbeats (one every
	// 20 ms) take hours to make up. A few events on a were not enough:
	// on a loaded machine c's heartbeats overtook them before c stamped,
	// and the test then passed with plain Emit. (Within the door's jump
	// window: b takes a's events.)
	na := c.nodes["a"]
	na.mu.Lock()
	na.state.lamport += 1 << 20
	na.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drain, err := c.nodes["a"].EmitIntent(ctx, Drain, "b")
	if err != nil {
		t.Fatalf("drain b via a: %v", err)
	}
	if drained(c.nodes["c"], "b") {
		t.Fatal("the test is void: c received the drain before its own intent")
	}
	c.setPullCut("c", "a", false)
	c.setPullCut("c", "b", false)
	undrain, err := c.nodes["c"].EmitIntent(ctx, Undrain, "b")
	if err != nil {
		t.Fatalf("undrain b via c: %v", err)
	}
	if undrain.Lamport <= drain.Lamport {
		t.Fatalf("the undrain answered after the drain is stamped %d, not after the drain's %d", undrain.Lamport, drain.Lamport)
	}
	c.setPushCut("a", "c", false)
	c.setPushCut("b", "c", false)
	for name, n := range c.nodes {
		settles(t, name+" holds c's undrain", func() bool {
			var got Event
			var ok bool
			n.View(func(s *State) { got, ok = s.Get(undrain.Register()) })
			return ok && got.ID() == undrain.ID()
		})
		if drained(n, "b") {
			t.Fatalf("%s: b is drained although the undrain was answered after the drain", name)
		}
	}
}

// An intent is answered only when a majority could be read before it and
// holds it after: a node that can reach no peer refuses it and changes
// nothing; one whose deliveries fail keeps it, says it is not yet on a
// majority, and delivers it once the links heal.
func TestIntentNeedsAMajority(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	runAll(t, c)

	// Peers refuse intents for a node that is not a member, so one
	// could never be held by a majority: refused at once.
	if _, err := c.nodes["a"].EmitIntent(context.Background(), Drain, "x"); err == nil || !strings.Contains(err.Error(), "not a node of the cluster") {
		t.Fatalf("drain of a non-member: got %v", err)
	}

	c.setCut("a", "b", true)
	c.setCut("a", "c", true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.nodes["a"].EmitIntent(ctx, Drain, "b")
	cancel()
	if !errors.Is(err, ErrIntentUnread) {
		t.Fatalf("cut off from every peer: got %v, want ErrIntentUnread", err)
	}
	if drained(c.nodes["a"], "b") {
		t.Fatal("a refused intent was applied")
	}

	// Reads pass, deliveries fail.
	c.setCut("a", "b", false)
	c.setCut("a", "c", false)
	c.setPushCut("a", "b", true)
	c.setPushCut("a", "c", true)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	e, err := c.nodes["a"].EmitIntent(ctx, Drain, "b")
	cancel()
	if !errors.Is(err, ErrIntentUnacknowledged) {
		t.Fatalf("deliveries cut: got %v, want ErrIntentUnacknowledged", err)
	}
	if !drained(c.nodes["a"], "b") || e.Subject != "b" {
		t.Fatalf("the unacknowledged intent is not kept on a: drained %v, event %+v", drained(c.nodes["a"], "b"), e)
	}
	// (b and c may already hold it through their own pulls of a's
	// records; what a cannot know is that they do.)
	c.setPushCut("a", "b", false)
	c.setPushCut("a", "c", false)
	for _, name := range []string{"b", "c"} {
		settles(t, name+" receives the kept intent", func() bool { return drained(c.nodes[name], "b") })
	}
	// A peer that does not answer at all (stopped) does not hold up an
	// intent the rest of a majority takes: the read ends with the first
	// synced answer, well before the stopped peer's pull gives up.
	c.mu.Lock()
	c.hang[[2]string{"b", "c"}] = true
	c.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.nodes["b"].EmitIntent(ctx, Undrain, "b"); err != nil {
		t.Fatalf("undrain b via b with c not answering b: %v", err)
	}
	c.mu.Lock()
	c.hang[[2]string{"b", "c"}] = false
	c.mu.Unlock()
	for name, n := range c.nodes {
		settles(t, name+" undrains b", func() bool { return !drained(n, "b") })
	}
}
