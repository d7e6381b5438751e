package federation

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// A pull that was on its way when the node may have missed news again (a
// lapse of its cover: the process was stopped with the request out, and
// its peers moved its lines meanwhile) brings an answer made before that
// news: it must not count as a read of the peer's records since. Here b's
// answer is held until a lapse was recorded; a then still waits for b's
// records, and pulls them again.
func TestPullAskedBeforeALapseDoesNotCatchUp(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		<-release
		json.NewEncoder(w).Encode(Records{Node: "b", Incarnation: "b1", Synced: true})
	}))
	defer b.Close()
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: b.URL}, {Name: "c", URL: "http://127.0.0.1:1"}},
		Path: filepath.Join(t.TempDir(), "a.db"), Timing: Timing{TTL: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// a kept its state (as after a restart of a node that had synced).
	n.mu.Lock()
	n.synced = true
	n.mu.Unlock()
	if ok, why := n.Synced(); ok || !strings.Contains(why, "started") {
		t.Fatalf("a just started: synced %v (%s)", ok, why)
	}
	errc := make(chan error, 1)
	go func() { errc <- n.pull(context.Background(), Peer{Name: "b", URL: b.URL}) }()
	<-asked
	n.mu.Lock()
	n.contact.Missed("was not heard by a majority for longer than the contact window")
	n.mu.Unlock()
	close(release)
	err = <-errc
	if err == nil || !strings.Contains(err.Error(), "may have missed news") {
		t.Fatalf("pull asked before the lapse: err %v, want one naming the lapse", err)
	}
	n.mu.Lock()
	read := n.contact.HasRead("b")
	n.mu.Unlock()
	if read {
		t.Fatal("b's answer, asked before the lapse, counted as read after it")
	}
	if ok, why := n.Synced(); ok || !strings.Contains(why, "not heard by a majority") || !strings.Contains(why, "read 0 []") {
		t.Fatalf("after the lapse, with b's stale answer only: synced %v (%s)", ok, why)
	}
	// Asked again after the lapse, b's answer counts.
	if err := n.pull(context.Background(), Peer{Name: "b", URL: b.URL}); err != nil {
		t.Fatal(err)
	}
	if ok, why := n.Synced(); !ok {
		t.Fatalf("b's records read after the lapse: synced %v (%s)", ok, why)
	}
}

// A node that lost its state learns the epoch records back from its peers
// before it acts; a record in their answers that it cannot check (unsigned
// or under a certificate its peers no longer hold: written before mutual
// TLS, or before the CA changed) is refused, and the answer then lacks it.
// Counting such an answer let the node sync without the record and take
// the key's epochs again from the start. Here b's and c's logs hold b's
// epoch-9 record, written before the cluster moved to signed events; a,
// wiped, must stay unsynced rather than sync without it.
func TestWipedNodeDoesNotSyncPastARecordItCannotCheck(t *testing.T) {
	keys := signers(t, "a", "b", "c")
	c := newCluster(t, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.Run(ctx) })
	}
	eventually(t, "a, b and c sync", func() bool {
		for _, n := range c.nodes {
			if ok, _ := n.Synced(); !ok {
				return false
			}
		}
		return true
	})
	key := capture.Key{Pool: "p", Address: netip.MustParseAddr("10.0.0.1"), Domain: "d"}
	if _, err := c.nodes["b"].Emit(Epoch, key.String(), func(e *Event) {
		e.Record = &capture.EpochRecord{Epoch: 9, Holder: "b"}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c holds b's record", func() bool {
		var rec capture.EpochRecord
		c.nodes["c"].View(func(s *State) { rec = s.Epochs()[key] })
		return rec.Epoch == 9
	})
	cancel()
	wg.Wait()
	// The cluster moves to mutual TLS (signed events); a's disk is lost.
	c.signers = keys
	c.nodes["a"].Close()
	if err := os.Remove(filepath.Join(c.dir, "a.db")); err != nil {
		t.Fatal(err)
	}
	c.start("a", c.names, c.sw["a"])
	c.restart("b")
	c.restart("c")
	a := c.nodes["a"]
	errs := map[string]error{}
	for _, p := range []string{"b", "c"} {
		errs[p] = a.pull(context.Background(), Peer{Name: p, URL: c.srv[p].URL})
	}
	var rec capture.EpochRecord
	a.View(func(s *State) { rec = s.Epochs()[key] })
	if ok, why := a.Synced(); ok || !strings.Contains(why, "learned from 0") {
		t.Fatalf("a synced holding epoch %d of %s, where b and c hold 9: synced %v (%s)", rec.Epoch, key, ok, why)
	}
	for p, err := range errs {
		if !errors.Is(err, errUncheckedRecords) || !strings.Contains(err.Error(), "epoch|"+key.String()) {
			t.Fatalf("pull of %s: err %v, want one naming the record a cannot check", p, err)
		}
	}
	if r := a.Refused()[RefusedSignature]; r != 2 {
		t.Fatalf("a refused %d events for their signature, want 2 (the record, in each answer)", r)
	}
	for _, n := range c.nodes {
		n.Close()
	}
}

