package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
)

const maxU64 = ^uint64(0)

// openNode opens a node of the cluster a, b, c with no reachable peers.
func openNode(t *testing.T, path, name string, keys map[capture.Key]bool) *Node {
	t.Helper()
	var peers []Peer
	for _, p := range []string{"a", "b", "c"} {
		if p != name {
			peers = append(peers, Peer{Name: p, URL: "http://127.0.0.1:1"})
		}
	}
	n, err := Open(Config{Node: name, Peers: peers, Path: path, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustKey(t *testing.T, s string) capture.Key {
	t.Helper()
	k, err := capture.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDoorRefusesWhatItCannotCheck(t *testing.T) {
	k := mustKey(t, key1)
	keys := map[capture.Key]bool{k: true}
	s := NewState()
	s.Apply(epoch("b", 10, 10, key1, 7, "b"))
	lim := Limits{Self: "a", Nodes: []string{"a", "b", "c"}, Keys: keys}
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Origin: "", Seq: 1, Kind: Heartbeat}, RefusedMalformed},
		{hb("mallory", 1, 1), RefusedOrigin},
		{hb("a", 11, 1), RefusedOwn},
		{intent(Drain, "b", 11, 11, "mallory"), RefusedSubject},
		{epoch("b", 11, 11, "web/10.9.9.9@provider:aws:placement:g", 8, "b"), RefusedKey},
		{epoch("b", 11, 11, key1, capture.Epoch(maxU64), "b"), RefusedBounds},
		{epoch("b", 11, 11, key1, 1<<63, "b"), RefusedBounds},
		{epoch("b", 11, 11, key1, capture.Epoch(7+DefaultMaxJump+1), "b"), RefusedJump},
		{intent(Drain, "b", 11, maxU64, "c"), RefusedBounds},
		{intent(Drain, "b", 11, 10+DefaultMaxJump+1, "c"), RefusedJump},
		{hb("b", maxU64, 1), RefusedBounds},
		{hb("b", 10+DefaultMaxJump+1, 1), RefusedJump},
		{Event{Origin: "b", Seq: 11, Lamport: 11, Time: -1, Kind: Heartbeat}, RefusedBounds},
		{Event{Origin: "b", Seq: 11, Lamport: 11, Kind: Status, Subject: "b", Held: []string{"web/10.9.9.9@provider:aws:placement:g"}}, RefusedKey},
		{Event{Origin: "b", Seq: 11, Lamport: 11, Kind: "poke", Subject: "x"}, RefusedMalformed},
	}
	for _, c := range cases {
		reason, err := s.Check(&c.e, lim)
		if reason != c.want || err == nil {
			t.Errorf("%+v: %q (%v), want %q", c.e, reason, err, c.want)
		}
	}
	// Within bounds and window: admitted.
	for _, e := range []Event{epoch("b", 11, 11, key1, capture.Epoch(7+DefaultMaxJump), "b"), hb("c", 5, 1), intent(Undrain, "c", 3, 12, "a")} {
		if reason, err := s.Check(&e, lim); reason != "" {
			t.Errorf("%+v refused: %v", e, err)
		}
	}
}

// Issue 14: one event with record.epoch 2^64−1 made the next holder change
// wrap the epoch to 0. It is refused at the door, counted, and the state
// keeps the epoch it had.
func TestOverflowingEpochIsRefused(t *testing.T) {
	dir := t.TempDir()
	k := mustKey(t, key1)
	n := openNode(t, filepath.Join(dir, "a.db"), "a", map[capture.Key]bool{k: true})
	defer n.Close()
	if _, _, err := n.Receive(Batch{From: "b", Events: []Event{epoch("b", 1, 1, key1, 1, "b")}}); err != nil {
		t.Fatal(err)
	}
	_, refused, err := n.Receive(Batch{From: "b", Events: []Event{epoch("b", 2, 2, key1, capture.Epoch(maxU64), "c")}})
	if refused != 1 || !errors.Is(err, ErrAllRefused) {
		t.Fatalf("refused %d, %v", refused, err)
	}
	var got capture.EpochRecord
	n.View(func(s *State) { got = s.Epochs()[k] })
	if got != (capture.EpochRecord{Epoch: 1, Holder: "b"}) {
		t.Fatalf("epoch after the overflow event: %+v", got)
	}
	if c := n.Refused()[RefusedBounds]; c != 1 {
		t.Fatalf("out-of-bounds count %d", c)
	}
	// A mixed batch: the good event is applied, the bad one refused.
	applied, refused, err := n.Receive(Batch{From: "c", Events: []Event{epoch("c", 1, 3, key1, 1<<63, "c"), hb("c", 2, 5)}})
	if err != nil || applied != 1 || refused != 1 {
		t.Fatalf("mixed batch: applied %d refused %d %v", applied, refused, err)
	}
	if c := n.Refused()[RefusedBounds]; c != 2 {
		t.Fatalf("out-of-bounds count %d", c)
	}
}

// Issue 14: a forged drain intent with lamport 2^64−1 wrapped every node's
// Lamport clock, so that `ctl undrain` answered 200 but the node stayed
// drained, across restarts. The drain is refused, the undrain works, and
// the clock refuses to wrap even if it were ever at its bound.
func TestLamportOverflowDrainThenUndrain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	n := openNode(t, path, "a", nil)
	if _, _, err := n.Receive(Batch{From: "b", Events: []Event{intent(Drain, "b", 1, maxU64, "c")}}); !errors.Is(err, ErrAllRefused) {
		t.Fatalf("the forged drain: %v", err)
	}
	if drained(n, "c") {
		t.Fatal("the forged drain was applied")
	}
	if _, err := n.Emit(Drain, "c", nil); err != nil {
		t.Fatal(err)
	}
	if !drained(n, "c") {
		t.Fatal("drain not applied")
	}
	if _, err := n.Emit(Undrain, "c", nil); err != nil {
		t.Fatal(err)
	}
	if drained(n, "c") {
		t.Fatal("undrain lost")
	}
	n.Close()
	n = openNode(t, path, "a", nil)
	defer n.Close()
	if drained(n, "c") {
		t.Fatal("drained again after a restart")
	}
	var lam uint64
	n.View(func(s *State) { lam = s.Lamport() })
	if lam >= 1<<32 {
		t.Fatalf("lamport %d", lam)
	}
	// The clock at its bound: Next refuses rather than wrap.
	s := NewState()
	s.Apply(intent(Drain, "b", 1, MaxValue, "c"))
	if v, err := s.Next(); err == nil {
		t.Fatalf("Next at the bound gave %d", v)
	}
	s = NewState()
	s.Apply(intent(Drain, "b", 1, MaxValue-1, "c"))
	if v, err := s.Next(); err != nil || v != MaxValue {
		t.Fatalf("Next below the bound: %d %v", v, err)
	}
}

