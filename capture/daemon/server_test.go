package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// closedWithin reads from conn until the server closes it and returns how
// long that took, or fails after limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", limit)
	}
	return time.Since(start)
}

// TestSlowlorisDropped: a client sending its request a byte a second is
// dropped once the header timeout passes, rather than holding its
// connection for as long as it keeps dribbling.
func TestSlowlorisDropped(t *testing.T) {
	n := startNode(t, nodeSpec{limits: Limits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 60)
	stop := make(chan struct{})
	var sent atomic.Int32
	go func() {
		for i := 0; i < len(req); i++ {
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				return
			}
			sent.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	defer close(stop)
	closedWithin(t, conn, 15*time.Second)
	if s := sent.Load(); s >= int32(len(req)) {
		t.Fatalf("the whole request (%d bytes) went through before the connection closed", s)
	}
}

// TestStalledBodyDropped: a body that stops halfway is dropped once the
// read timeout passes, and its connection no longer counts.
func TestStalledBodyDropped(t *testing.T) {
	n := startNode(t, nodeSpec{maxBody: "2MiB", limits: Limits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second}})
	var conns []net.Conn
	for range 20 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/federation/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
		if _, err := conn.Write(make([]byte, 512<<10)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, c := range conns {
		closedWithin(t, c, 15*time.Second)
	}
	eventually(t, 10*time.Second, "stalled connections released", func() bool {
		open, _ := n.d.conns.counts()
		return open == 0
	})
}

// TestIdleConnectionsDoNotLockOutHealthz: 2,000 connections that never
// send a byte, far more than the cap, do not keep /healthz from
// answering, and the node never holds more than its cap.
func TestIdleConnectionsDoNotLockOutHealthz(t *testing.T) {
	const capConns, idle = 64, 2000
	// Long timeouts, so that only the cap can save the probe.
	n := startNode(t, nodeSpec{limits: Limits{MaxConns: capConns, ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: time.Minute}})
	addr := strings.TrimPrefix(n.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	eventually(t, 30*time.Second, "idle connections evicted down to the cap", func() bool {
		_, evicted := n.d.conns.counts()
		return evicted >= idle-capConns
	})
	if open, _ := n.d.conns.counts(); open > capConns {
		t.Fatalf("%d connections open, cap %d", open, capConns)
	}
	code, body := n.healthz(t)
	if code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz with %d idle connections: %d %s", idle, code, body)
	}
}

// zeros is an endless body that counts what was read from it.
type zeros struct {
	n     atomic.Int64
	limit int64
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.n.Load() >= z.limit {
		return 0, io.EOF
	}
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

// TestHugeUnauthenticatedPostNotRead: a 600 MiB POST without credentials
// is answered without the server reading it, with or without a length.
func TestHugeUnauthenticatedPostNotRead(t *testing.T) {
	n := startNode(t, nodeSpec{maxBody: "1MiB"})
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			body := &zeros{limit: 600 << 20}
			req, _ := http.NewRequest(http.MethodPost, n.url+"/v1/federation/events", body)
			if !chunked {
				req.ContentLength = body.limit
			}
			c := &http.Client{Timeout: 30 * time.Second}
			resp, err := c.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			// Whether the client saw the answer or the closed connection
			// first, what it managed to send is the cap plus what socket
			// buffers hold, nowhere near the 600 MiB.
			time.Sleep(200 * time.Millisecond)
			if sent := body.n.Load(); sent > 64<<20 {
				t.Fatalf("the client sent %d MiB before the server stopped it", sent>>20)
			}
		})
	}
}
