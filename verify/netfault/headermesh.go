package netfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderMesh puts one proxy in front of each node and tells a node's callers
// apart by an HTTP request header that names the sender, such as the
// X-Server-From header etcd's raft transport puts on every raft request.
// It serves clusters whose nodes advertise one address that all peers dial,
// which a Mesh, with its address per ordered pair, cannot partition. See the
// package documentation for what it can and cannot tell apart. A HeaderMesh
// is safe for concurrent use.
type HeaderMesh struct {
	nodes  []string
	header string
	fronts map[string]*front
	// ctx is cancelled by Close, which stops dials in flight.
	ctx    context.Context
	cancel context.CancelFunc
	delay  atomic.Int64

	mu sync.Mutex
	// senders maps a header value, lower case, to the node it names.
	senders map[string]string
	// cuts holds the current grudge's links; touched the nodes that have
	// a cut link in or out, which decides for connections whose sender is
	// unknown.
	cuts    map[[2]string]bool
	touched map[string]bool
	mode    Mode
	closed  bool

	wg sync.WaitGroup
}

// front is the proxy in front of one node.
type front struct {
	node, target string
	ln           net.Listener
	// conns are the connections accepted and not yet ended, in any state;
	// guarded by HeaderMesh.mu.
	conns map[*hconn]struct{}
	stats struct {
		accepted, forwarded, identified, unknown atomic.Uint64
		cut, blackHoled, rejected, dialFailed    atomic.Uint64
		toTarget, fromTarget                     atomic.Uint64
	}
}

// HeaderStats counts what the front of one node of a HeaderMesh has done
// since the mesh was created.
type HeaderStats struct {
	// Accepted counts connections accepted from callers.
	Accepted uint64
	// Forwarded counts connections opened to the node and forwarded.
	Forwarded uint64
	// Identified counts connections whose sender became known, once each.
	Identified uint64
	// Unknown counts connections that ended without their sender ever
	// becoming known.
	Unknown uint64
	// Cut counts connections that a cut reset, stalled, black-holed or
	// rejected, once each.
	Cut uint64
	// BlackHoled counts connections cut (Drop or Stall) before they were
	// forwarded: their bytes were read and thrown away.
	BlackHoled uint64
	// Rejected counts connections reset on their first bytes because they
	// were cut with Reject.
	Rejected uint64
	// DialFailed counts connections dropped because the node refused or
	// did not answer.
	DialFailed uint64
	// ToTarget and FromTarget count the bytes forwarded each way.
	ToTarget, FromTarget uint64
	// Open is the number of connections held now, in any state; Holes is
	// how many of them are black-holed.
	Open, Holes int
}

// connState is where a connection is in its life; guarded by
// HeaderMesh.mu.
type connState int

const (
	// stateNew: accepted, waiting for the first bytes, which decide.
	stateNew connState = iota
	// stateDialling: judged not cut, the node is being dialled.
	stateDialling
	stateForwarding
	// stateStalled: forwarded until a Stall cut; both ways now discard.
	stateStalled
	// stateHole: cut before it was forwarded; the caller's bytes are
	// discarded and the node never sees the connection.
	stateHole
	stateClosed
)

// hconn is one connection accepted by a front.
type hconn struct {
	front  *front
	client net.Conn
	// server is set once, under HeaderMesh.mu, before any pump reads it.
	server net.Conn

	// Guarded by HeaderMesh.mu.
	state connState
	// value is the latest sender header value seen, lower case; it is
	// resolved through HeaderMesh.senders whenever a decision is made, so
	// that a SetSender after the request still identifies the connection.
	value      string
	identified bool
	hit        bool

	// stalled mirrors stateStalled for the pumps, which check it on every
	// chunk without taking the mesh's lock.
	stalled atomic.Bool
	done    chan struct{}
	once    sync.Once
}

// close tears the connection down once; with reset the peers see a reset
// rather than an orderly end of stream.
func (c *hconn) close(reset bool) {
	c.once.Do(func() {
		close(c.done)
		if reset {
			abort(c.client)
		}
		_ = c.client.Close()
		if c.server != nil {
			if reset {
				abort(c.server)
			}
			_ = c.server.Close()
		}
	})
}