// Issue 14: a forged heartbeat with seq 2^64−1 for a healthy peer made the
// receiver treat that peer as stale until it restarted. It is refused; the
// peer's real heartbeats go on counting.
func TestForgedHeartbeatSeqDoesNotStaleAPeer(t *testing.T) {
	n := openNode(t, filepath.Join(t.TempDir(), "a.db"), "a", nil)
	defer n.Close()
	n.cfg.Timing = Timing{TTL: 300 * time.Millisecond}
	at := int64(1000) * ms
	beat := func(seq uint64) {
		t.Helper()
		for _, o := range []string{"b", "c"} {
			if _, _, err := n.Receive(Batch{From: o, Events: []Event{hb(o, seq, at)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	beat(1)
	// c relays a forged heartbeat "of b".
	if _, _, err := n.Receive(Batch{From: "c", Events: []Event{hb("b", maxU64, at)}}); !errors.Is(err, ErrAllRefused) {
		t.Fatalf("forged heartbeat: %v", err)
	}
	for seq := uint64(2); seq < 10; seq++ {
		at += 100 * ms
		beat(seq)
	}
	if m := n.Liveness()["b"]; m.Stale || m.LastTime != at {
		t.Fatalf("b after the forged heartbeat: %+v (want last time %d)", m, at)
	}
	// The sequence numbers of this node refuse to wrap.
	n.mu.Lock()
	n.seq, n.reserved = MaxValue-1, MaxValue-1
	_, err := n.nextSeq()
	n.mu.Unlock()
	if err == nil {
		t.Fatal("nextSeq went past the bound")
	}
}

// Issue 14: 5,120 drains for non-member names grew every node's federation
// state from 32 KB to 8 MB. They are refused and stored nowhere; stored
// events that no longer fit the configuration are dropped at open.
func TestNonMemberDrainsDoNotGrowState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	n := openNode(t, path, "a", nil)
	if _, err := n.Emit(Drain, "b", nil); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	for i := range 5120 / 128 {
		var evs []Event
		for j := range 128 {
			seq := uint64(i*128 + j + 1)
			evs = append(evs, intent(Drain, "b", seq, seq, fmt.Sprintf("ghost-%d", seq)))
		}
		if _, refused, err := n.Receive(Batch{From: "b", Events: evs}); refused != 128 || !errors.Is(err, ErrAllRefused) {
			t.Fatalf("batch %d: refused %d, %v", i, refused, err)
		}
	}
	var events int
	n.View(func(s *State) { events = len(s.Events()) })
	if events != 1 {
		t.Fatalf("%d events held, want the one drain", events)
	}
	if c := n.Refused()[RefusedSubject]; c != 5120 {
		t.Fatalf("refused %d", c)
	}
	// A heartbeat from a non-member origin is refused too.
	if _, _, err := n.Receive(Batch{From: "b", Events: []Event{hb("ghost", 1, 1)}}); !errors.Is(err, ErrAllRefused) {
		t.Fatalf("non-member heartbeat: %v", err)
	}
	n.Close()
	if after := fileSize(t, path); after != before {
		t.Fatalf("the log grew from %d to %d bytes", before, after)
	}

	// A log written by a larger cluster: drains of d and epochs of a key
	// no pool has any more are dropped when it is opened with the new
	// configuration.
	path2 := filepath.Join(dir, "big.db")
	big, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: "http://127.0.0.1:1"}, {Name: "c", URL: "http://127.0.0.1:1"}, {Name: "d", URL: "http://127.0.0.1:1"}}, Path: path2})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{intent(Drain, "b", 1, 1, "d"), intent(Drain, "b", 2, 2, "c"), epoch("d", 1, 3, key1, 4, "d"), epoch("b", 3, 4, "web/10.0.0.9@provider:aws:placement:g", 2, "b")} {
		if _, _, err := big.Receive(Batch{From: "b", Events: []Event{e}}); err != nil {
			t.Fatal(err)
		}
	}
	big.Close()
	small := openNode(t, path2, "a", map[capture.Key]bool{mustKey(t, key1): true})
	defer small.Close()
	var got []string
	small.View(func(s *State) {
		for _, e := range s.Events() {
			got = append(got, e.Register())
		}
	})
	if strings.Join(got, ",") != "intent|c" {
		t.Fatalf("after reopening with a smaller cluster: %v", got)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

var errDiskFull = errors.New("no space left on device (injected)")

// Issue 14: on a full disk `ctl drain` answered 500 yet the drain was
// applied in memory and propagated. Every change is written first: a
// failed write leaves memory, the outbox and the peers as they were.
func TestFailedWriteChangesNothing(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	a := c.nodes["a"]
	a.writeHook = func() error { return errDiskFull }
	if _, err := a.Emit(Drain, "b", nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("drain on a full disk: %v", err)
	}
	if drained(a, "b") {
		t.Fatal("the drain was applied in memory")
	}
	for p, st := range a.Stats() {
		if st.Pending != 0 {
			t.Fatalf("queued for %s: %+v", p, st)
		}
	}
	var lam uint64
	a.View(func(s *State) { lam = s.Lamport() })
	if lam != 0 {
		t.Fatalf("the clock moved to %d", lam)
	}
	a.Flush(time.Second)
	if drained(c.nodes["b"], "b") || drained(c.nodes["c"], "b") {
		t.Fatal("the drain was propagated")
	}
	// Receiving on a full disk: answered 500, nothing applied, nothing
	// relayed.
	b := c.nodes["b"]
	b.writeHook = func() error { return errDiskFull }
	e, err := c.nodes["c"].Emit(Drain, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Receive(Batch{From: "c", Events: []Event{e}}); !errors.Is(err, errDiskFull) {
		t.Fatalf("receive on a full disk: %v", err)
	}
	resp, err := http.Post(c.srv["b"].URL+Path, "application/json", strings.NewReader(`{"from":"c","events":[`+mustJSON(t, e)+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("handler on a full disk: %s", resp.Status)
	}
	if drained(b, "a") || b.Stats()["a"].Pending != 0 {
		t.Fatal("b applied or queued what it could not write")
	}
	// Space comes back: the same drain goes through, and on to a.
	a.writeHook, b.writeHook = nil, nil
	if _, _, err := b.Receive(Batch{From: "c", Events: []Event{e}}); err != nil {
		t.Fatal(err)
	}
	b.Flush(time.Second)
	if !drained(b, "a") || !drained(a, "a") {
		t.Fatal("the drain did not go through once the disk had room")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Under authentication a batch's sender is who the request authenticated
// as, and must be a peer: one node cannot send "from" another, and a name
// that is no member cannot send at all.
func TestHandlerBindsTheSender(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: "http://127.0.0.1:1"}, {Name: "c", URL: "http://127.0.0.1:1"}},
		Path: filepath.Join(dir, "a.db"), RequireSender: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	secret := []byte(strings.Repeat("s", 32))
	srv := httptest.NewServer((&auth.Verifier{Secret: secret}).Middleware(n.Handler()))
	defer srv.Close()
	post := func(as string, b Batch) int {
		t.Helper()
		client := &http.Client{Transport: (&auth.Signer{Secret: secret, Node: as}).Transport(http.DefaultTransport)}
		resp, err := client.Post(srv.URL+Path, "application/json", strings.NewReader(mustJSON(t, b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("c", Batch{From: "b", Events: []Event{intent(Drain, "b", 1, 1, "a")}}); code != http.StatusForbidden {
		t.Fatalf("c sending as b: %d", code)
	}
	if code := post("mallory", Batch{From: "mallory", Events: []Event{intent(Drain, "b", 1, 1, "a")}}); code != http.StatusForbidden {
		t.Fatalf("mallory: %d", code)
	}
	if drained(n, "a") {
		t.Fatal("a forged batch was applied")
	}
	if c := n.Refused()[RefusedSender]; c != 2 {
		t.Fatalf("forged-sender count %d", c)
	}
	if code := post("b", Batch{From: "b", Events: []Event{intent(Drain, "b", 1, 1, "a")}}); code != http.StatusOK || !drained(n, "a") {
		t.Fatalf("b as itself: %d", code)
	}
	// The records are for peers only too.
	client := &http.Client{Transport: (&auth.Signer{Secret: secret, Node: "mallory"}).Transport(http.DefaultTransport)}
	resp, err := client.Get(srv.URL + RecordsPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("records for mallory: %s", resp.Status)
	}
}

// A node whose log is new learns the cluster's records by pulling, and its
// own sequence numbers past what its peers saw of its earlier life; until
// a majority answered it is not synced.
func TestFreshNodePullsAndSyncs(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range []string{"b", "c"} {
		go c.nodes[n].Run(ctx)
	}
	// A cluster's first start: every peer answered, none synced.
	ctxA, stopA := context.WithCancel(ctx)
	runA := make(chan struct{})
	go func() { c.nodes["a"].Run(ctxA); close(runA) }()
	eventually(t, "a, b and c sync", func() bool {
		for _, n := range c.nodes {
			if ok, _ := n.Synced(); !ok {
				return false
			}
		}
		return true
	})
	stopA()
	<-runA
	// a, at its first life, leaves events behind: an epoch and a high seq.
	a := c.nodes["a"]
	for range 3000 {
		if _, err := a.Emit(Heartbeat, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	last, err := a.Emit(Epoch, key1, func(e *Event) { e.Record = &capture.EpochRecord{Epoch: 8, Holder: "a"} })
	if err != nil {
		t.Fatal(err)
	}
	a.Flush(2 * time.Second)
	// Its log says it never lost its state (Synced may still wait for a
	// catch-up: stopped, a went unheard for longer than the window).
	a.mu.Lock()
	kept := a.synced
	a.mu.Unlock()
	if !kept {
		t.Fatal("a node that never lost its state is not synced")
	}
	// a's data dir is wiped.
	a.Close()
	if err := os.Remove(filepath.Join(c.dir, "a.db")); err != nil {
		t.Fatal(err)
	}
	sw := c.srv["a"].Config.Handler.(*handlerSwitch)
	sw.mu.Lock()
	sw.h = nil
	sw.mu.Unlock()
	c.start("a", []string{"a", "b", "c"}, sw)
	a = c.nodes["a"]
	if ok, why := a.Synced(); ok || !strings.Contains(why, "acts for nothing") {
		t.Fatalf("a wiped node: %v %q", ok, why)
	}
	// One peer is not enough in a cluster of three.
	c.setCut("a", "c", true)
	go a.Run(ctx)
	eventually(t, "a pulls b", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.pulled["b"]
	})
	if ok, _ := a.Synced(); ok {
		t.Fatal("synced from one peer of two")
	}
	c.setCut("a", "c", false)
	eventually(t, "a syncs", func() bool { ok, _ := a.Synced(); return ok })
	k := mustKey(t, key1)
	var rec capture.EpochRecord
	a.View(func(s *State) { rec = s.Epochs()[k] })
	if rec != (capture.EpochRecord{Epoch: 8, Holder: "a"}) {
		t.Fatalf("a learned %+v", rec)
	}
	e, err := a.Emit(Drain, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq <= last.Seq {
		t.Fatalf("seq %d after a wipe, not past %d of the earlier life", e.Seq, last.Seq)
	}
	eventually(t, "b takes a's new event", func() bool { return drained(c.nodes["b"], "c") })
}

// An epoch record counts as replicated once ReplicationQuorum peers hold
// it, and the count survives a restart (the outbox is persisted).
func TestUnreplicated(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	a := c.nodes["a"]
	k := mustKey(t, key1)
	want := map[capture.Key]capture.EpochRecord{k: {Epoch: 3, Holder: "a"}}
	if got := a.Unreplicated(want); len(got) != 1 {
		t.Fatalf("no record yet: %v", got)
	}
	c.setCut("a", "b", true)
	c.setCut("a", "c", true)
	if _, err := a.Emit(Epoch, key1, func(e *Event) { e.Record = &capture.EpochRecord{Epoch: 3, Holder: "a"} }); err != nil {
		t.Fatal(err)
	}
	a.Flush(100 * time.Millisecond)
	if got := a.Unreplicated(want); len(got) != 1 {
		t.Fatalf("held by no peer: %v", got)
	}
	c.setCut("a", "b", false)
	a.Flush(time.Second)
	if got := a.Unreplicated(want); len(got) != 0 {
		t.Fatalf("held by b: %v", got)
	}
	for _, other := range []capture.EpochRecord{{Epoch: 4, Holder: "a"}, {Epoch: 2, Holder: "a"}, {Epoch: 3, Holder: "b"}} {
		// Not published yet; the cluster moved on; bumped at once.
		if got := a.Unreplicated(map[capture.Key]capture.EpochRecord{k: other}); len(got) != 1 {
			t.Fatalf("the record is %+v, the pass's %+v: %v", capture.EpochRecord{Epoch: 3, Holder: "a"}, other, got)
		}
	}
	a.Close()
	sw := &handlerSwitch{}
	c.srv["a"].Config.Handler = sw
	c.start("a", []string{"a", "b", "c"}, sw)
	if got := c.nodes["a"].Unreplicated(want); len(got) != 0 {
		t.Fatalf("after a restart: %v", got)
	}
	if q, p := c.nodes["a"].ReplicationQuorum(), c.nodes["a"].PullQuorum(); q != 1 || p != 2 {
		t.Fatalf("quorums %d %d", q, p)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// A peer may relay a node's own event back (the newest of a register it
// owes the node): skipped, not refused. One newer than the node's own is a
// forgery, refused.
func TestOwnEventsRelayedBack(t *testing.T) {
	n := openNode(t, filepath.Join(t.TempDir(), "a.db"), "a", nil)
	defer n.Close()
	e, err := n.Emit(Drain, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	applied, refused, err := n.Receive(Batch{From: "b", Events: []Event{e}})
	if err != nil || applied != 0 || refused != 0 {
		t.Fatalf("own event back: applied %d refused %d %v", applied, refused, err)
	}
	forged := intent(Undrain, "a", e.Seq+1, e.Lamport+1, "c")
	if _, refused, err := n.Receive(Batch{From: "b", Events: []Event{forged}}); refused != 1 || !errors.Is(err, ErrAllRefused) {
		t.Fatalf("forged own event: refused %d %v", refused, err)
	}
	if !drained(n, "c") || n.Refused()[RefusedOwn] != 1 {
		t.Fatalf("after a forged own undrain: drained %v, counts %v", drained(n, "c"), n.Refused())
	}
}

// A truncated (empty) log is refused, never taken for a new one.
func TestEmptyLogRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Config{Node: "a", Path: path})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty log: %v", err)
	}
}

// After a majority lost its state an operator may vouch for the peers that
// kept it: the node syncs once each of them answered synced, fewer than
// PullQuorum.
func TestRejoinFrom(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range c.nodes {
		go n.Run(ctx)
	}
	eventually(t, "all sync", func() bool {
		for _, n := range c.nodes {
			if ok, _ := n.Synced(); !ok {
				return false
			}
		}
		return true
	})
	// a and c lose their state; b kept it. a cannot sync by itself.
	if err := c.nodes["a"].MarkUnsynced(); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["c"].MarkUnsynced(); err != nil {
		t.Fatal(err)
	}
	c.nodes["a"].Close()
	sw := c.srv["a"].Config.Handler.(*handlerSwitch)
	var peers []Peer
	for _, p := range []string{"b", "c"} {
		peers = append(peers, Peer{Name: p, URL: c.srv[p].URL})
	}
	// Restarted alone, it pulls both and stays unsynced: one synced peer
	// of two.
	alone, err := Open(Config{Node: "a", Peers: peers, Path: filepath.Join(c.dir, "a.db"), Client: &http.Client{Transport: toHeader{cutTransport{c, "a"}, c}},
		Heartbeat: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(ctx)
	runA := make(chan struct{})
	go func() { alone.Run(ctxA); close(runA) }()
	// A node decides whether it syncs on an answer in the same critical
	// section that records it, and an unsynced node pulls each peer once:
	// with both answers recorded, the decision on them is taken and final.
	eventually(t, "a pulls b and c", func() bool {
		alone.mu.Lock()
		defer alone.mu.Unlock()
		return len(alone.pulled) == 2
	})
	if ok, _ := alone.Synced(); ok {
		t.Fatal("a synced with one synced peer of two")
	}
	stopA()
	<-runA
	alone.Close()
	// Restarted with the operator's word for b.
	if _, err := Open(Config{Node: "a", Peers: peers, Path: filepath.Join(c.dir, "x.db"), RejoinFrom: []string{"z"}}); err == nil || !strings.Contains(err.Error(), `"z"`) {
		t.Fatalf("rejoin from a stranger: %v", err)
	}
	n, err := Open(Config{Node: "a", Peers: peers, Path: filepath.Join(c.dir, "a.db"), Client: &http.Client{Transport: toHeader{cutTransport{c, "a"}, c}},
		Heartbeat: 20 * time.Millisecond, RejoinFrom: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sw.mu.Lock()
	sw.h = n.Handler()
	sw.mu.Unlock()
	if ok, _ := n.Synced(); ok {
		t.Fatal("synced before pulling")
	}
	go n.Run(ctx)
	eventually(t, "a syncs on b's word", func() bool { ok, _ := n.Synced(); return ok })
}

// A lone node has no peer to learn from: a new state.db beside its
// federation log (MarkUnsynced) leaves it synced, or it would stay passive
// for good; a node with peers becomes unsynced.
func TestMarkUnsyncedLoneNode(t *testing.T) {
	lone, err := Open(Config{Node: "a", Path: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	if err := lone.MarkUnsynced(); err != nil {
		t.Fatal(err)
	}
	if ok, why := lone.Synced(); !ok {
		t.Fatalf("a lone node marked unsynced: %s", why)
	}
	peered := openNode(t, filepath.Join(t.TempDir(), "b.db"), "a", nil)
	defer peered.Close()
	if err := peered.MarkUnsynced(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := peered.Synced(); ok {
		t.Fatal("a node with peers stayed synced after MarkUnsynced")
	}
}

// TestPullAnsweredAfterStateLossIsDropped: a pull on its way when the node
// loses its state (MarkUnsynced: a new incarnation) must not count for the
// new incarnation, or a peer heard from before the loss would help the
// node sync after it (TestRejoinFrom saw a node sync with one synced peer
// of two when such answers came back late).
func TestPullAnsweredAfterStateLossIsDropped(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != RecordsPath {
			http.NotFound(w, r)
			return
		}
		close(arrived)
		<-release
		_ = json.NewEncoder(w).Encode(Records{Node: "b", Incarnation: "b1", Synced: true})
	}))
	defer peer.Close()
	n, err := Open(Config{Node: "a", Path: filepath.Join(t.TempDir(), "a.db"), Client: peer.Client(),
		Peers: []Peer{{Name: "b", URL: peer.URL}, {Name: "c", URL: "http://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The node is synced (as it would be after its first start), and a
	// pull of b is on its way.
	n.mu.Lock()
	n.synced = true
	n.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- n.pull(t.Context(), Peer{Name: "b", URL: peer.URL}) }()
	<-arrived
	before := n.incarnation
	if err := n.MarkUnsynced(); err != nil {
		t.Fatal(err)
	}
	close(release)
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "has since lost its state") {
		t.Fatalf("pull answered after the loss: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.incarnation == before || n.synced || len(n.pulled) != 0 {
		t.Fatalf("after the late answer: incarnation %s (was %s), synced %v, pulled %v", n.incarnation, before, n.synced, n.pulled)
	}
}
