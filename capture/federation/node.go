package federation

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Peer is another node of the cluster.
type Peer struct {
	Name string
	// URL is where its federation endpoint is served, without the path.
	URL string
}

// Config configures a Node.
type Config struct {
	// Node is this node's name.
	Node  string
	Peers []Peer
	// Path is the bbolt file holding the durable events and the outbox.
	Path string
	// Client sends to peers; the daemon gives one whose transport signs
	// requests. nil means http.DefaultClient.
	Client *http.Client
	// Clock stamps events; nil means time.Now.
	Clock func() time.Time
	// Heartbeat is the heartbeat interval; 0 means 500 ms.
	Heartbeat time.Duration
	// Timing says when a silent node is stale (for stale reports).
	Timing Timing
	// Logger receives delivery problems; nil discards.
	Logger *slog.Logger
	// OnChange is called, outside the node's lock, after an event changed
	// the state in a way the reconcile loop cares about (anything but a
	// heartbeat), and when a node's liveness changed.
	OnChange func()
}

// Path of the federation endpoint on every node.
const Path = "/v1/federation/events"

// Batch is what one node sends another.
type Batch struct {
	From   string  `json:"from"`
	Events []Event `json:"events"`
}

// maxBatch bounds the events in one request.
const maxBatch = 256

// seqBlock is how many sequence numbers are reserved per write: heartbeats
// need numbers several times a second, and a restart skips at most one
// block, which keeps the numbers increasing without an fsync per event.
const seqBlock = 1024

var (
	bEvents = []byte("events")
	bOutbox = []byte("outbox")
	bMeta   = []byte("meta")
)

// Node is this node's end of the federation.
type Node struct {
	cfg   Config
	db    *bolt.DB
	log   *slog.Logger
	nodes []string // this node and its peers, sorted

	mu       sync.Mutex
	state    *State
	seq      uint64 // last number used
	reserved uint64 // numbers up to this are reserved on disk
	first    int64  // time of this process's first heartbeat
	// outbox holds, per peer, the registers whose newest event it has
	// not acknowledged.
	outbox map[string]map[string]bool
	wake   map[string]chan struct{}
	// heard is signalled when a batch arrives from the peer: it is up, so
	// a delivery to it waiting out a backoff goes now.
	heard map[string]chan struct{}
	// lastBatch is when a batch from each peer last arrived, on this
	// process's monotonic clock (see InContact).
	lastBatch map[string]time.Time
	live      map[string]MemberState
	stats     map[string]*PeerStats
}

// PeerStats describe delivery to one peer.
type PeerStats struct {
	Pending       int
	Delivered     uint64
	Failures      uint64
	LastDelivered time.Time
	LastError     string
}

// Open opens (creating) the node's log and loads what it holds.
func Open(cfg Config) (*Node, error) {
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 500 * time.Millisecond
	}
	n := &Node{cfg: cfg, log: cfg.Logger, state: NewState(), outbox: map[string]map[string]bool{},
		wake: map[string]chan struct{}{}, heard: map[string]chan struct{}{}, lastBatch: map[string]time.Time{}, stats: map[string]*PeerStats{}}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.nodes = []string{cfg.Node}
	for _, p := range cfg.Peers {
		n.nodes = append(n.nodes, p.Name)
		n.outbox[p.Name] = map[string]bool{}
		n.wake[p.Name] = make(chan struct{}, 1)
		n.heard[p.Name] = make(chan struct{}, 1)
		n.stats[p.Name] = &PeerStats{}
	}
	slices.Sort(n.nodes)
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening federation log %s: %w", cfg.Path, err)
	}
	n.db = db
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bEvents, bOutbox, bMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if v := tx.Bucket(bMeta).Get([]byte("seq")); len(v) == 8 {
			n.seq = binary.BigEndian.Uint64(v)
		}
		err := tx.Bucket(bEvents).ForEach(func(k, v []byte) error {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("event %s: %w", k, err)
			}
			n.state.Apply(e)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bOutbox).ForEach(func(k, _ []byte) error {
			peer, reg, ok := strings.Cut(string(k), "\x00")
			if box, known := n.outbox[peer]; ok && known {
				box[reg] = true
			}
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("federation log %s: %w", cfg.Path, err)
	}
	// The reserved block may have been used in part: start after it.
	n.reserved = n.seq
	return n, nil
}

// Close closes the log.
func (n *Node) Close() error { return n.db.Close() }

// Nodes returns the cluster: this node and its peers, sorted.
func (n *Node) Nodes() []string { return slices.Clone(n.nodes) }

// nextSeq returns a new sequence number, reserving a block on disk when
// the current one is used up. Called with n.mu held.
func (n *Node) nextSeq() (uint64, error) {
	if n.seq == n.reserved {
		next := n.reserved + seqBlock
		err := n.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put([]byte("seq"), binary.BigEndian.AppendUint64(nil, next))
		})
		if err != nil {
			return 0, err
		}
		n.reserved = next
	}
	n.seq++
	return n.seq, nil
}