// pumpSize is the size of the chunks the pumps read and forward.
const pumpSize = 32 << 10

// NewHeaderMesh puts a proxy on a loopback port in front of each node of
// targets, which maps a node to the host:port it really listens on.
// header names the HTTP request header whose value identifies the sender,
// such as "X-Server-From"; SetSender says which value means which node.
func NewHeaderMesh(targets map[string]string, header string) (*HeaderMesh, error) {
	if header == "" || strings.ContainsFunc(header, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || r == ':'
	}) {
		return nil, fmt.Errorf("netfault: header mesh: invalid header name %q", header)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &HeaderMesh{
		nodes:   slices.Sorted(maps.Keys(targets)),
		header:  header,
		fronts:  map[string]*front{},
		ctx:     ctx,
		cancel:  cancel,
		senders: map[string]string{},
	}
	for _, n := range m.nodes {
		if _, _, err := net.SplitHostPort(targets[n]); err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("netfault: header mesh: node %s target %q: %w", n, targets[n], err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("netfault: header mesh: front of %s: %w", n, err)
		}
		f := &front{node: n, target: targets[n], ln: ln, conns: map[*hconn]struct{}{}}
		m.fronts[n] = f
		m.wg.Add(1)
		go m.serve(f)
	}
	return m, nil
}

// Nodes returns the mesh's nodes, sorted.
func (m *HeaderMesh) Nodes() []string { return slices.Clone(m.nodes) }

// frontOf panics when node is not in the mesh: the caller built its node
// list from something else, a bug no run should go on with.
func (m *HeaderMesh) frontOf(node string) *front {
	f, ok := m.fronts[node]
	if !ok {
		panic(fmt.Sprintf("netfault: header mesh has no node %q (nodes %v)", node, m.nodes))
	}
	return f
}

// Addr returns the address every other node dials to reach node: the
// address node must advertise to its peers. It panics when node is not in
// the mesh.
func (m *HeaderMesh) Addr(node string) string { return m.frontOf(node).ln.Addr().String() }

// SetSender records that the header value names node; values compare
// without regard to case, as etcd's hexadecimal member IDs may be written
// either way. Open connections that already carried the value are
// identified at once. It panics when node is not in the mesh or the value
// is empty, which no request can match.
func (m *HeaderMesh) SetSender(value, node string) {
	m.frontOf(node)
	v := strings.ToLower(strings.TrimSpace(value))
	if v == "" {
		panic(fmt.Sprintf("netfault: header mesh: empty sender value for %s", node))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.senders[v] = node
	for _, f := range m.fronts {
		for c := range f.conns {
			if c.value == v {
				m.settleLocked(c)
			}
		}
	}
}

// Apply cuts exactly the grudge's links with mode and heals all others:
// see the package documentation for which connections that cuts and Mode
// for what they see, with one difference: a new connection is judged on its
// first bytes rather than when accepted, since only they can name its
// sender, so Reject resets it once it has spoken. It panics, before
// cutting anything, when the grudge names a node the mesh does not have: a
// partition that silently cut less than it says would make the history
// lie.
func (m *HeaderMesh) Apply(g Grudge, mode Mode) {
	for _, n := range g.Nodes() {
		if _, ok := m.fronts[n]; !ok {
			panic(fmt.Sprintf("netfault: grudge %s names node %q, not in the header mesh %v", g, n, m.nodes))
		}
	}
	cuts, touched := map[[2]string]bool{}, map[string]bool{}
	for _, l := range g.Links() {
		cuts[l] = true
		touched[l[0]], touched[l[1]] = true, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cuts, m.touched, m.mode = cuts, touched, mode
	m.settleAllLocked()
}

// Heal lets all traffic through again. Connections that a cut stalled or
// black-holed are reset: bytes they carried were thrown away, so they can
// never carry on correctly, and the caller must dial anew.
func (m *HeaderMesh) Heal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cuts, m.touched = nil, nil
	m.settleAllLocked()
}

// SetDelay adds d of latency before each chunk forwarded, in both
// directions and on every front; zero removes it (see Proxy.SetDelay).
func (m *HeaderMesh) SetDelay(d time.Duration) { m.delay.Store(int64(d)) }

// Stats returns the counters of node's front. It panics when node is not in
// the mesh.
func (m *HeaderMesh) Stats(node string) HeaderStats {
	f := m.frontOf(node)
	m.mu.Lock()
	open, holes := len(f.conns), 0
	for c := range f.conns {
		if c.state == stateHole {
			holes++
		}
	}
	m.mu.Unlock()
	return HeaderStats{
		Accepted:   f.stats.accepted.Load(),
		Forwarded:  f.stats.forwarded.Load(),
		Identified: f.stats.identified.Load(),
		Unknown:    f.stats.unknown.Load(),
		Cut:        f.stats.cut.Load(),
		BlackHoled: f.stats.blackHoled.Load(),
		Rejected:   f.stats.rejected.Load(),
		DialFailed: f.stats.dialFailed.Load(),
		ToTarget:   f.stats.toTarget.Load(),
		FromTarget: f.stats.fromTarget.Load(),
		Open:       open,
		Holes:      holes,
	}
}

// Close stops listening, resets every connection and returns once every
// goroutine of the mesh has ended. Closing again does nothing.
func (m *HeaderMesh) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.cancel()
	var errs []error
	for _, n := range m.nodes {
		f, ok := m.fronts[n]
		if !ok {
			// NewHeaderMesh failed before building this front.
			continue
		}
		if err := f.ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("netfault: closing header mesh front of %s: %w", n, err))
		}
		for c := range f.conns {
			m.resetLocked(c)
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
	return errors.Join(errs...)
}

