package netfault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const hmHeader = "X-Server-From"

// cutTimeout is the client timeout of requests that may be black-holed: a
// timeout is what a Drop cut shows.
const cutTimeout = 250 * time.Millisecond

// startHMNodes starts one real HTTP server per node. Every path answers
// the node's name, except /stream, which writes "<node> <i>" lines every
// 20ms until the request ends, as a raft stream keeps its response open.
func startHMNodes(t *testing.T, nodes ...string) map[string]string {
	t.Helper()
	targets := map[string]string{}
	for _, name := range nodes {
		mux := http.NewServeMux()
		mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "%s %d\n", name, i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
				}
			}
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name)
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		targets[name] = srv.Listener.Addr().String()
	}
	return targets
}

// newHM starts the nodes and a header mesh in front of them; the mesh
// closes before the servers, so that their handlers see the end of their
// connections.
func newHM(t *testing.T, nodes ...string) *HeaderMesh {
	t.Helper()
	m, err := NewHeaderMesh(startHMNodes(t, nodes...), hmHeader)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// setSenders registers "<node>1" as every node's header value.
func setSenders(m *HeaderMesh) {
	for _, n := range m.Nodes() {
		m.SetSender(n+"1", n)
	}
}

// hmClient is the HTTP client one node uses for its peers: a transport of
// its own that pools connections, as etcd's peer transports do.
type hmClient struct {
	dials   atomic.Int64
	tr      *http.Transport
	hc      *http.Client
	timeout time.Duration
}

// passTimeout bounds a request that must pass: far above what a loaded
// machine takes to answer on loopback, so that only a cut (a black hole)
// makes it time out.
const passTimeout = 10 * time.Second

func newHMClient(t *testing.T, timeout time.Duration) *hmClient {
	c := &hmClient{}
	c.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(c.tr.CloseIdleConnections)
	c.hc = &http.Client{Transport: c.tr}
	c.timeout = timeout
	return c
}

// get requests path from addr, with the sender header set to value unless
// it is empty, and returns the body; the request times out after timeout.
func (c *hmClient) get(addr, path, value string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	if value != "" {
		req.Header.Set(hmHeader, value)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// try is get reduced to "ok" (with the expected body), "timeout" or
// "reset" (any other failure). expect is the outcome the caller wants: a
// request expected to pass gets passTimeout, so that a loaded machine's
// slow answer is not taken for a black hole; one expected to be cut gets
// the client's short timeout (a cut only ever shows later, never sooner).
func (c *hmClient) try(t *testing.T, addr, path, value, want, expect string) string {
	t.Helper()
	timeout := c.timeout
	if expect == "ok" {
		timeout = passTimeout
	}
	body, err := c.get(addr, path, value, timeout)
	switch {
	case err == nil && body == want:
		return "ok"
	case err == nil:
		t.Fatalf("GET %s%s reached %q, want %q", addr, path, body, want)
	case isTimeout(err):
		return "timeout"
	}
	return "reset"
}

func mustGet(t *testing.T, c *hmClient, addr, path, value, want string) {
	t.Helper()
	if body, err := c.get(addr, path, value, passTimeout); err != nil || body != want {
		t.Fatalf("GET %s%s as %q = %q, %v; want %q", addr, path, value, body, err, want)
	}
}

// rawConn speaks HTTP/1.1 by hand, to control how a request is cut into
// writes and which connection carries it.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c := dial(t, addr)
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func rawRequest(value string) string {
	req := "GET /who HTTP/1.1\r\nHost: node\r\n"
	if value != "" {
		req += hmHeader + ": " + value + "\r\n"
	}
	return req + "\r\n"
}

// send writes the parts of one request and reads the response body.
func (c *rawConn) send(parts ...string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	for _, p := range parts {
		if _, err := io.WriteString(c, p); err != nil {
			return "", err
		}
	}
	return c.read()
}

func (c *rawConn) read() (string, error) {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// lineStream is a streaming GET read line by line.
type lineStream struct {
	lines chan string
	// err is how the stream ended; read it once lines is closed.
	err error
}

func openStream(t *testing.T, c *hmClient, addr, value string) *lineStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(hmHeader, value)
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream from %s as %s: %v", addr, value, err)
	}
	s := &lineStream{lines: make(chan string, 1000)}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(s.lines)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		s.err = sc.Err()
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// recv waits for n more lines.
func (s *lineStream) recv(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(2 * time.Second)
	for i := range n {
		select {
		case _, ok := <-s.lines:
			if !ok {
				t.Fatalf("stream ended after %d of %d lines: %v", i, n, s.err)
			}
		case <-timeout:
			t.Fatalf("%d of %d lines in 2s", i, n)
		}
	}
}

// quiet lets lines already under way arrive, then asserts that none comes
// and the stream does not end for a while.
func (s *lineStream) quiet(t *testing.T) {
	t.Helper()
	settle := time.After(60 * time.Millisecond)
	for drained := false; !drained; {
		select {
		case _, ok := <-s.lines:
			if !ok {
				t.Fatalf("stream ended: %v", s.err)
			}
		case <-settle:
			drained = true
		}
	}
	select {
	case l, ok := <-s.lines:
		t.Fatalf("stalled stream got line %q (open %v)", l, ok)
	case <-time.After(200 * time.Millisecond):
	}
}

// broken asserts that the stream ends with an error, not a clean end,
// within a second.
func (s *lineStream) broken(t *testing.T) {
	t.Helper()
	timeout := time.After(time.Second)
	for {
		select {
		case _, ok := <-s.lines:
			if !ok {
				if s.err == nil {
					t.Fatal("stream ended cleanly; want an error")
				}
				return
			}
		case <-timeout:
			t.Fatal("stream still open 1s after the cut")
		}
	}
}

func TestHeaderMeshForwards(t *testing.T) {
	m := newHM(t, "c", "a", "b")
	if got := strings.Join(m.Nodes(), ","); got != "a,b,c" {
		t.Errorf("Nodes = %s", got)
	}
	addrs := map[string]bool{}
	for _, n := range m.Nodes() {
		if !strings.HasPrefix(m.Addr(n), "127.0.0.1:") {
			t.Errorf("Addr(%s) = %s, not loopback", n, m.Addr(n))
		}
		addrs[m.Addr(n)] = true
	}
	if len(addrs) != 3 {
		t.Errorf("%d distinct addresses for 3 nodes", len(addrs))
	}

	// Values compare without regard to case.
	m.SetSender("A1", "a")
	ca := newHMClient(t, 2*time.Second)
	for range 3 {
		mustGet(t, ca, m.Addr("b"), "/raft", "a1", "b")
	}
	if ca.dials.Load() != 1 {
		t.Fatalf("%d dials for 3 requests: keep-alive is off", ca.dials.Load())
	}
	s := m.Stats("b")
	if s.ToTarget == 0 || s.FromTarget == 0 {
		t.Errorf("no bytes counted: %+v", s)
	}
	s.ToTarget, s.FromTarget = 0, 0
	if want := (HeaderStats{Accepted: 1, Forwarded: 1, Identified: 1, Open: 1}); s != want {
		t.Errorf("Stats(b) = %+v, want %+v", s, want)
	}

	anon := newHMClient(t, 2*time.Second)
	mustGet(t, anon, m.Addr("b"), "/version", "", "b")
	ca.tr.CloseIdleConnections()
	anon.tr.CloseIdleConnections()
	eventually(t, "b's connections ended", func() bool { return m.Stats("b").Open == 0 })
	s = m.Stats("b")
	s.ToTarget, s.FromTarget = 0, 0
	if want := (HeaderStats{Accepted: 2, Forwarded: 2, Identified: 1, Unknown: 1}); s != want {
		t.Errorf("Stats(b) = %+v, want %+v", s, want)
	}
	if s := m.Stats("a"); s != (HeaderStats{}) {
		t.Errorf("Stats(a) = %+v, want nothing", s)
	}
}

func TestHeaderMeshIsolate(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		want string
	}{{Drop, "timeout"}, {Reject, "reset"}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			m := newHM(t, "a", "b", "c")
			setSenders(m)
			ca, cc := newHMClient(t, cutTimeout), newHMClient(t, cutTimeout)
			mustGet(t, ca, m.Addr("b"), "/raft", "a1", "b")
			mustGet(t, cc, m.Addr("a"), "/raft", "c1", "a")
			mustGet(t, cc, m.Addr("b"), "/raft", "c1", "b")

			m.Apply(Isolate(m.Nodes(), "a"), tc.mode)
			// a's pooled connection to b and c's to a are reset at once;
			// c's to b lives on.
			eventually(t, "cut connections reset", func() bool {
				return m.Stats("a").Open == 0 && m.Stats("b").Open == 1
			})
			if got := ca.try(t, m.Addr("b"), "/raft", "a1", "b", tc.want); got != tc.want {
				t.Errorf("a -> b: %s, want %s", got, tc.want)
			}
			if got := cc.try(t, m.Addr("b"), "/raft", "c1", "b", "ok"); got != "ok" {
				t.Errorf("c -> b: %s, want ok", got)
			}
			if n := cc.dials.Load(); n != 2 {
				t.Errorf("c dialled %d times; its pooled connection to b should have lived", n)
			}
			if got := cc.try(t, m.Addr("a"), "/raft", "c1", "a", tc.want); got != tc.want {
				t.Errorf("c -> a: %s, want %s", got, tc.want)
			}

			// On a and b: one pooled connection reset, one new one cut.
			var holes, rejected uint64 = 1, 0
			if tc.mode == Reject {
				holes, rejected = 0, 1
			}
			pooled := map[string]uint64{"a": 1, "b": 2}
			for _, n := range []string{"a", "b"} {
				s := m.Stats(n)
				// The new connection was cut on its first bytes, before
				// the node was dialled: only the pooled ones reached it.
				if s.Cut != 2 || s.BlackHoled != holes || s.Rejected != rejected || s.Forwarded != pooled[n] {
					t.Errorf("Stats(%s) = %+v; want Cut 2, BlackHoled %d, Rejected %d, Forwarded %d", n, s, holes, rejected, pooled[n])
				}
			}
			if s := m.Stats("c"); s.Cut != 0 || s.Accepted != 0 {
				t.Errorf("Stats(c) = %+v; nobody called c", s)
			}
		})
	}
}

