package netfault

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
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

// echoServer sends a greeting, if it has one, on every connection it
// accepts and then echoes what it reads; it passes a half-close back.
type echoServer struct {
	ln       net.Listener
	greeting string
	accepted atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startEcho(t *testing.T, greeting string) *echoServer {
	t.Helper()
	return startEchoAt(t, "127.0.0.1:0", greeting)
}

func startEchoAt(t *testing.T, addr, greeting string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, greeting: greeting, conns: map[net.Conn]struct{}{}}
	e.wg.Go(e.serve)
	t.Cleanup(e.close)
	return e
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

func (e *echoServer) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.accepted.Add(1)
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Go(func() {
			_, _ = io.WriteString(c, e.greeting)
			_, _ = io.Copy(c, c)
			_ = c.(*net.TCPConn).CloseWrite()
			// Wait for the peer's close so the half-close is seen.
			_, _ = io.Copy(io.Discard, c)
			e.mu.Lock()
			delete(e.conns, c)
			e.mu.Unlock()
			_ = c.Close()
		})
	}
}

// open returns the number of connections the server holds now.
func (e *echoServer) open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

func (e *echoServer) close() {
	_ = e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		_ = c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads as many bytes back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	n, err := io.ReadFull(c, buf)
	return string(buf[:n]), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// mustWork asserts that msg makes it to the echo server and back.
func mustWork(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, 2*time.Second)
	if err != nil || got != msg {
		t.Fatalf("round trip of %q = %q, %v", msg, got, err)
	}
}

// mustTimeOut asserts that nothing comes back within a short deadline.
func mustTimeOut(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, 300*time.Millisecond)
	if !isTimeout(err) {
		t.Fatalf("round trip of %q = %q, %v; want a timeout", msg, got, err)
	}
}

// mustBreak asserts that the connection ends (EOF or reset) rather than
// hangs: a read with a generous deadline fails with something else than a
// timeout.
func mustBreak(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 16))
	if err == nil || isTimeout(err) {
		t.Fatalf("read = %d, %v; want EOF or reset", n, err)
	}
}

// mustRefuse asserts that a new connection to addr is reset at once: the
// reset comes at connect, if it beats the client to the connection's
// state, or at the first read.
func mustRefuse(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		if isTimeout(err) {
			t.Fatalf("dial %s: %v; want a reset", addr, err)
		}
		return
	}
	defer func() { _ = c.Close() }()
	mustBreak(t, c)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProxyForwardsBothWays(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	if p.Target() != e.addr() || p.Addr() == e.addr() || !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("proxy %s -> %s, echo at %s", p.Addr(), p.Target(), e.addr())
	}
	c := dial(t, p.Addr())
	mustWork(t, c, "hello")

	// A megabyte each way, written while read, arrives intact.
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(big); errc <- err }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	back := make([]byte, len(big))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, big) {
		t.Fatal("the megabyte came back changed")
	}

	// A half-close passes both ways: the client shuts its sending side,
	// the echo server answers with its own, the client reads to EOF.
	if _, err := io.WriteString(c, "bye"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after half-close read %q, %v; want \"bye\" then EOF", rest, err)
	}

	total := uint64(len("hello") + len(big) + len("bye"))
	eventually(t, "all bytes counted", func() bool {
		s := p.Stats()
		return s.ToTarget == total && s.FromTarget == total
	})
	s := p.Stats()
	if s.Accepted != 1 || s.Forwarded != 1 || s.BlackHoled != 0 || s.Rejected != 0 || s.Cut != 0 {
		t.Errorf("stats %+v", s)
	}
	if e.accepted.Load() != 1 {
		t.Errorf("echo accepted %d connections, want 1", e.accepted.Load())
	}
}

func TestProxyDrop(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	open := dial(t, p.Addr())
	mustWork(t, open, "before")

	p.Cut(Drop)
	mustBreak(t, open)
	// A new connection is accepted (the kernel completes the handshake)
	// but never answered, and never reaches the target.
	hole := dial(t, p.Addr())
	mustTimeOut(t, hole, "into the void")
	eventually(t, "the hole is counted", func() bool { return p.Stats().BlackHoled == 1 })
	eventually(t, "the cut link is gone", func() bool { return p.Stats().Open == 0 })
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("target saw %d connections, want 1", n)
	}
	s := p.Stats()
	if s.Accepted != 2 || s.Forwarded != 1 || s.Cut != 1 || s.Holes != 1 || s.Rejected != 0 {
		t.Errorf("stats during the cut %+v", s)
	}
	if s.ToTarget != uint64(len("before")) {
		t.Errorf("%d bytes reached the target, want %d: the black hole forwarded some", s.ToTarget, len("before"))
	}

	p.Heal()
	// The black-holed connection lost its bytes: Heal resets it.
	mustBreak(t, hole)
	after := dial(t, p.Addr())
	mustWork(t, after, "after")
	if n := e.accepted.Load(); n != 2 {
		t.Errorf("target saw %d connections after the heal, want 2", n)
	}
	eventually(t, "the hole is closed", func() bool { return p.Stats().Holes == 0 })
}