// A pull answer goes through the door's jump window too: a member that
// serves its own event (signed: it is its origin) with a Lamport time
// near the bound would otherwise move the puller's clock there, and the
// puller could stamp no more events (its heartbeats refused by every
// peer, then not made at all), for good: the event is kept in its log. A
// real counter is never 2^32 ahead, even of a node that lost its state.
func TestPullRefusesACounterFarAhead(t *testing.T) {
	keys := signers(t, "a", "b", "c")
	far := Event{Origin: "b", Seq: 5, Lamport: MaxValue - 2, Time: 1, Kind: Drain, Subject: "c", Key: keys["b"].KeyID()}
	sig, err := keys["b"].Sign(far.SignedBytes())
	if err != nil {
		t.Fatal(err)
	}
	far.Sig = sig
	near := Event{Origin: "b", Seq: 6, Lamport: 40, Time: 1, Kind: Drain, Subject: "a", Key: keys["b"].KeyID()}
	if near.Sig, err = keys["b"].Sign(near.SignedBytes()); err != nil {
		t.Fatal(err)
	}
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(Records{Node: "b", Incarnation: "b1", Synced: true, Events: []Event{far, near},
			Certs: map[string][]byte{keys["b"].KeyID(): keys["b"].Cert()}})
	}))
	defer b.Close()
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: b.URL}, {Name: "c", URL: "http://127.0.0.1:1"}},
		Path: filepath.Join(t.TempDir(), "a.db"), Signer: keys["a"]})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.pull(context.Background(), Peer{Name: "b", URL: b.URL}); err != nil {
		t.Fatal(err)
	}
	var lamport uint64
	n.View(func(s *State) { lamport = s.Lamport() })
	if lamport != 40 || drained(n, "c") || !drained(n, "a") {
		t.Fatalf("after the pull: Lamport %d (want 40), c drained %v (want false), a drained %v (want true)", lamport, drained(n, "c"), drained(n, "a"))
	}
	if r := n.Refused()[RefusedJump]; r != 1 {
		t.Fatalf("refused as too far ahead: %d, want 1", r)
	}
	for i := range 3 {
		e, err := n.Emit(Heartbeat, "", nil)
		if err != nil || e.Lamport != 41+uint64(i) {
			t.Fatalf("heartbeat %d after the pull: Lamport %d, err %v", i, e.Lamport, err)
		}
	}
}

// A node that is not synced yet reads every answer, unsynced peers' too
// (a first start syncs on those), but once it syncs on its synced peers
// (here: one that saw this incarnation new at the first start), the
// answers of peers that had lost their state must not count towards its
// catch-up: with its own log they are not a majority's records. In a
// cluster of five, a read c (wiped) and b (synced); it must read one more
// synced peer before it acts.
func TestUnsyncedAnswersDoNotCountOnceSynced(t *testing.T) {
	dir := t.TempDir()
	serve := func(name string, rec func() Records) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(rec())
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	var inc string
	peers := []Peer{
		{Name: "b", URL: serve("b", func() Records {
			return Records{Node: "b", Incarnation: "b1", Synced: true, Genesis: map[string]string{"a": inc}}
		})},
		{Name: "c", URL: serve("c", func() Records { return Records{Node: "c", Incarnation: "c2", Synced: false} })},
		{Name: "d", URL: serve("d", func() Records { return Records{Node: "d", Incarnation: "d1", Synced: true} })},
		{Name: "e", URL: "http://127.0.0.1:1"},
	}
	n, err := Open(Config{Node: "a", Peers: peers, Path: filepath.Join(dir, "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	inc = n.Incarnation()
	for _, p := range []Peer{peers[1], peers[0]} { // c, then b
		if err := n.pull(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	n.mu.Lock()
	synced := n.synced
	n.mu.Unlock()
	if !synced {
		t.Fatal("a did not sync on b, which saw its incarnation new at the first start")
	}
	if ok, why := n.Synced(); ok || !strings.Contains(why, "read 1 [b]") {
		t.Fatalf("a read b (synced) and c (wiped): synced %v (%s), want it waiting for a second synced peer", ok, why)
	}
	if err := n.pull(context.Background(), peers[2]); err != nil {
		t.Fatal(err)
	}
	if ok, why := n.Synced(); !ok {
		t.Fatalf("a read b and d: synced %v (%s)", ok, why)
	}
}

// A batch's certificates are those its events name: any other is left
// unread, neither checked, nor kept and passed on, nor counted as a
// refused event (a peer could fill a batch with junk and make every
// receiver parse it and report forged events that nobody sent).
func TestBatchCertsNotNamedAreIgnored(t *testing.T) {
	keys := signers(t, "a", "b", "c")
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: "http://127.0.0.1:1"}, {Name: "c", URL: "http://127.0.0.1:1"}},
		Path: filepath.Join(t.TempDir(), "a.db"), Signer: keys["a"]})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	e := Event{Origin: "b", Seq: 1, Lamport: 1, Time: 1, Kind: Drain, Subject: "c", Key: keys["b"].KeyID()}
	if e.Sig, err = keys["b"].Sign(e.SignedBytes()); err != nil {
		t.Fatal(err)
	}
	certs := map[string][]byte{
		keys["b"].KeyID():  keys["b"].Cert(),
		keys["c"].KeyID():  keys["c"].Cert(),
		"0123456789abcdef": []byte("not a certificate"),
	}
	applied, refused, err := n.Receive(Batch{From: "b", Events: []Event{e}, Certs: certs})
	if err != nil || applied != 1 || refused != 0 {
		t.Fatalf("b's signed drain: applied %d, refused %d, err %v", applied, refused, err)
	}
	if r := n.Refused()[RefusedSignature]; r != 0 {
		t.Fatalf("refused for their signature: %d, want 0 (no event was)", r)
	}
	n.mu.Lock()
	_, gotB := n.certs[keys["b"].KeyID()]
	_, gotC := n.certs[keys["c"].KeyID()]
	kept := len(n.certs)
	n.mu.Unlock()
	if !gotB || gotC || kept != 2 {
		t.Fatalf("certificates kept: b's %v (want true), c's %v (want false), %d in all (want 2: a's and b's)", gotB, gotC, kept)
	}
}