// cutsLocked decides whether c must be cut under the current grudge. A
// known sender is cut when the grudge cuts its link to the node either
// way, since one TCP connection carries both directions. An unknown sender
// could be any node, so it is cut as soon as any link of the node is: a
// partition must never let a cut link's traffic through.
func (m *HeaderMesh) cutsLocked(c *hconn) bool {
	to := c.front.node
	if s, ok := m.senders[c.value]; ok {
		return m.cuts[[2]string{s, to}] || m.cuts[[2]string{to, s}]
	}
	return m.touched[to]
}

// identifyLocked counts c as identified the first time its value names a
// known node.
func (m *HeaderMesh) identifyLocked(c *hconn) {
	if _, ok := m.senders[c.value]; ok && !c.identified {
		c.identified = true
		c.front.stats.identified.Add(1)
	}
}

func (m *HeaderMesh) settleAllLocked() {
	for _, f := range m.fronts {
		for c := range f.conns {
			m.settleLocked(c)
		}
	}
}

// settleLocked brings a connection in line with the current grudge and its
// sender after either changed. Connections that have not yet sent a byte
// or are being dialled are decided later, when their bytes arrive or the
// dial ends; deciding on each change keeps the pumps' per-chunk check down
// to one atomic load.
func (m *HeaderMesh) settleLocked(c *hconn) {
	m.identifyLocked(c)
	cut := m.cutsLocked(c)
	switch c.state {
	case stateForwarding:
		if !cut {
			return
		}
		m.hitLocked(c)
		if m.mode == Stall {
			c.state = stateStalled
			c.stalled.Store(true)
			return
		}
		m.resetLocked(c)
	case stateStalled:
		// Healed, or cut again with a mode that resets.
		if !cut || m.mode != Stall {
			m.resetLocked(c)
		}
	case stateHole:
		// A hole whose sender turned out not to be cut lost bytes all
		// the same: reset it, as Heal would, so the caller redials now
		// rather than waits for a timeout.
		if !cut || m.mode == Reject {
			m.resetLocked(c)
		}
	}
}

// hitLocked counts c as cut, once.
func (m *HeaderMesh) hitLocked(c *hconn) {
	if !c.hit {
		c.hit = true
		c.front.stats.cut.Add(1)
	}
}

func (m *HeaderMesh) resetLocked(c *hconn) {
	c.state = stateClosed
	c.close(true)
}

// refuseLocked handles a connection cut before it was forwarded.
func (m *HeaderMesh) refuseLocked(c *hconn) {
	m.hitLocked(c)
	if m.mode == Reject {
		c.front.stats.rejected.Add(1)
		m.resetLocked(c)
		return
	}
	c.front.stats.blackHoled.Add(1)
	c.state = stateHole
}

