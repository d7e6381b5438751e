package daemon

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one client can hold of the node's API server: time
// to send a request, time to take an answer, time kept idle between
// requests, connections at once, and bytes per request. A client that is
// slower than these is dropped; a node's API answers its operators and
// peers whatever else connects to it.
type Limits struct {
	// ReadHeaderTimeout bounds the request line and headers; 0 means 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the whole request, body included; 0 means 15s.
	ReadTimeout time.Duration
	// WriteTimeout bounds the request and its answer; 0 means 30s.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection between requests; 0
	// means 30s.
	IdleTimeout time.Duration
	// MaxConns caps the open connections; 0 means 512. At the cap, a new
	// connection closes the oldest one that is not in a request (idle,
	// or connected without having sent a byte), so that idle or stalled
	// connections cannot lock a monitoring probe or an operator out.
	MaxConns int
	// MaxHeaderBytes bounds the request headers; 0 means 64 KiB.
	MaxHeaderBytes int
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeaderTimeout, 5*time.Second)
	def(&l.ReadTimeout, 15*time.Second)
	def(&l.WriteTimeout, 30*time.Second)
	def(&l.IdleTimeout, 30*time.Second)
	if l.MaxConns <= 0 {
		l.MaxConns = 512
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	return l
}

// newServer is the API server over h, with the limits in force. Every
// request body is capped at maxBody: no handler, authenticated or not,
// reads more.
func newServer(h http.Handler, l Limits, maxBody int64, cl *connLimiter, tooLarge func(*http.Request)) *http.Server {
	capped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			if tooLarge != nil {
				tooLarge(r)
			}
			// Refused before a byte of it is read; the server then closes
			// the connection rather than drain the rest.
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, "request body of %d bytes is larger than the %d bytes allowed (federation.max_body)", r.ContentLength, maxBody)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h.ServeHTTP(w, r)
	})
	return &http.Server{
		Handler:           capped,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState:         cl.state,
	}
}

// connLimiter is a listener that keeps at most max connections open,
// closing the oldest one not in a request to make room for a new one.
type connLimiter struct {
	net.Listener
	max int

	mu sync.Mutex
	// quiet lists, oldest first, the connections not in a request;
	// where finds a connection's element in it (nil while active).
	quiet *list.List
	where map[net.Conn]*list.Element
	open  int
	// evicted counts connections closed to make room.
	evicted int
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, quiet: list.New(), where: map[net.Conn]*list.Element{}}
}

// Accept makes room and hands out the next connection; it is quiet until
// the server says it is in a request.
func (c *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var victim net.Conn
		c.mu.Lock()
		if c.open >= c.max {
			if e := c.quiet.Front(); e != nil {
				victim = e.Value.(net.Conn)
				c.quiet.Remove(e)
				delete(c.where, victim)
				c.open--
				c.evicted++
			}
		}
		if c.open >= c.max {
			// Every connection is in a request: the newcomer is refused
			// rather than made to wait for one of them.
			c.mu.Unlock()
			conn.Close()
			continue
		}
		c.open++
		c.where[conn] = c.quiet.PushBack(conn)
		c.mu.Unlock()
		if victim != nil {
			victim.Close()
		}
		return conn, nil
	}
}

// state follows the server's view of each connection (http.Server's
// ConnState hook).
func (c *connLimiter) state(conn net.Conn, s http.ConnState) {
	if tc, ok := conn.(*tls.Conn); ok {
		// Under TLS the server sees the TLS connection over the one
		// Accept returned.
		conn = tc.NetConn()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, tracked := c.where[conn]
	switch s {
	case http.StateActive, http.StateHijacked:
		if tracked && e != nil {
			c.quiet.Remove(e)
			c.where[conn] = nil
		}
		if s == http.StateHijacked && tracked {
			delete(c.where, conn)
			c.open--
		}
	case http.StateIdle:
		if tracked && e == nil {
			c.where[conn] = c.quiet.PushBack(conn)
		}
	case http.StateClosed:
		if tracked {
			if e != nil {
				c.quiet.Remove(e)
			}
			delete(c.where, conn)
			c.open--
		}
	}
}

// counts returns the open connections and the evictions so far.
func (c *connLimiter) counts() (open, evicted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.evicted
}
