package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what a cut link does to connections.
type Mode int

const (
	// Drop resets the link's open connections, so that keep-alive
	// connections cannot outlive the cut, and black-holes new ones: they
	// are accepted, their bytes read and discarded, nothing is forwarded and
	// nothing answers, so callers time out as in a partition.
	Drop Mode = iota
	// Reject resets the link's open connections and every new one at once,
	// as a firewall that rejects does. The kernel completes the handshake
	// before the proxy sees a connection, so a client sees a reset right
	// after connecting rather than a refused connect; closing the listener
	// would refuse for real but could lose the port to another program.
	Reject
	// Stall black-holes the open connections as well as the new ones: both
	// directions stop, bytes already sent are lost, no FIN or reset passes.
	// It is the nearest a proxy gets to a packet-level partition.
	Stall
)

var modeNames = [...]string{"drop", "reject", "stall"}

// String returns the mode's name as ParseMode reads it.
func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode reads a mode name: "drop", "reject" or "stall".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("netfault: unknown mode %q (want drop, reject or stall)", s)
}

// dialTimeout bounds the proxy's own connect to its target. The target is
// local, so a connect that takes this long means the target is wedged.
const dialTimeout = 10 * time.Second

// Proxy forwards the TCP connections it accepts on a loopback port to one
// target and can cut, heal and slow that link. A Proxy is safe for
// concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	// ctx is cancelled by Close, which stops dials in flight.
	ctx    context.Context
	cancel context.CancelFunc
	delay  atomic.Int64

	mu     sync.Mutex
	cut    bool
	mode   Mode
	closed bool
	links  map[*link]struct{}
	holes  map[net.Conn]struct{}

	wg    sync.WaitGroup
	stats struct {
		accepted, forwarded, blackHoled, rejected, cut, dialFailed atomic.Uint64
		toTarget, fromTarget                                       atomic.Uint64
	}
}

// Stats counts what a proxy has done since it was created.
type Stats struct {
	// Accepted counts connections accepted from clients.
	Accepted uint64
	// Forwarded counts connections opened to the target and forwarded.
	Forwarded uint64
	// BlackHoled counts connections accepted while cut (Drop or Stall) and
	// never forwarded.
	BlackHoled uint64
	// Rejected counts connections reset at once because the link was cut
	// with Reject.
	Rejected uint64
	// Cut counts forwarded connections that a cut closed or stalled.
	Cut uint64
	// DialFailed counts connections dropped because the target refused or
	// did not answer.
	DialFailed uint64
	// ToTarget and FromTarget count the bytes forwarded each way.
	ToTarget, FromTarget uint64
	// Open and Holes are the connections being forwarded and being
	// black-holed now.
	Open, Holes int
}

// link is one forwarded connection: the client's side and the target's.
type link struct {
	client, server net.Conn
	// stalled is set by a Stall cut: both pumps discard what they read.
	stalled atomic.Bool
	// hit is set by the first cut that touches the link, so Stats.Cut
	// counts connections, not cuts.
	hit  atomic.Bool
	done chan struct{}
	once sync.Once
}

// close tears the link down once; with reset the peers see a reset rather
// than an orderly end of stream.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		close(l.done)
		if reset {
			abort(l.client)
			abort(l.server)
		}
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// abort makes the coming Close send a reset: a cut is not the peer's orderly
// shutdown, and a client must not mistake it for one.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// NewProxy listens on a free loopback port and forwards every connection it
// accepts to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("netfault: proxy target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netfault: proxy to %s: %w", target, err)
	}
	return NewProxyOn(ln, target)
}

// NewProxyOn forwards every connection ln accepts to target (host:port),
// as NewProxy does, on a listener the caller opened: one in another
// network namespace, say, so that clients there reach a target in this
// one through a link the proxy can cut. The proxy owns ln: Close closes
// it.
func NewProxyOn(ln net.Listener, target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("netfault: proxy target %q: %w", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		links:  map[*link]struct{}{},
		holes:  map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the host:port that clients dial to reach the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut cuts the link: see Mode for what open and new connections see. Cutting
// a cut link again switches it to the new mode.
func (p *Proxy) Cut(mode Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.cut, p.mode = true, mode
	for l := range p.links {
		if !l.hit.Swap(true) {
			p.stats.cut.Add(1)
		}
		if mode == Stall {
			l.stalled.Store(true)
		} else {
			l.close(true)
		}
	}
	if mode == Reject {
		for c := range p.holes {
			abort(c)
			_ = c.Close()
		}
	}
}

// Heal lets new connections through again. Connections that the cut stalled
// or black-holed are reset: bytes they carried were thrown away, so they
// can never carry on correctly, and a client must dial anew.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for l := range p.links {
		if l.stalled.Load() {
			l.close(true)
		}
	}
	for c := range p.holes {
		abort(c)
		_ = c.Close()
	}
}