func (m *HeaderMesh) serve(f *front) {
	defer m.wg.Done()
	for {
		cl, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors or similar: wait for connections
			// to end rather than spin.
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		f.stats.accepted.Add(1)
		c := &hconn{front: f, client: cl, done: make(chan struct{})}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = cl.Close()
			continue
		}
		f.conns[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.handle(c)
	}
}

// handle runs a connection from its first byte to its end. Its own loop
// carries the caller's bytes: it sniffs the sender header, decides on the
// first chunk whether to dial the node at all, and forwards or discards;
// a second goroutine carries the node's bytes back once it is dialled.
func (m *HeaderMesh) handle(c *hconn) {
	defer m.wg.Done()
	var back sync.WaitGroup
	defer m.finish(c)
	defer back.Wait()

	sn := newSniffer(m.header, pumpSize)
	var server net.Conn
	admitted := false
	last := ""
	for {
		n, err := c.client.Read(sn.next())
		if n > 0 {
			chunk, v, found := sn.sniff(n)
			found = found && v != last
			if found {
				last = v
			}
			if !admitted {
				admitted = true
				if m.admit(c, v, found) {
					server = m.connect(c)
					if server != nil {
						back.Go(func() { m.pump(c, c.client, server, &c.front.stats.fromTarget) })
					}
				}
			} else if found {
				m.identify(c, v)
			}
			// Without a server the connection is a hole or already
			// reset: the chunk is discarded, and a reset ends the loop
			// at the next read.
			if server != nil && !m.pass(c, server, chunk, &c.front.stats.toTarget) {
				return
			}
		}
		if err != nil {
			if server != nil {
				c.ended(server, err)
			}
			return
		}
	}
}

// admit sets the sender of a connection's first chunk and decides whether
// to dial the node; a cut connection never reaches it.
func (m *HeaderMesh) admit(c *hconn, value string, found bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.state != stateNew {
		// Close reset it while it waited for its first bytes.
		return false
	}
	if found {
		c.value = value
	}
	m.identifyLocked(c)
	if m.cutsLocked(c) {
		m.refuseLocked(c)
		return false
	}
	c.state = stateDialling
	return true
}

// connect dials the node for an admitted connection and returns the
// connection to it, or nil when the dial failed, the mesh closed, or a cut
// came meanwhile.
func (m *HeaderMesh) connect(c *hconn) net.Conn {
	d := net.Dialer{Timeout: dialTimeout}
	s, err := d.DialContext(m.ctx, "tcp", c.front.target)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err != nil:
		c.front.stats.dialFailed.Add(1)
		m.resetLocked(c)
		return nil
	case c.state != stateDialling:
		// Close reset it.
		_ = s.Close()
		return nil
	case m.cutsLocked(c):
		// Cut while dialling: the node saw a connection that goes
		// nowhere, the caller sees what the cut prescribes.
		_ = s.Close()
		m.refuseLocked(c)
		return nil
	}
	c.server = s
	c.state = stateForwarding
	c.front.stats.forwarded.Add(1)
	return s
}

// identify records the sender a later request of c names and applies the
// decision for it before that request's bytes are forwarded.
func (m *HeaderMesh) identify(c *hconn, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.state == stateClosed {
		return
	}
	c.value = value
	m.settleLocked(c)
}

