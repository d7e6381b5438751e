package federation

import (
	"context"
	"crypto/x509"
	"sync"
	"testing"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

// signers are event keys for names, issued by one CA.
func signers(t *testing.T, names ...string) map[string]Signer {
	t.Helper()
	ca := testpki.NewCA(t, t.TempDir(), "cluster")
	out := map[string]Signer{}
	for _, n := range names {
		cert, key := ca.Issue(t, n, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth)
		k, err := auth.LoadEventKeys(cert, key, ca.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		out[n] = k
	}
	return out
}

// With signatures, an event still reaches a node through a relay (its
// certificate travels with it, and the relay keeps it across a restart),
// while an event the relay made up "from" another node is refused.
func TestSignedEventsThroughARelay(t *testing.T) {
	keys := signers(t, "a", "b", "c")
	c := newClusterSigned(t, keys, "a", "b", "c")
	c.setCut("a", "c", true)
	c.setCut("c", "a", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.Run(ctx) })
	}
	e, err := c.nodes["a"].Emit(Drain, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != keys["a"].KeyID() || len(e.Sig) == 0 {
		t.Fatalf("a's event is not signed: key %q, %d bytes of signature", e.Key, len(e.Sig))
	}
	eventually(t, "c learns of a's drain through b", func() bool { return drained(c.nodes["c"], "b") })
	eventually(t, "c hears a's heartbeats through b", func() bool {
		var ok bool
		c.nodes["c"].View(func(s *State) { _, ok = s.Heartbeat("a") })
		return ok
	})
	if r := c.nodes["c"].Refused()[RefusedSignature]; r != 0 {
		t.Fatalf("c refused %d of the relayed events", r)
	}

	// b makes up a drain "from" a: signed with b's own key, unsigned, or
	// a's real event altered. c refuses each.
	forged := Event{Origin: "a", Seq: e.Seq + 100, Lamport: e.Lamport + 100, Time: e.Time, Kind: Drain, Subject: "c"}
	byB := forged
	if err := c.nodes["b"].sign(&byB); err != nil {
		t.Fatal(err)
	}
	byB.Origin = "a" // sign stamps b's key; the origin stays a's
	altered := e
	altered.Subject, altered.Lamport = "c", e.Lamport+200
	for what, ev := range map[string]Event{"signed by b": byB, "unsigned": forged, "altered": altered} {
		certs := map[string][]byte{keys["a"].KeyID(): keys["a"].Cert(), keys["b"].KeyID(): keys["b"].Cert()}
		applied, refused, _ := c.nodes["c"].Receive(Batch{From: "b", Events: []Event{ev}, Certs: certs})
		if applied != 0 || refused != 1 {
			t.Fatalf("%s: applied %d, refused %d", what, applied, refused)
		}
	}
	if drained(c.nodes["c"], "c") {
		t.Fatal("a forged drain took")
	}
	if r := c.nodes["c"].Refused()[RefusedSignature]; r != 3 {
		t.Fatalf("refused for their signature: %d, want 3", r)
	}
	// A certificate of another CA naming a is refused, and the event
	// signed under it with it.
	stranger := signers(t, "a")["a"]
	ev := Event{Origin: "a", Seq: e.Seq + 300, Lamport: e.Lamport + 300, Time: e.Time, Kind: Drain, Subject: "c", Key: stranger.KeyID()}
	if ev.Sig, err = stranger.Sign(ev.SignedBytes()); err != nil {
		t.Fatal(err)
	}
	if applied, _, _ := c.nodes["c"].Receive(Batch{From: "b", Events: []Event{ev}, Certs: map[string][]byte{stranger.KeyID(): stranger.Cert()}}); applied != 0 {
		t.Fatal("an event under another CA's certificate was applied")
	}

	// b keeps a's certificate in its log: reopened, it still has it to
	// pass on with a's events.
	cancel()
	wg.Wait()
	c.restart("b")
	b := c.nodes["b"]
	b.mu.Lock()
	_, kept := b.certs[keys["a"].KeyID()]
	b.mu.Unlock()
	if !kept {
		t.Fatal("b forgot a's certificate across its restart")
	}
	rec := b.records()
	if _, ok := rec.Certs[keys["a"].KeyID()]; !ok {
		t.Fatalf("b's records lack the certificate of a's events: %d certificates", len(rec.Certs))
	}
	for _, n := range c.nodes {
		n.Close()
	}
}