// Emit makes a new event of this node, applies it and queues it for every
// peer. fill sets the kind-specific fields.
func (n *Node) Emit(kind Kind, subject string, fill func(*Event)) (Event, error) {
	n.mu.Lock()
	seq, err := n.nextSeq()
	if err != nil {
		n.mu.Unlock()
		return Event{}, fmt.Errorf("numbering an event: %w", err)
	}
	e := Event{Origin: n.cfg.Node, Seq: seq, Lamport: n.state.Stamp(), Time: n.cfg.Clock().UnixNano(), Kind: kind, Subject: subject}
	if fill != nil {
		fill(&e)
	}
	if kind == Heartbeat && n.first == 0 {
		n.first = e.Time
	}
	_, err = n.applyLocked([]Event{e}, "")
	n.mu.Unlock()
	if err != nil {
		return Event{}, err
	}
	n.kick("")
	if kind != Heartbeat && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
	return e, nil
}

// applyLocked applies events, persists the durable ones that were new, and
// queues every new one for the peers other than from, in one transaction.
func (n *Node) applyLocked(events []Event, from string) (int, error) {
	var fresh []Event
	for _, e := range events {
		if n.state.Apply(e) {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	var durable []Event
	for _, e := range fresh {
		for peer, box := range n.outbox {
			if peer != from && peer != e.Origin {
				box[e.Register()] = true
			}
		}
		if e.Kind.Durable() {
			durable = append(durable, e)
		}
	}
	if len(durable) == 0 {
		return len(fresh), nil
	}
	err := n.db.Update(func(tx *bolt.Tx) error {
		evs, box := tx.Bucket(bEvents), tx.Bucket(bOutbox)
		for _, e := range durable {
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			reg := e.Register()
			if err := evs.Put([]byte(reg), v); err != nil {
				return err
			}
			for peer := range n.outbox {
				if peer != from && peer != e.Origin {
					if err := box.Put([]byte(peer+"\x00"+reg), nil); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("persisting %d events: %w", len(durable), err)
	}
	return len(fresh), nil
}

// Receive takes a batch from a peer (already authenticated). Events that
// are not newer than what this node holds change nothing; new ones are
// relayed to the other peers.
func (n *Node) Receive(b Batch) (int, error) {
	for i := range b.Events {
		if err := b.Events[i].Validate(); err != nil {
			return 0, err
		}
	}
	if ch, ok := n.heard[b.From]; ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	n.mu.Lock()
	applied, err := n.applyLocked(b.Events, b.From)
	if err == nil {
		if _, peer := n.outbox[b.From]; peer {
			n.lastBatch[b.From] = time.Now()
		}
	}
	changed := false
	if applied > 0 {
		for _, e := range b.Events {
			if e.Kind != Heartbeat {
				changed = true
			}
		}
	}
	n.mu.Unlock()
	if applied > 0 {
		n.kick(b.From)
	}
	if changed && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
	return applied, err
}

// InContact reports whether a majority of the cluster, this node included,
// has been heard from within window, measured on this process's monotonic
// clock: every peer sends a batch (its heartbeat at least) every heartbeat
// interval, so a node that is cut off from most of its peers, or whose
// process was stopped for longer than window, is not in contact until
// their news has reached it again. Wall time plays no part: it is not the
// cluster's clock that matters here but how long this process has gone
// without hearing from it.
func (n *Node) InContact(window time.Duration) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	heard := 1
	for _, t := range n.lastBatch {
		if time.Since(t) <= window {
			heard++
		}
	}
	return heard >= len(n.nodes)/2+1
}

// Handler serves the federation endpoint: POST a Batch, get
// {"applied":N}. Authentication is the caller's middleware.
func (n *Node) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, `{"error":"POST a batch of events"}`, http.StatusMethodNotAllowed)
			return
		}
		var b Batch
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "batch: " + err.Error()})
			return
		}
		if len(b.Events) > maxBatch {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("batch of %d events, at most %d", len(b.Events), maxBatch)})
			return
		}
		applied, err := n.Receive(b)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"applied": applied})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// kick wakes the delivery loops of every peer but one.
func (n *Node) kick(except string) {
	for peer, ch := range n.wake {
		if peer == except {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// View runs f on the state under the node's lock; f must not keep it.
func (n *Node) View(f func(*State)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n.state)
}

// Liveness assesses every node of the cluster now.
func (n *Node) Liveness() map[string]MemberState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Assess(n.state, n.nodes, n.cfg.Timing, n.first)
}

// Stats returns delivery statistics per peer.
func (n *Node) Stats() map[string]PeerStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]PeerStats{}
	for p, s := range n.stats {
		c := *s
		c.Pending = len(n.outbox[p])
		out[p] = c
	}
	return out
}