func TestProxyReject(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	open := dial(t, p.Addr())
	mustWork(t, open, "before")

	p.Cut(Reject)
	mustBreak(t, open)
	mustRefuse(t, p.Addr())
	eventually(t, "the rejection is counted", func() bool { return p.Stats().Rejected == 1 })
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("target saw %d connections, want 1", n)
	}
	if s := p.Stats(); s.BlackHoled != 0 || s.Holes != 0 || s.Cut != 1 {
		t.Errorf("stats during the cut %+v", s)
	}

	p.Heal()
	mustWork(t, dial(t, p.Addr()), "after")
}

func TestProxyStall(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	open := dial(t, p.Addr())
	mustWork(t, open, "before")

	p.Cut(Stall)
	// The open connection stays open at both ends but carries nothing.
	mustTimeOut(t, open, "stuck")
	if s := p.Stats(); s.Open != 1 || s.Cut != 1 {
		t.Errorf("stats during the stall %+v", s)
	}
	if n := e.open(); n != 1 {
		t.Errorf("target holds %d connections during the stall, want 1", n)
	}
	hole := dial(t, p.Addr())
	mustTimeOut(t, hole, "new")
	if n := e.accepted.Load(); n != 1 {
		t.Errorf("target saw %d connections, want 1", n)
	}
	if s := p.Stats(); s.ToTarget != uint64(len("before")) {
		t.Errorf("%d bytes reached the target, want %d", s.ToTarget, len("before"))
	}

	p.Heal()
	mustBreak(t, open)
	mustBreak(t, hole)
	mustWork(t, dial(t, p.Addr()), "after")
}

func TestProxyStallThenDrop(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	open := dial(t, p.Addr())
	mustWork(t, open, "before")
	p.Cut(Stall)
	mustTimeOut(t, open, "stuck")
	// Switching the mode of a cut link applies the new mode to what is
	// open; the connection is still counted once.
	p.Cut(Drop)
	mustBreak(t, open)
	if s := p.Stats(); s.Cut != 1 {
		t.Errorf("Cut = %d, want 1", s.Cut)
	}
}

func TestProxyDelay(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	c := dial(t, p.Addr())
	p.SetDelay(150 * time.Millisecond)
	start := time.Now()
	mustWork(t, c, "slow")
	// One chunk each way, each held back 150ms.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("round trip took %v with 150ms added each way", d)
	}
	p.SetDelay(0)
	mustWork(t, c, "fast")
}

func TestProxyTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, target)
	mustRefuse(t, p.Addr())
	eventually(t, "the failed dial is counted", func() bool { return p.Stats().DialFailed == 1 })
	if s := p.Stats(); s.Forwarded != 0 || s.Accepted != 1 {
		t.Errorf("stats %+v", s)
	}
	if _, err := NewProxy("no port"); err == nil {
		t.Error("NewProxy accepted a target without a port")
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Drop, Reject, Stall} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if Drop.String() != "drop" || Mode(7).String() != "mode(7)" {
		t.Errorf("names %q %q", Drop, Mode(7))
	}
	if _, err := ParseMode("cut"); err == nil {
		t.Error("ParseMode(\"cut\") succeeded")
	}
}