// finish forgets an ended connection.
func (m *HeaderMesh) finish(c *hconn) {
	c.close(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	c.state = stateClosed
	delete(c.front.conns, c)
	if !c.identified {
		c.front.stats.unknown.Add(1)
	}
}

// pump copies the node's bytes back to the caller until either ends or the
// connection is torn down.
func (m *HeaderMesh) pump(c *hconn, dst, src net.Conn, count *atomic.Uint64) {
	buf := make([]byte, pumpSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && !m.pass(c, dst, buf[:n], count) {
			return
		}
		if err != nil {
			c.ended(dst, err)
			return
		}
	}
}

// pass forwards one chunk unless the connection is stalled, after the
// configured delay. It reports false when the connection was torn down or
// the write failed.
func (m *HeaderMesh) pass(c *hconn, dst net.Conn, chunk []byte, count *atomic.Uint64) bool {
	if c.stalled.Load() {
		return true
	}
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	// A Stall may have come during the delay: the chunk is then lost in
	// the partition like the ones after it.
	if c.stalled.Load() {
		return true
	}
	if _, err := dst.Write(chunk); err != nil {
		c.close(true)
		return false
	}
	count.Add(uint64(len(chunk)))
	return true
}

// ended handles the end of one direction, whose source failed with err.
func (c *hconn) ended(dst net.Conn, err error) {
	switch {
	case c.stalled.Load():
		// A stalled connection passes nothing, not even the end of the
		// stream; Heal or Close tears it down.
	case errors.Is(err, io.EOF):
		// Pass the half-close on: a caller may shut down its sending
		// side and still read the reply.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
		c.close(false)
	default:
		c.close(true)
	}
}

// sniffValueMax bounds the value part of a sender header line, spaces
// included. Sender values are short (etcd's are 16 hexadecimal digits);
// the bound keeps the carried tail small.
const sniffValueMax = 128

var crlf = []byte("\r\n")

// sniffer finds sender header lines, "\r\n<name>:<value>\r\n" with the name
// in any case, in a byte stream read chunk by chunk, without buffering
// more than one line's worth of it. It reads into its own buffer, which
// keeps room before the read area for the tail of the previous chunks, so
// that a line split across reads is scanned whole without copying chunks.
type sniffer struct {
	key []byte
	// max is the longest line recognised, both CRLFs included; longer
	// lines are ignored however they arrive, so that the result does not
	// depend on how the stream was cut into chunks.
	max   int
	buf   []byte
	carry int
}

func newSniffer(header string, size int) *sniffer {
	key := []byte(strings.ToLower(header))
	limit := 2 + len(key) + 1 + sniffValueMax + 2
	return &sniffer{key: key, max: limit, buf: make([]byte, limit-1+size)}
}

// next returns the buffer to read the next chunk into.
func (s *sniffer) next() []byte { return s.buf[s.max-1:] }

// sniff scans the n bytes just read into next(), after the tail carried
// from earlier chunks. It returns the chunk and the value, lower case and
// trimmed, of the last header line completed in it, if any.
func (s *sniffer) sniff(n int) (chunk []byte, value string, found bool) {
	head := s.max - 1
	chunk = s.buf[head : head+n]
	data := s.buf[head-s.carry : head+n]
	// keep is where the next scan must start: after the last line found,
	// so that no line is reported twice.
	keep := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], crlf)
		if j < 0 {
			break
		}
		p := i + j
		v, end, st := s.line(data[p:])
		if st == lineIncomplete {
			// The data ends inside what may still become a header line;
			// no line can complete after it.
			break
		}
		if st == lineMatch {
			value, found = v, true
			keep = p + end
			i = p + end
			continue
		}
		i = p + 2
	}
	// Carry what a later chunk may complete into a line: at most max-1
	// bytes, since a longer incomplete line is ignored anyway.
	start := max(keep, len(data)-(s.max-1))
	s.carry = copy(s.buf[head-(len(data)-start):head], data[start:])
	return chunk, value, found
}

type lineStatus int

const (
	lineOther lineStatus = iota
	lineMatch
	lineIncomplete
)

// line looks at the line starting at b, which begins with CRLF. For a
// match it returns the value and the offset of the CRLF ending the line.
func (s *sniffer) line(b []byte) (string, int, lineStatus) {
	rest := b[2:]
	k := len(s.key)
	if len(rest) <= k {
		// Too short to tell: still possible only while what is there
		// spells the start of the name and its colon.
		if len(rest) < k && bytes.EqualFold(rest, s.key[:len(rest)]) ||
			len(rest) == k && bytes.EqualFold(rest, s.key) {
			return "", 0, lineIncomplete
		}
		return "", 0, lineOther
	}
	if rest[k] != ':' || !bytes.EqualFold(rest[:k], s.key) {
		return "", 0, lineOther
	}
	e := bytes.Index(rest[k+1:], crlf)
	if e < 0 {
		return "", 0, lineIncomplete
	}
	end := 2 + k + 1 + e
	if end+2 > s.max {
		return "", 0, lineOther
	}
	v := bytes.Trim(rest[k+1:k+1+e], " \t")
	if len(v) == 0 {
		return "", 0, lineOther
	}
	return strings.ToLower(string(v)), end, lineMatch
}