// Run sends heartbeats, watches liveness, and delivers the outbox to
// every peer until ctx ends; then it makes one last attempt to deliver.
func (n *Node) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range n.cfg.Peers {
		wg.Go(func() { n.deliverLoop(ctx, p) })
	}
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	// Liveness is looked at more often than heartbeats go out, so that a
	// silent node is noticed soon after its TTL runs out rather than at
	// this node's next heartbeat.
	look := time.NewTicker(max(n.cfg.Heartbeat/4, 10*time.Millisecond))
	defer look.Stop()
	beat := true
	for {
		if beat {
			if _, err := n.Emit(Heartbeat, "", nil); err != nil {
				n.log.Error("heartbeat", "err", err)
			}
		}
		n.checkLiveness()
		select {
		case <-ctx.Done():
			wg.Wait()
			n.Flush(2 * time.Second)
			return ctx.Err()
		case <-t.C:
			beat = true
		case <-look.C:
			beat = false
		}
	}
}

// checkLiveness calls OnChange when any node's liveness changed, so that
// the reconcile loop acts on a silent holder at once.
func (n *Node) checkLiveness() {
	n.mu.Lock()
	live := Assess(n.state, n.nodes, n.cfg.Timing, n.first)
	changed := !maps.EqualFunc(live, n.live, func(a, b MemberState) bool {
		return a.Stale == b.Stale && a.Drained == b.Drained && a.Heard == b.Heard
	})
	n.live = live
	n.mu.Unlock()
	if changed && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
}

// deliverLoop sends a peer what it has not acknowledged, with backoff on
// failure. A batch from the peer ends the backoff at once: a peer that
// restarted must hear the cluster's news (epochs above all) before it
// decides anything on its own, not up to a backoff later.
func (n *Node) deliverLoop(ctx context.Context, p Peer) {
	backoff := time.Duration(0)
	for {
		// While deliveries succeed, the peer's batches are no news.
		var heard chan struct{}
		if backoff > 0 {
			heard = n.heard[p.Name]
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wake[p.Name]:
		case <-heard:
			backoff = 0
		case <-time.After(max(backoff, n.cfg.Heartbeat)):
		}
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-n.heard[p.Name]:
				backoff = 0
			case <-time.After(backoff):
			}
		}
		if err := n.deliver(ctx, p); err != nil {
			if backoff == 0 {
				// Only a batch that arrives after this failure says the
				// peer is back.
				select {
				case <-n.heard[p.Name]:
				default:
				}
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			n.log.Debug("delivery failed", "peer", p.Name, "err", err, "backoff", backoff)
			continue
		}
		backoff = 0
	}
}

// deliver sends one batch of the peer's outbox and drops what the peer
// acknowledged, unless a newer event took its register meanwhile.
func (n *Node) deliver(ctx context.Context, p Peer) error {
	n.mu.Lock()
	regs := slices.Sorted(maps.Keys(n.outbox[p.Name]))
	if len(regs) > maxBatch {
		regs = regs[:maxBatch]
	}
	b := Batch{From: n.cfg.Node}
	for _, r := range regs {
		if e, ok := n.state.Get(r); ok {
			b.Events = append(b.Events, e)
		}
	}
	n.mu.Unlock()
	if len(b.Events) == 0 {
		return nil
	}
	body, err := json.Marshal(b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.URL, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.cfg.Client.Do(req)
	if err == nil {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %s: %s", p.Name, resp.Status, bytes.TrimSpace(msg))
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.stats[p.Name]
	if err != nil {
		st.Failures++
		st.LastError = err.Error()
		return err
	}
	st.Delivered += uint64(len(b.Events))
	st.LastDelivered = n.cfg.Clock()
	var done [][]byte
	for _, e := range b.Events {
		cur, _ := n.state.Get(e.Register())
		if cur.Origin == e.Origin && cur.Seq == e.Seq {
			delete(n.outbox[p.Name], e.Register())
			if e.Kind.Durable() {
				done = append(done, []byte(p.Name+"\x00"+e.Register()))
			}
		}
	}
	if len(done) == 0 {
		return nil
	}
	return n.db.Update(func(tx *bolt.Tx) error {
		box := tx.Bucket(bOutbox)
		for _, k := range done {
			if err := box.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Flush tries to deliver every peer's outbox once more, for up to d.
func (n *Node) Flush(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for _, p := range n.cfg.Peers {
		for i := 0; i < 4 && ctx.Err() == nil; i++ {
			if err := n.deliver(ctx, p); err != nil {
				break
			}
			n.mu.Lock()
			left := len(n.outbox[p.Name])
			n.mu.Unlock()
			if left == 0 {
				break
			}
		}
	}
}
