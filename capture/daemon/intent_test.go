package daemon_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

// drainedIn reports whether member is drained in n's status.
func (c *cluster) drainedIn(n, member string) bool {
	c.t.Helper()
	for _, m := range c.status(n).Members {
		if m.Node == member {
			return m.Drained
		}
	}
	c.t.Fatalf("%s's status has no member %s", n, member)
	return false
}

// A node cut off from the majority refuses an operator's intent with 503
// and records nothing, so that the intent cannot answer 200 and then lose
// at the heal to one sent meanwhile to the majority (which the capture
// test saw: an undrain through an isolated node lost to an earlier drain
// through another, and its subject stayed drained). Back in contact, the
// same request is taken.
func TestIntentRefusedOutOfContact(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := startCluster(t, settings{nodes: 3, addresses: 1})
	c.waitAllOn("eni-n1", generous)
	c.signal("n2", syscall.SIGSTOP)
	c.signal("n3", syscall.SIGSTOP)
	// Out of contact once the window (TTL plus promotion hold) has passed
	// since n1 last heard them; until then the drain may still be taken.
	deadline := time.Now().Add(generous)
	code := http.StatusOK
	for time.Now().Before(deadline) {
		if code = c.api("n1", http.MethodPost, "/v1/members/n3/undrain", nil, nil); code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("an undrain through n1 with both peers stopped answered %d, want 503", code)
	}
	if code := c.api("n1", http.MethodPost, "/v1/members/n2/drain", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("a drain through n1 out of contact answered %d, want 503", code)
	}
	if c.drainedIn("n1", "n2") {
		t.Fatal("a refused drain of n2 was recorded")
	}
	c.signal("n2", syscall.SIGCONT)
	c.signal("n3", syscall.SIGCONT)
	deadline = time.Now().Add(generous)
	for time.Now().Before(deadline) {
		if code = c.api("n1", http.MethodPost, "/v1/members/n2/drain", nil, nil); code == http.StatusOK {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusOK {
		t.Fatalf("back in contact, the drain answered %d, want 200", code)
	}
	if !c.drainedIn("n1", "n2") {
		t.Fatal("the drain taken back in contact is not recorded")
	}
}