// TestHeaderMeshDirected: a connection carries both directions, so a
// directed cut a -/-> b also cuts b's connections to a.
func TestHeaderMeshDirected(t *testing.T) {
	m := newHM(t, "a", "b", "c")
	setSenders(m)
	m.Apply(Grudge{"a": {"b"}}, Drop)
	ca, cb, cc := newHMClient(t, cutTimeout), newHMClient(t, cutTimeout), newHMClient(t, cutTimeout)
	for _, tc := range []struct {
		c        *hmClient
		from, to string
		want     string
	}{
		{ca, "a", "b", "timeout"},
		{cb, "b", "a", "timeout"},
		{cc, "c", "a", "ok"},
		{cc, "c", "b", "ok"},
		{ca, "a", "c", "ok"},
	} {
		if got := tc.c.try(t, m.Addr(tc.to), "/raft", tc.from+"1", tc.to, tc.want); got != tc.want {
			t.Errorf("%s -> %s: %s, want %s", tc.from, tc.to, got, tc.want)
		}
	}
	if s := m.Stats("c"); s.Cut != 0 {
		t.Errorf("Stats(c).Cut = %d, c has no cut link", s.Cut)
	}
}

// TestHeaderMeshPooledConnection follows one keep-alive connection whose
// first request (a probe) names no sender and whose second does, as
// etcd's probers and raft requests share a transport.
func TestHeaderMeshPooledConnection(t *testing.T) {
	m := newHM(t, "a", "b", "c")
	m.SetSender("a1", "a")
	cc := newHMClient(t, cutTimeout)
	mustGet(t, cc, m.Addr("b"), "/raft/probing", "", "b")
	if s := m.Stats("b"); s.Accepted != 1 || s.Identified != 0 {
		t.Fatalf("after the probe Stats(b) = %+v; want 1 accepted, 0 identified", s)
	}
	mustGet(t, cc, m.Addr("b"), "/raft", "c1", "b")
	if s := m.Stats("b"); s.Accepted != 1 || s.Identified != 0 || cc.dials.Load() != 1 {
		t.Fatalf("c1 not known yet: Stats(b) = %+v, %d dials; want 1 accepted, 0 identified, 1 dial", s, cc.dials.Load())
	}
	// Learning the value identifies the open connection that carried it.
	m.SetSender("c1", "c")
	if s := m.Stats("b"); s.Identified != 1 {
		t.Fatalf("after SetSender(c1) Stats(b) = %+v; want 1 identified", s)
	}

	ca := newHMClient(t, cutTimeout)
	mustGet(t, ca, m.Addr("b"), "/raft", "a1", "b")
	raw := dialRaw(t, m.Addr("b"))
	if body, err := raw.send(rawRequest("a1")); err != nil || body != "b" {
		t.Fatalf("raw GET as a1 = %q, %v", body, err)
	}
	if s := m.Stats("b"); s.Accepted != 3 || s.Identified != 3 {
		t.Fatalf("Stats(b) = %+v; want 3 accepted, 3 identified", s)
	}

	m.Apply(Isolate(m.Nodes(), "c"), Drop)
	eventually(t, "c's connection to b reset", func() bool { return m.Stats("b").Open == 2 })
	if s := m.Stats("b"); s.Cut != 1 {
		t.Errorf("Stats(b).Cut = %d, want 1", s.Cut)
	}
	mustGet(t, ca, m.Addr("b"), "/raft", "a1", "b")
	if n := ca.dials.Load(); n != 1 {
		t.Errorf("a dialled %d times; its connection, identified as a, should have lived", n)
	}
	if got := cc.try(t, m.Addr("b"), "/raft", "c1", "b", "timeout"); got != "timeout" {
		t.Errorf("c -> b: %s, want timeout", got)
	}
	if s := m.Stats("b"); s.Cut != 2 || s.BlackHoled != 1 || cc.dials.Load() != 2 {
		t.Errorf("Stats(b) = %+v, %d dials by c; want Cut 2, BlackHoled 1, 2 dials", s, cc.dials.Load())
	}

	// The latest request names the sender: a connection identified as a
	// that now speaks for c is cut before c's request passes.
	if body, err := raw.send(rawRequest("a1")); err != nil || body != "b" {
		t.Fatalf("raw GET as a1 under the cut = %q, %v", body, err)
	}
	if body, err := raw.send(rawRequest("c1")); err == nil || isTimeout(err) {
		t.Fatalf("raw GET as c1 on a's connection = %q, %v; want a reset", body, err)
	}
	if s := m.Stats("b"); s.Cut != 3 {
		t.Errorf("Stats(b).Cut = %d, want 3", s.Cut)
	}
}