// SetDelay adds d of latency before each chunk the proxy forwards, in both
// directions; zero removes it. Chunks of one direction stay in order, so a
// delay also slows a bulk transfer.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	open, holes := len(p.links), len(p.holes)
	p.mu.Unlock()
	return Stats{
		Accepted:   p.stats.accepted.Load(),
		Forwarded:  p.stats.forwarded.Load(),
		BlackHoled: p.stats.blackHoled.Load(),
		Rejected:   p.stats.rejected.Load(),
		Cut:        p.stats.cut.Load(),
		DialFailed: p.stats.dialFailed.Load(),
		ToTarget:   p.stats.toTarget.Load(),
		FromTarget: p.stats.fromTarget.Load(),
		Open:       open,
		Holes:      holes,
	}
}

// Close stops listening, resets every connection and returns once every
// goroutine of the proxy has ended. Closing again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	p.cancel()
	for l := range p.links {
		l.close(true)
	}
	for c := range p.holes {
		abort(c)
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("netfault: closing proxy to %s: %w", p.target, err)
	}
	return nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors or similar: wait for connections
			// to end rather than spin.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.stats.accepted.Add(1)
		p.mu.Lock()
		switch {
		case p.closed:
			_ = c.Close()
		case p.cut:
			p.refuseLocked(c)
		default:
			p.wg.Add(1)
			go p.forward(c)
		}
		p.mu.Unlock()
	}
}

// refuseLocked handles a connection that arrives while the link is cut.
func (p *Proxy) refuseLocked(c net.Conn) {
	if p.mode == Reject {
		p.stats.rejected.Add(1)
		abort(c)
		_ = c.Close()
		return
	}
	p.stats.blackHoled.Add(1)
	p.holes[c] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Reading keeps the client's writes from blocking on a full
		// window, as they would not in a partition; they just vanish.
		_, _ = io.Copy(io.Discard, c)
		p.mu.Lock()
		delete(p.holes, c)
		p.mu.Unlock()
		_ = c.Close()
	}()
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	s, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		p.stats.dialFailed.Add(1)
		abort(c)
		_ = c.Close()
		return
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		_ = s.Close()
		_ = c.Close()
		return
	case p.cut:
		// Cut while dialling: the target saw a connection that goes
		// nowhere, the client sees what the cut prescribes.
		_ = s.Close()
		p.refuseLocked(c)
		p.mu.Unlock()
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.links[l] = struct{}{}
	p.stats.forwarded.Add(1)
	p.mu.Unlock()

	var up sync.WaitGroup
	up.Go(func() { p.pump(l, s, c, &p.stats.toTarget) })
	p.pump(l, c, s, &p.stats.fromTarget)
	up.Wait()
	l.close(false)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pump copies src to dst until src ends, the link is torn down, or a write
// fails.
func (p *Proxy) pump(l *link, dst, src net.Conn, count *atomic.Uint64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.stalled.Load() {
			if !p.wait(l) {
				return
			}
			// A Stall may have come during the delay: the chunk is
			// then lost in the partition like the ones after it.
			if !l.stalled.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					l.close(true)
					return
				}
				count.Add(uint64(n))
			}
		}
		if err == nil {
			continue
		}
		switch {
		case l.stalled.Load():
			// A stalled link passes nothing, not even the end of the
			// stream; Heal or Close tears it down.
		case errors.Is(err, io.EOF):
			// Pass the half-close on: a client may shut down its
			// sending side and still read the reply.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			l.close(false)
		default:
			l.close(true)
		}
		return
	}
}

// wait sleeps for the configured delay; it reports false when the link was
// torn down meanwhile.
func (p *Proxy) wait(l *link) bool {
	d := time.Duration(p.delay.Load())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}
