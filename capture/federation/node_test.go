package federation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

// cluster runs nodes in this process, each behind its own test server; a
// link can be cut by making the sender's view of a peer's URL dead.
type cluster struct {
	t     *testing.T
	dir   string
	nodes map[string]*Node
	srv   map[string]*httptest.Server
	// cut[a][b]: a's requests to b fail; pushCut[a][b]: only its POSTs
	// (batches and heartbeats), so b still answers a's pulls.
	// hang[a][b]: a's requests to b get no answer until they give up, as
	// from a stopped process.
	mu      sync.Mutex
	cut     map[[2]string]bool
	pushCut map[[2]string]bool
	// pullCut[a][b]: a's pulls of b's records fail, even one already on
	// its way when the cut was made (see cutTransport).
	pullCut map[[2]string]bool
	hang    map[[2]string]bool
	// changes counts OnChange calls per node.
	changes map[string]*atomic.Int64
	// signers, when set, sign each node's events (see sign_test.go).
	signers map[string]Signer
	// sw is each node's handler switch, names the cluster's nodes.
	sw    map[string]*handlerSwitch
	names []string
}

// restart closes node name and opens it again behind the same server.
// Its Run, if any, must have returned.
func (c *cluster) restart(name string) {
	c.nodes[name].Close()
	c.start(name, c.names, c.sw[name])
}

// cutTransport fails requests on cut links.
type cutTransport struct {
	c    *cluster
	from string
}