// TestProxyConcurrent runs many clients while the link is cut and healed
// in every mode; under -race it checks the proxy's locking, and every
// answer that comes back must be the right one.
func TestProxyConcurrent(t *testing.T) {
	e := startEcho(t, "")
	p := newProxy(t, e.addr())
	stop := make(chan struct{})
	var answered atomic.Int64
	var clients sync.WaitGroup
	for i := range 16 {
		clients.Go(func() {
			msg := strings.Repeat(string(rune('a'+i)), 100+i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
				if err != nil {
					continue
				}
				got, err := roundTrip(c, msg, 50*time.Millisecond)
				if err == nil {
					if got != msg {
						t.Errorf("sent %q, got %q", msg, got)
					}
					answered.Add(1)
				}
				_ = c.Close()
			}
		})
	}
	for i := range 150 {
		p.Cut(Mode(i % 3))
		if i%10 == 0 {
			p.SetDelay(time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
		_ = p.Stats()
		p.Heal()
		p.SetDelay(0)
		time.Sleep(3 * time.Millisecond)
	}
	close(stop)
	clients.Wait()
	if answered.Load() == 0 {
		t.Fatal("no round trip succeeded while healed")
	}
	mustWork(t, dial(t, p.Addr()), "still works")
	// Every accepted connection ended up in exactly one bin.
	eventually(t, "every connection accounted for", func() bool {
		s := p.Stats()
		return s.Accepted == s.Forwarded+s.BlackHoled+s.Rejected+s.DialFailed
	})
	s := p.Stats()
	if s.BlackHoled == 0 || s.Rejected == 0 || s.Cut == 0 {
		t.Errorf("the cuts did not hit any connection: %+v", s)
	}
}

func TestProxyCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		e := startEcho(t, "")
		defer e.close()
		p, err := NewProxy(e.addr())
		if err != nil {
			t.Fatal(err)
		}
		idle := dial(t, p.Addr())
		mustWork(t, idle, "idle")
		// A chunk held in a long delay, a stalled link, a black hole:
		// Close must end them all.
		p.SetDelay(time.Hour)
		delayed := dial(t, p.Addr())
		if _, err := io.WriteString(delayed, "later"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "two links", func() bool { return p.Stats().Open == 2 })
		p.Cut(Stall)
		hole := dial(t, p.Addr())
		if _, err := io.WriteString(hole, "lost"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "two links and a hole", func() bool {
			s := p.Stats()
			return s.Open == 2 && s.Holes == 1
		})
		t.Logf("%+v", p.Stats())
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if s := p.Stats(); s.Open != 0 || s.Holes != 0 {
			t.Errorf("after Close %+v", s)
		}
		for _, c := range []net.Conn{idle, delayed, hole} {
			mustBreak(t, c)
			_ = c.Close()
		}
		if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
			t.Error("a closed proxy accepted a connection")
		}
	}()
	eventually(t, "goroutines back to the count before", func() bool { return runtime.NumGoroutine() <= before })
}

// TestProxyHTTPKeepAlive drives an HTTP/1.1 client with keep-alive through
// a proxy: a cut must not leave the client on its pooled connection.
func TestProxyHTTPKeepAlive(t *testing.T) {
	var serverConns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pong")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			serverConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newProxy(t, srv.Listener.Addr().String())

	var dials atomic.Int64
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 500 * time.Millisecond}
	url := "http://" + p.Addr() + "/"
	get := func() (string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for range 3 {
		if body, err := get(); err != nil || body != "pong" {
			t.Fatalf("GET = %q, %v", body, err)
		}
	}
	if dials.Load() != 1 || serverConns.Load() != 1 {
		t.Fatalf("%d dials, %d server connections for 3 requests: keep-alive is off", dials.Load(), serverConns.Load())
	}

	p.Cut(Drop)
	start := time.Now()
	_, err := get()
	if !isTimeout(err) {
		t.Fatalf("GET during the cut: %v; want the client's timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("GET during the cut took %v, client timeout 500ms", d)
	}
	if n := serverConns.Load(); n != 1 {
		t.Errorf("server saw %d connections during the cut, want 1", n)
	}

	p.Heal()
	if body, err := get(); err != nil || body != "pong" {
		t.Fatalf("GET after heal = %q, %v", body, err)
	}
	// The pooled connection was reset by the cut and the black-holed one
	// given up on: the client dialled a third time.
	if dials.Load() != 3 || serverConns.Load() != 2 {
		t.Errorf("%d dials, %d server connections; want 3 and 2", dials.Load(), serverConns.Load())
	}
}

// A proxy on the caller's listener forwards, cuts and heals from there,
// and closing the proxy closes that listener; a bad target closes it at
// once.
func TestProxyOn(t *testing.T) {
	e := startEcho(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxyOn(ln, e.addr())
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr() != ln.Addr().String() {
		t.Fatalf("proxy at %s, listener at %s", p.Addr(), ln.Addr())
	}
	mustWork(t, dial(t, p.Addr()), "hello")
	p.Cut(Reject)
	mustRefuse(t, p.Addr())
	p.Heal()
	mustWork(t, dial(t, p.Addr()), "again")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatalf("the listener at %s still accepts after Close", ln.Addr())
	}

	bad, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewProxyOn(bad, "no-port"); err == nil || !strings.Contains(err.Error(), `proxy target "no-port"`) {
		t.Fatalf("NewProxyOn to no-port: %v", err)
	}
	if c, err := net.DialTimeout("tcp", bad.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("a refused listener still accepts")
	}
}