// TestHeaderMeshUnknownSender: connections that name no known sender are
// cut when any link of their node is, and only then.
func TestHeaderMeshUnknownSender(t *testing.T) {
	m := newHM(t, "a", "b", "c")
	setSenders(m)
	anonB, anonC := newHMClient(t, cutTimeout), newHMClient(t, cutTimeout)
	mustGet(t, anonB, m.Addr("b"), "/version", "", "b")
	mustGet(t, anonC, m.Addr("c"), "/version", "", "c")

	m.Apply(Grudge{"a": {"b"}, "b": {"a"}}, Drop)
	eventually(t, "the unknown connection to b reset", func() bool { return m.Stats("b").Open == 0 })
	if got := anonB.try(t, m.Addr("b"), "/version", "", "b", "timeout"); got != "timeout" {
		t.Errorf("unknown -> b: %s, want timeout", got)
	}
	if got := anonC.try(t, m.Addr("c"), "/version", "", "c", "ok"); got != "ok" {
		t.Errorf("unknown -> c: %s, want ok", got)
	}
	if n := anonC.dials.Load(); n != 1 {
		t.Errorf("%d dials to c; its pooled connection should have lived", n)
	}
	// A value nobody registered is as good as none.
	other := newHMClient(t, cutTimeout)
	if got := other.try(t, m.Addr("b"), "/version", "zz", "b", "timeout"); got != "timeout" {
		t.Errorf("zz -> b: %s, want timeout", got)
	}
	// A caller that names itself gets through: raft traffic between
	// connected members is never cut.
	cc := newHMClient(t, cutTimeout)
	if got := cc.try(t, m.Addr("b"), "/raft", "c1", "b", "ok"); got != "ok" {
		t.Errorf("c -> b: %s, want ok", got)
	}
	if s := m.Stats("b"); s.Cut != 3 || s.BlackHoled != 2 || s.Identified != 1 {
		t.Errorf("Stats(b) = %+v; want Cut 3, BlackHoled 2, Identified 1", s)
	}
	if s := m.Stats("c"); s.Cut != 0 || s.Identified != 0 {
		t.Errorf("Stats(c) = %+v; want nothing cut or identified", s)
	}
}