func (ct cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ct.c.mu.Lock()
	to := r.Header.Get("X-Test-To")
	blocked := ct.c.cut[[2]string{ct.from, to}] || (r.Method == http.MethodPost && ct.c.pushCut[[2]string{ct.from, to}])
	hung := ct.c.hang[[2]string{ct.from, to}]
	ct.c.mu.Unlock()
	if hung {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	pull := r.Method == http.MethodGet
	pullCut := func() bool {
		ct.c.mu.Lock()
		defer ct.c.mu.Unlock()
		return pull && ct.c.pullCut[[2]string{ct.from, to}]
	}
	if blocked || pullCut() {
		return nil, context.DeadlineExceeded
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !pull {
		return resp, err
	}
	// The answer is read whole before the cut is looked at again: what
	// gets through was made before a cut, so before anything the test
	// does under it.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if pullCut() {
		return nil, context.DeadlineExceeded
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func newCluster(t *testing.T, names ...string) *cluster {
	return newClusterSigned(t, nil, names...)
}

// newClusterSigned is newCluster with each node's Signer.
func newClusterSigned(t *testing.T, signers map[string]Signer, names ...string) *cluster {
	c := &cluster{signers: signers, t: t, dir: t.TempDir(), nodes: map[string]*Node{}, srv: map[string]*httptest.Server{},
		cut: map[[2]string]bool{}, pushCut: map[[2]string]bool{}, pullCut: map[[2]string]bool{}, hang: map[[2]string]bool{}, changes: map[string]*atomic.Int64{}}
	// Servers first, so that every node knows every URL.
	handlers := map[string]*handlerSwitch{}
	c.sw, c.names = handlers, names
	for _, n := range names {
		h := &handlerSwitch{}
		handlers[n] = h
		c.srv[n] = httptest.NewServer(h)
		t.Cleanup(c.srv[n].Close)
	}
	for _, n := range names {
		c.start(n, names, handlers[n])
	}
	return c
}

// handlerSwitch lets a restarted node take over its server.
type handlerSwitch struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *handlerSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

func (c *cluster) start(name string, names []string, sw *handlerSwitch) {
	var peers []Peer
	for _, p := range names {
		if p != name {
			peers = append(peers, Peer{Name: p, URL: c.srv[p].URL})
		}
	}
	if c.changes[name] == nil {
		c.changes[name] = &atomic.Int64{}
	}
	counter := c.changes[name]
	n, err := Open(Config{
		Node: name, Peers: peers, Path: filepath.Join(c.dir, name+".db"),
		Client:    &http.Client{Transport: toHeader{cutTransport{c, name}, c}},
		Heartbeat: 20 * time.Millisecond, Timing: Timing{TTL: 100 * time.Millisecond},
		OnChange: func() { counter.Add(1) }, Signer: c.signers[name],
	})
	if err != nil {
		c.t.Fatal(err)
	}
	sw.mu.Lock()
	sw.h = n.Handler()
	sw.mu.Unlock()
	c.nodes[name] = n
}

// toHeader names the peer a request goes to, from its URL.
type toHeader struct {
	next http.RoundTripper
	c    *cluster
}

func (th toHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	for name, s := range th.c.srv {
		if "http://"+r.URL.Host == s.URL {
			r.Header.Set("X-Test-To", name)
		}
	}
	return th.next.RoundTrip(r)
}

func (c *cluster) setCut(from, to string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[[2]string{from, to}] = cut
}

// setPullCut makes from's pulls of to's records fail (or pass again),
// leaving from's batches and heartbeats to to alone.
func (c *cluster) setPullCut(from, to string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pullCut[[2]string{from, to}] = cut
}

// setPushCut makes from's batches and heartbeats to to fail (or pass
// again), leaving from's pulls of to's records alone.
func (c *cluster) setPushCut(from, to string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pushCut[[2]string{from, to}] = cut
}

// eventually polls cond until it holds, failing the test after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// 30 s, not a few: the deadline only bounds how long a failure takes
	// to show, and on a loaded machine a catch-up round has been seen to
	// need more than 5 s (TestNodeCatchesUpBeforeActing, load average 16).
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func drained(n *Node, member string) bool {
	var d bool
	n.View(func(s *State) { d = s.Drained(member) })
	return d
}

func TestEventsReachEveryNodeThroughARelay(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	// a cannot reach c directly; b relays.
	c.setCut("a", "c", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range c.nodes {
		go n.Run(ctx)
	}
	if _, err := c.nodes["a"].Emit(Drain, "b", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c learns of the drain through b", func() bool { return drained(c.nodes["c"], "b") })
	if c.changes["c"].Load() == 0 {
		t.Fatal("c's OnChange was not called")
	}
	// Heartbeats relay too: c hears a.
	eventually(t, "c hears a's heartbeats", func() bool {
		var ok bool
		c.nodes["c"].View(func(s *State) { _, ok = s.Heartbeat("a") })
		return ok
	})
	if st := c.nodes["a"].Stats()["c"]; st.Failures == 0 {
		t.Fatalf("the cut link never failed: %+v", st)
	}
}

// An undelivered event survives a restart of its sender and is delivered
// after; receiving it twice changes nothing.
func TestOutboxSurvivesRestart(t *testing.T) {
	c := newCluster(t, "a", "b")
	c.setCut("a", "b", true)
	e, err := c.nodes["a"].Emit(Undrain, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.nodes["a"].Stats()["b"]; st.Pending != 1 {
		t.Fatalf("pending %+v", st)
	}
	c.nodes["a"].Close()
	sw := &handlerSwitch{}
	c.srv["a"].Config.Handler = sw
	c.start("a", []string{"a", "b"}, sw)
	if st := c.nodes["a"].Stats()["b"]; st.Pending != 1 {
		t.Fatalf("after restart, pending %+v", st)
	}
	// Sequence numbers keep increasing across the restart.
	e2, err := c.nodes["a"].Emit(Drain, "b", nil)
	if err != nil || e2.Seq <= e.Seq {
		t.Fatalf("seq %d after %d (%v)", e2.Seq, e.Seq, err)
	}
	c.setCut("a", "b", false)
	c.nodes["a"].Flush(time.Second)
	if st := c.nodes["a"].Stats()["b"]; st.Pending != 0 || st.Delivered != 2 {
		t.Fatalf("after flush %+v", st)
	}
	var in Event
	c.nodes["b"].View(func(s *State) { in, _ = s.Intent("a") })
	if in.Kind != Undrain || in.Origin != "a" {
		t.Fatalf("b's intent for a: %+v", in)
	}
	applied, _, err := c.nodes["b"].Receive(Batch{From: "a", Events: []Event{e}})
	if err != nil || applied != 0 {
		t.Fatalf("receiving again applied %d (%v)", applied, err)
	}
	for _, n := range c.nodes {
		n.Close()
	}
}

// A silent node goes stale in the others' view, and they are told at once.
func TestSilentNodeGoesStale(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctxA, stopA := context.WithCancel(ctx)
	go c.nodes["a"].Run(ctxA)
	go c.nodes["b"].Run(ctx)
	go c.nodes["c"].Run(ctx)
	eventually(t, "everyone hears a", func() bool {
		return c.nodes["b"].Liveness()["a"].Heard && c.nodes["c"].Liveness()["a"].Heard
	})
	before := c.changes["b"].Load()
	stopA()
	eventually(t, "b and c see a stale", func() bool {
		return c.nodes["b"].Liveness()["a"].Stale && c.nodes["c"].Liveness()["a"].Stale
	})
	// Liveness is assessed afresh when asked, the OnChange on the
	// node's next look: wait for that look.
	eventually(t, "b's OnChange is called when a goes stale", func() bool { return c.changes["b"].Load() != before })
	for _, n := range []string{"b", "c"} {
		m := c.nodes[n].Liveness()
		if m["b"].Stale || m["c"].Stale {
			t.Fatalf("%s's view: %+v", n, m)
		}
	}
}

func TestHandlerRefusesBadBatches(t *testing.T) {
	c := newCluster(t, "a", "b")
	for _, body := range []string{`nope`, `{"from":"b","events":[{"origin":"","seq":1,"kind":"heartbeat"}]}`, `{"from":"b","extra":1}`} {
		resp, err := http.Post(c.srv["a"].URL+Path, "application/json", stringsReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", body, resp.Status)
		}
	}
	var n int
	c.nodes["a"].View(func(s *State) { n = len(s.Events()) })
	if n != 0 {
		t.Fatalf("a bad batch changed the state: %d events", n)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// A node is in contact while it hears from a majority, itself included,
// within the window on its own monotonic clock.
func TestInContact(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: "http://127.0.0.1:1"}, {Name: "c", URL: "http://127.0.0.1:1"}},
		Path: filepath.Join(dir, "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	clock := handclock.New(time.Now())
	n.now = clock.Now
	const window = 80 * time.Millisecond
	if n.InContact(window) {
		t.Fatal("in contact having heard nobody")
	}
	// A batch from someone who is not a peer is refused and does not
	// count.
	if _, _, err := n.Receive(Batch{From: "z", Events: []Event{hb("z", 1, 1)}}); !errors.Is(err, ErrAllRefused) {
		t.Fatalf("a stranger's batch: %v", err)
	}
	if n.InContact(window) {
		t.Fatal("a stranger's batch counted")
	}
	if _, _, err := n.Receive(Batch{From: "b", Events: []Event{hb("b", 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(window)
	if !n.InContact(window) {
		t.Fatal("a and b are a majority of three, b heard a window ago")
	}
	clock.Advance(time.Nanosecond)
	if n.InContact(window) {
		t.Fatal("still in contact after the window with no news")
	}
	// Even a batch with nothing new is news of the peer.
	if _, _, err := n.Receive(Batch{From: "c", Events: []Event{hb("c", 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Receive(Batch{From: "c", Events: []Event{hb("c", 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if !n.InContact(window) {
		t.Fatal("c's batch did not count")
	}
}