func TestHeaderMeshStream(t *testing.T) {
	t.Run("stall", func(t *testing.T) {
		m := newHM(t, "a", "b", "c")
		setSenders(m)
		cc, ca := newHMClient(t, 0), newHMClient(t, 0)
		sc := openStream(t, cc, m.Addr("b"), "c1")
		sa := openStream(t, ca, m.Addr("b"), "a1")
		sc.recv(t, 3)
		sa.recv(t, 3)

		m.Apply(Isolate(m.Nodes(), "c"), Stall)
		sc.quiet(t)
		sa.recv(t, 3)
		if s := m.Stats("b"); s.Cut != 1 || s.Open != 2 {
			t.Errorf("Stats(b) = %+v; want Cut 1 and both streams held", s)
		}

		m.Heal()
		sc.broken(t)
		sa.recv(t, 2)
		openStream(t, cc, m.Addr("b"), "c1").recv(t, 2)
	})
	t.Run("drop", func(t *testing.T) {
		m := newHM(t, "a", "b", "c")
		setSenders(m)
		sc := openStream(t, newHMClient(t, 0), m.Addr("b"), "c1")
		sc.recv(t, 2)
		m.Apply(Isolate(m.Nodes(), "c"), Drop)
		sc.broken(t)
		if s := m.Stats("b"); s.Cut != 1 {
			t.Errorf("Stats(b).Cut = %d, want 1", s.Cut)
		}
	})
}

func TestHeaderMeshHealAndClose(t *testing.T) {
	targets := startHMNodes(t, "a", "b", "c")
	before := runtime.NumGoroutine()
	func() {
		m, err := NewHeaderMesh(targets, hmHeader)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = m.Close() }()
		setSenders(m)
		ca := newHMClient(t, cutTimeout)
		defer ca.tr.CloseIdleConnections()
		m.Apply(Isolate(m.Nodes(), "a"), Drop)
		if got := ca.try(t, m.Addr("b"), "/raft", "a1", "b", "timeout"); got != "timeout" {
			t.Fatalf("a -> b under the cut: %s, want timeout", got)
		}
		m.Heal()
		mustGet(t, ca, m.Addr("b"), "/raft", "a1", "b")

		// A stalled stream, a black hole and a chunk held in a long
		// delay: Close must end them all.
		cs := newHMClient(t, 0)
		defer cs.tr.CloseIdleConnections()
		stream := openStream(t, cs, m.Addr("c"), "a1")
		stream.recv(t, 2)
		m.Apply(Isolate(m.Nodes(), "a"), Stall)
		hole := dial(t, m.Addr("b"))
		if _, err := io.WriteString(hole, rawRequest("a1")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a hole at b", func() bool { return m.Stats("b").Holes == 1 })
		m.SetDelay(time.Hour)
		delayed := dial(t, m.Addr("c"))
		if _, err := io.WriteString(delayed, rawRequest("b1")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the delayed request forwarded", func() bool { return m.Stats("c").Forwarded == 2 })

		done := make(chan error, 1)
		go func() { done <- m.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Close still running after 2s")
		}
		if err := m.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		for _, n := range m.Nodes() {
			if s := m.Stats(n); s.Open != 0 {
				t.Errorf("after Close Stats(%s) = %+v", n, s)
			}
		}
		stream.broken(t)
		mustBreak(t, hole)
		mustBreak(t, delayed)
		if c, err := net.DialTimeout("tcp", m.Addr("b"), time.Second); err == nil {
			_ = c.Close()
			t.Error("a closed mesh accepted a connection")
		}
	}()
	eventually(t, "goroutines back to the count before", func() bool { return runtime.NumGoroutine() <= before })
}

// TestHeaderMeshSplitHeader cuts the header line into two writes at
// places a TCP segment may end, and checks that the connection is
// identified once the line is whole, not before.
func TestHeaderMeshSplitHeader(t *testing.T) {
	m := newHM(t, "a", "b", "c")
	m.SetSender("c1", "c")
	prefix := "GET /who HTTP/1.1\r\nHost: b"
	line := "\r\nX-Server-From: C1\r\n"
	req := prefix + line + "\r\n"
	var sent uint64
	var last *rawConn
	for i, at := range []int{1, 5, 15, 16, 18, len(line) - 1} {
		c := dialRaw(t, m.Addr("b"))
		split := len(prefix) + at
		if _, err := io.WriteString(c, req[:split]); err != nil {
			t.Fatal(err)
		}
		sent += uint64(split)
		// The first part was forwarded alone, so the second one arrives
		// in another read.
		eventually(t, "the first part forwarded", func() bool { return m.Stats("b").ToTarget == sent })
		if n := m.Stats("b").Identified; n != uint64(i) {
			t.Fatalf("split at %q|%q: identified %d before the line was whole, want %d", req[:split], req[split:], n, i)
		}
		if body, err := c.send(req[split:]); err != nil || body != "b" {
			t.Fatalf("split at %d: %q, %v", at, body, err)
		}
		sent += uint64(len(req) - split)
		if n := m.Stats("b").Identified; n != uint64(i+1) {
			t.Fatalf("split at %q|%q: identified %d, want %d", req[:split], req[split:], n, i+1)
		}
		last = c
	}
	// The count follows the write to the node, which may answer first.
	eventually(t, fmt.Sprintf("ToTarget = the %d bytes sent", sent), func() bool { return m.Stats("b").ToTarget == sent })

	// The grudge touches b but not c's link to it: the identified
	// connection keeps working, with requests that no longer name their
	// sender, while an anonymous one is rejected.
	m.Apply(Grudge{"a": {"b"}, "b": {"a"}}, Reject)
	if body, err := last.send(rawRequest("")); err != nil || body != "b" {
		t.Fatalf("identified connection under the cut: %q, %v", body, err)
	}
	anon := dialRaw(t, m.Addr("b"))
	if body, err := anon.send(rawRequest("")); err == nil || isTimeout(err) {
		t.Fatalf("anonymous connection under the cut: %q, %v; want a reset", body, err)
	}
	if s := m.Stats("b"); s.Rejected != 1 || s.Cut != 1 {
		t.Errorf("Stats(b) = %+v; want Rejected 1, Cut 1", s)
	}
}

// TestHeaderMeshConcurrent drives every link while grudges come and go;
// the race detector and the final checks do the asserting.
func TestHeaderMeshConcurrent(t *testing.T) {
	m := newHM(t, "a", "b", "c")
	setSenders(m)
	var wg sync.WaitGroup
	clients := map[string]*hmClient{}
	for _, from := range m.Nodes() {
		clients[from] = newHMClient(t, cutTimeout)
	}
	for _, from := range m.Nodes() {
		for _, to := range m.Nodes() {
			if from == to {
				continue
			}
			wg.Go(func() {
				for range 10 {
					_, _ = clients[from].get(m.Addr(to), "/raft", from+"1", cutTimeout)
				}
			})
		}
	}
	for i := range 20 {
		if i%2 == 0 {
			m.Apply(RandomHalves(m.Nodes(), uint64(i)), Mode(i/2%3))
		} else {
			m.Heal()
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.Heal()
	wg.Wait()
	for _, from := range m.Nodes() {
		for _, to := range m.Nodes() {
			if from != to {
				mustGet(t, clients[from], m.Addr(to), "/raft", from+"1", to)
			}
		}
		clients[from].tr.CloseIdleConnections()
	}
	for _, n := range m.Nodes() {
		eventually(t, "connections to "+n+" ended", func() bool { return m.Stats(n).Open == 0 })
		if s := m.Stats(n); s.Identified+s.Unknown != s.Accepted || s.Accepted < 2 {
			t.Errorf("Stats(%s) = %+v; every ended connection is identified or unknown", n, s)
		}
	}
}

// sniffWhole is the sniffer's rule stated on a whole stream: the last
// line "\r\n<key>:<value>\r\n", key in any case, no longer than limit,
// with a value that is not blank once trimmed.
func sniffWhole(data []byte, key string, limit int) (string, bool) {
	value, found := "", false
	for p := 0; p+1 < len(data); p++ {
		if data[p] != '\r' || data[p+1] != '\n' {
			continue
		}
		rest := data[p+2:]
		if len(rest) <= len(key) || rest[len(key)] != ':' || !strings.EqualFold(string(rest[:len(key)]), key) {
			continue
		}
		e := bytes.Index(rest[len(key)+1:], []byte("\r\n"))
		if e < 0 || 2+len(key)+1+e+2 > limit {
			continue
		}
		if v := strings.Trim(string(rest[len(key)+1:len(key)+1+e]), " \t"); v != "" {
			value, found = strings.ToLower(v), true
		}
	}
	return value, found
}

// sniffChunks feeds data to a sniffer in chunks of the sizes given, in
// turn, and returns the last value it reported.
func sniffChunks(t *testing.T, data []byte, sizes []int) (string, bool) {
	s := newSniffer(hmHeader, 256)
	value, found := "", false
	for i := 0; len(data) > 0; i++ {
		n := min(max(sizes[i%len(sizes)], 1), len(data), 256)
		copy(s.next(), data[:n])
		chunk, v, ok := s.sniff(n)
		if !bytes.Equal(chunk, data[:n]) {
			t.Fatalf("sniff returned chunk %q, read %q", chunk, data[:n])
		}
		if ok {
			value, found = v, true
		}
		data = data[n:]
	}
	return value, found
}

var sniffCases = []struct {
	name, data string
	want       string
}{
	{"etcd", "GET /raft/stream/message/8e9e05c52164694d HTTP/1.1\r\nHost: n1\r\nUser-Agent: Go-http-client/1.1\r\nX-Server-From: 8E9E05C52164694D\r\nX-Server-Version: 3.5.0\r\n\r\n", "8e9e05c52164694d"},
	{"lower case key", "POST /raft HTTP/1.1\r\nx-server-from:a1\r\n\r\n", "a1"},
	{"spaces around", "GET / HTTP/1.1\r\nX-Server-From: \t a1 \t\r\n\r\n", "a1"},
	{"none", "GET /raft/probing HTTP/1.1\r\nHost: n1\r\n\r\n", ""},
	{"blank", "GET / HTTP/1.1\r\nX-Server-From:  \r\n\r\n", ""},
	{"longer name", "GET / HTTP/1.1\r\nX-Server-Fromage: a1\r\n\r\n", ""},
	{"name inside another", "GET / HTTP/1.1\r\nXX-Server-From: a1\r\n\r\n", ""},
	{"not a line start", "X-Server-From: a1\r\n\r\n", ""},
	{"unfinished", "GET / HTTP/1.1\r\nX-Server-From: a1", ""},
	{"latest wins", "GET / HTTP/1.1\r\nX-Server-From: a1\r\n\r\nGET / HTTP/1.1\r\nX-Server-From: b1\r\n\r\n", "b1"},
	{"back to back", "GET / HTTP/1.1\r\nX-Server-From: a1\r\nX-Server-From: b1\r\n\r\n", "b1"},
	{"too long ignored", "GET / HTTP/1.1\r\nX-Server-From: a1\r\n\r\nGET / HTTP/1.1\r\nX-Server-From: " + strings.Repeat("f", 200) + "\r\n\r\n", "a1"},
	{"in a body", "POST / HTTP/1.1\r\nContent-Length: 22\r\n\r\n\r\nX-Server-From: b1\r\n", "b1"},
}

func TestSniffer(t *testing.T) {
	for _, tc := range sniffCases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			if v, _ := sniffWhole(data, hmHeader, newSniffer(hmHeader, 1).max); v != tc.want {
				t.Fatalf("reference = %q, want %q", v, tc.want)
			}
			for size := 1; size <= len(data); size++ {
				if v, found := sniffChunks(t, data, []int{size}); v != tc.want || found != (tc.want != "") {
					t.Fatalf("chunks of %d: %q, %v; want %q", size, v, found, tc.want)
				}
			}
		})
	}
}

// FuzzSniffer checks that the sniffer finds what the rule says however
// the stream is cut into reads.
func FuzzSniffer(f *testing.F) {
	for _, tc := range sniffCases {
		f.Add([]byte(tc.data), []byte{1, 7, 3})
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		sizes := []int{len(data)}
		if len(cuts) > 0 {
			sizes = sizes[:0]
			for _, c := range cuts {
				sizes = append(sizes, int(c))
			}
		}
		limit := newSniffer(hmHeader, 1).max
		wv, wf := sniffWhole(data, hmHeader, limit)
		if v, found := sniffChunks(t, data, sizes); v != wv || found != wf {
			t.Fatalf("chunks %v: %q, %v; the rule gives %q, %v", sizes, v, found, wv, wf)
		}
	})
}
