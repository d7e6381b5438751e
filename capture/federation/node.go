package federation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/liveness"
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
	// heartbeat), when a node's liveness changed, when a peer acknowledged
	// an epoch record (see Unreplicated), and when the node synced.
	OnChange func()
	// Keys are the capture keys of the configuration: an epoch or status
	// event naming another key is refused, and stored ones are dropped at
	// open. nil admits any well-formed key.
	Keys map[capture.Key]bool
	// MaxJump is the door's jump window (see DefaultMaxJump); 0 means the
	// default.
	MaxJump uint64
	// RequireSender makes the handler insist that a batch's From is a
	// peer and is the name the request authenticated as (auth.Node): the
	// certificate's name under mutual TLS, the signed node name under
	// HMAC. The daemon sets it; tests of the bare protocol do not.
	RequireSender bool
	// RejoinFrom names peers an operator vouches for: a node that lost
	// its state also syncs once every one of them answered its pull
	// synced, however few they are (when a majority lost its state; see
	// the README's ipfence serve).
	RejoinFrom []string
	// Signer, when set, signs this node's events and refuses every
	// event of another node that its origin did not sign (see sign.go).
	// The daemon sets it under mutual TLS.
	Signer Signer
}

// Path of the federation endpoint on every node.
const Path = "/v1/federation/events"

// RecordsPath is where a node answers a peer's pull: GET it for Records.
const RecordsPath = "/v1/federation/records"

// Records is a node's answer to a pull: everything it holds, and whether
// it is synced itself (a node that lost its state and has not caught up
// answers too, but its answer does not count towards a puller's majority).
type Records struct {
	Node        string  `json:"node"`
	Incarnation string  `json:"incarnation"`
	Synced      bool    `json:"synced"`
	Lamport     uint64  `json:"lamport"`
	Events      []Event `json:"events"`
	// Genesis is, for a node that synced at a cluster's first start, the
	// incarnation of every peer it saw new then. A peer still in that
	// incarnation has lost nothing since, so it may sync at once: without
	// this, peers that pulled before and after the first one synced would
	// each wait for the other.
	Genesis map[string]string `json:"genesis,omitempty"`
	// Certs are the certificates the events are signed under, by key id
	// (with a Signer).
	Certs map[string][]byte `json:"certs,omitempty"`
}

// maxRecords bounds the answer to a pull that a node reads.
const maxRecords = 64 << 20

// Batch is what one node sends another.
type Batch struct {
	From   string  `json:"from"`
	Events []Event `json:"events"`
	// Certs are the certificates the events are signed under, by key id
	// (with a Signer).
	Certs map[string][]byte `json:"certs,omitempty"`
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

	mu    sync.Mutex
	state *State
	// certs are the certificates learned (with a Signer), by key id:
	// passed on with the events that name them.
	certs    map[string][]byte
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
	// hbAt is when each of this node's recent heartbeats was made, by
	// seq, on the monotonic clock.
	hbAt map[uint64]time.Time
	// contact is the pure record of whom this node heard and was heard
	// by, and whose records it read since it may have missed news (see
	// InContact, Covered and Synced); fed times from the monotonic clock.
	contact *liveness.Contact
	// now reads the monotonic clock that hbAt and contact are fed from:
	// time.Now, or a test's hand-advanced clock.
	now   func() time.Time
	live  map[string]MemberState
	stats map[string]*PeerStats
	// refused counts events refused at the door, by reason; logged counts
	// the refusals logged, so that a flood does not flood the log.
	refused map[string]uint64
	// incarnation names this life of the node's log: it is made when the
	// log is created, so a wiped data dir is a new incarnation.
	incarnation string
	// synced: this incarnation has learned the cluster's records from a
	// majority of its peers (or was never without them). Until then the
	// node must act for nothing (see Synced).
	synced bool
	// pulled are the peers whose answer to this node's pull was read, and
	// whether each was synced.
	pulled map[string]bool
	// pulledInc is the incarnation each pulled peer answered with, and
	// genesis the incarnations seen at a first start (see Records).
	pulledInc map[string]string
	genesis   map[string]string
	// catchUp wakes the pull loop when the node may have missed news.
	catchUp chan struct{}
	// writeHook, when set, runs before every write to the log; an error
	// fails the write. Tests use it to make the disk fail.
	writeHook func() error
}

// PeerStats describe delivery to one peer.
type PeerStats struct {
	Pending       int
	Delivered     uint64
	Failures      uint64
	LastDelivered time.Time
	LastError     string
}

// Open opens (creating) the node's log and loads what it holds. Stored
// events that no longer fit the configuration (an origin or member that
// left, a key no pool has, a counter out of bounds) are dropped, from the
// file too, so that the state stays bounded by the configuration.
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
		wake: map[string]chan struct{}{}, heard: map[string]chan struct{}{},
		hbAt: map[uint64]time.Time{}, stats: map[string]*PeerStats{},
		refused: map[string]uint64{}, pulled: map[string]bool{}, pulledInc: map[string]string{}, certs: map[string][]byte{},
		catchUp: make(chan struct{}, 1), now: time.Now}
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
	n.contact = liveness.New(len(n.nodes), cfg.Timing.TTL+cfg.Timing.PromotionHold)
	if fi, err := os.Stat(cfg.Path); err == nil && fi.Size() == 0 {
		// bbolt would make a new log of it: a silent fresh start. An
		// empty file is a truncated one; the operator decides.
		return nil, fmt.Errorf("federation log %s is empty (truncated?); if this node's state is really lost, move the file away: the node then starts as a new incarnation and learns the cluster's records from its peers before it acts", cfg.Path)
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening federation log %s: %w", cfg.Path, err)
	}
	n.db = db
	lim := n.limits()
	dropped := 0
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bEvents, bOutbox, bMeta, bCerts} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if cfg.Signer != nil {
			// Certificates learned before, to pass on with the events
			// that name them; one that no longer chains (the CA
			// changed) is forgotten.
			// This node's own certificate is kept too: after a new one
			// is issued, its older events still name the old one.
			if err := tx.Bucket(bCerts).Put([]byte(cfg.Signer.KeyID()), cfg.Signer.Cert()); err != nil {
				return err
			}
			var bad [][]byte
			err := tx.Bucket(bCerts).ForEach(func(k, v []byte) error {
				if id, err := cfg.Signer.Learn(v); err != nil || id != string(k) {
					bad = append(bad, bytes.Clone(k))
					return nil
				}
				n.certs[string(k)] = bytes.Clone(v)
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range bad {
				if err := tx.Bucket(bCerts).Delete(k); err != nil {
					return err
				}
			}
		}
		meta := tx.Bucket(bMeta)
		if v := meta.Get([]byte("seq")); len(v) == 8 {
			n.seq = binary.BigEndian.Uint64(v)
		}
		evs := tx.Bucket(bEvents)
		var drop [][]byte
		err := evs.ForEach(func(k, v []byte) error {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("event %s: %w", k, err)
			}
			if !keep(&e, lim) || string(k) != e.Register() {
				drop = append(drop, bytes.Clone(k))
				return nil
			}
			n.state.Apply(e)
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := evs.Delete(k); err != nil {
				return err
			}
		}
		dropped = len(drop)
		box := tx.Bucket(bOutbox)
		var stale [][]byte
		err = box.ForEach(func(k, _ []byte) error {
			peer, reg, ok := strings.Cut(string(k), "\x00")
			if q, known := n.outbox[peer]; ok && known && evs.Get([]byte(reg)) != nil {
				q[reg] = true
			} else {
				stale = append(stale, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := box.Delete(k); err != nil {
				return err
			}
		}
		// A log without an incarnation is new (a first start, or a
		// wiped or replaced data dir) unless it holds events, which only
		// a log written before incarnations existed does.
		if inc := meta.Get([]byte("incarnation")); len(inc) > 0 {
			n.incarnation = string(inc)
			n.synced = string(meta.Get([]byte("synced"))) == "1"
			if g := meta.Get([]byte("genesis")); len(g) > 0 {
				if err := json.Unmarshal(g, &n.genesis); err != nil {
					return fmt.Errorf("genesis record: %w", err)
				}
			}
		} else {
			var b [16]byte
			rand.Read(b[:])
			n.incarnation = hex.EncodeToString(b[:])
			n.synced = n.seq > 0 || len(n.state.regs) > 0
			if err := meta.Put([]byte("incarnation"), []byte(n.incarnation)); err != nil {
				return err
			}
			if err := meta.Put([]byte("synced"), syncedValue(n.synced)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("federation log %s: %w", cfg.Path, err)
	}
	if dropped > 0 {
		n.log.Warn("dropped stored federation events that no longer fit the configuration", "count", dropped)
	}
	if n.seq >= MaxValue {
		db.Close()
		return nil, fmt.Errorf("federation log %s: the sequence number %d is out of bounds", cfg.Path, n.seq)
	}
	// The reserved block may have been used in part: start after it.
	n.reserved = n.seq
	if len(cfg.Peers) == 0 {
		n.synced = true // nobody to learn from, nobody to disagree with
	}
	for _, p := range cfg.RejoinFrom {
		if _, peer := n.outbox[p]; !peer {
			db.Close()
			return nil, fmt.Errorf("rejoin from %q: not a peer of %s", p, cfg.Node)
		}
	}
	return n, nil
}

func syncedValue(ok bool) []byte {
	if ok {
		return []byte("1")
	}
	return []byte("0")
}

// limits are the door's limits for this node.
func (n *Node) limits() Limits {
	return Limits{Self: n.cfg.Node, Nodes: n.nodes, Keys: n.cfg.Keys, MaxJump: n.cfg.MaxJump}
}

// update runs a write transaction on the log, through the test hook.
func (n *Node) update(fn func(*bolt.Tx) error) error {
	if n.writeHook != nil {
		if err := n.writeHook(); err != nil {
			return err
		}
	}
	return n.db.Update(fn)
}

// Close closes the log.
func (n *Node) Close() error { return n.db.Close() }

// Nodes returns the cluster: this node and its peers, sorted.
func (n *Node) Nodes() []string { return slices.Clone(n.nodes) }

// nextSeq returns a new sequence number, reserving a block on disk when
// the current one is used up. Called with n.mu held. It refuses to go past
// MaxValue: a peer keeps the newest heartbeat by seq, so a wrapped number
// would make every later heartbeat of this node look old.
func (n *Node) nextSeq() (uint64, error) {
	if n.seq >= MaxValue-1 {
		return 0, fmt.Errorf("the sequence number is at %d, the most it may reach", n.seq)
	}
	if n.seq >= n.reserved {
		next := min(n.seq+seqBlock, MaxValue-1)
		err := n.update(func(tx *bolt.Tx) error {
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

// Emit makes a new event of this node, persists it, applies it and queues
// it for every peer, in that order: when the write fails it returns the
// error and nothing changed, in memory or for the peers. fill sets the
// kind-specific fields.
func (n *Node) Emit(kind Kind, subject string, fill func(*Event)) (Event, error) {
	var f func(int, *Event)
	if fill != nil {
		f = func(_ int, e *Event) { fill(e) }
	}
	es, err := n.EmitMany(kind, []string{subject}, f)
	if err != nil {
		return Event{}, err
	}
	return es[0], nil
}

// EmitMany is Emit for one event per subject, all of one kind, numbered
// and stamped as if emitted one after the other, and persisted in one
// transaction: a pass that moves the epochs of a thousand addresses
// writes (and fsyncs) the log once, not a thousand times. When the write
// fails, none of them is applied or queued. fill(i, e) sets the
// kind-specific fields of the event for subjects[i].
func (n *Node) EmitMany(kind Kind, subjects []string, fill func(int, *Event)) ([]Event, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	n.mu.Lock()
	events := make([]Event, len(subjects))
	lamport := n.state.lamport
	for i, subject := range subjects {
		// As State.Next would for each in turn: never past MaxValue.
		if lamport >= MaxValue {
			n.mu.Unlock()
			return nil, fmt.Errorf("the Lamport clock is at %d, the most it may reach", lamport)
		}
		lamport++
		seq, err := n.nextSeq()
		if err != nil {
			n.mu.Unlock()
			return nil, fmt.Errorf("numbering an event: %w", err)
		}
		e := Event{Origin: n.cfg.Node, Seq: seq, Lamport: lamport, Time: n.cfg.Clock().UnixNano(), Kind: kind, Subject: subject}
		if fill != nil {
			fill(i, &e)
		}
		if e.Record != nil && uint64(e.Record.Epoch) >= MaxValue {
			n.mu.Unlock()
			return nil, fmt.Errorf("epoch %d of %s is out of bounds", e.Record.Epoch, subject)
		}
		if err := n.sign(&e); err != nil {
			n.mu.Unlock()
			return nil, err
		}
		events[i] = e
	}
	_, err := n.applyLocked(events, "", true)
	if err == nil && kind == Heartbeat && n.first == 0 {
		n.first = events[0].Time
	}
	if err == nil && kind == Heartbeat {
		now := n.now()
		for _, e := range events {
			n.hbAt[e.Seq] = now
		}
		// Only the newest few matter: an acknowledgement is of a batch
		// sent within a delivery timeout, so older ones are swept once
		// the map holds more than a handful.
		if len(n.hbAt) > maxHeartbeatsKept {
			for seq, at := range n.hbAt {
				if now.Sub(at) > 2*deliveryTimeout {
					delete(n.hbAt, seq)
				}
			}
		}
	}
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n.kick("")
	if kind != Heartbeat && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
	return events, nil
}

// applyLocked persists the durable events that are new, with their outbox
// entries for the peers other than from (when relay), in one transaction,
// and only then applies them to the state and queues them in memory. When
// the write fails nothing changed: persist, then act. Called with n.mu
// held; the events were checked.
func (n *Node) applyLocked(events []Event, from string, relay bool) (int, error) {
	// Which events are new, as if applied in order, without applying.
	pending := map[string]Event{}
	var fresh []Event
	for _, e := range events {
		reg := e.Register()
		if cur, ok := pending[reg]; ok {
			if !newer(&e, &cur) {
				continue
			}
		} else if !n.state.newerThanHeld(&e) {
			continue
		}
		pending[reg] = e
		fresh = append(fresh, e)
	}
	queue := func(e Event) []string {
		if !relay {
			return nil
		}
		var to []string
		for peer := range n.outbox {
			if peer != from && peer != e.Origin {
				to = append(to, peer)
			}
		}
		return to
	}
	var durable []Event
	for _, e := range pending {
		if e.Kind.Durable() {
			durable = append(durable, e)
		}
	}
	if len(durable) > 0 {
		err := n.update(func(tx *bolt.Tx) error {
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
				for _, peer := range queue(e) {
					if err := box.Put([]byte(peer+"\x00"+reg), nil); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("persisting %d events: %w", len(durable), err)
		}
	}
	for _, e := range events {
		n.state.Apply(e)
	}
	for _, e := range fresh {
		for _, peer := range queue(e) {
			n.outbox[peer][e.Register()] = true
		}
	}
	return len(fresh), nil
}

// refuse counts and logs an event refused at the door. Called with n.mu
// held.
func (n *Node) refuse(reason string, err error, from string) {
	n.refused[reason]++
	if c := n.refused[reason]; c <= 10 || c&(c-1) == 0 {
		n.log.Warn("federation event refused", "reason", reason, "from", from, "err", err, "refused", c)
	}
}

// Refused returns how many events were refused at the door, by reason
// (the Refused constants), each present even at zero.
func (n *Node) Refused() map[string]uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]uint64, len(refusalReasons))
	for _, r := range refusalReasons {
		out[r] = n.refused[r]
	}
	return out
}

// ErrAllRefused is returned by Receive when a batch held events and the
// door refused every one.
var ErrAllRefused = errors.New("every event of the batch was refused")

// Receive takes a batch from a peer (already authenticated). Every event
// goes through the door first (see State.Check): one that is refused is
// counted and logged, and never applied nor relayed. Events that are not
// newer than what this node holds change nothing; new ones are persisted,
// then applied, then relayed to the other peers. It returns how many were
// applied and how many refused; the error is a write failure (nothing of
// the batch was applied), or ErrAllRefused.
func (n *Node) Receive(b Batch) (applied, refused int, err error) {
	n.mu.Lock()
	if _, peer := n.outbox[b.From]; !peer {
		n.refuse(RefusedSender, fmt.Errorf("batch from %q, which is not a peer", b.From), b.From)
		n.mu.Unlock()
		return 0, len(b.Events), fmt.Errorf("batch from %q, which is not a peer: %w", b.From, ErrAllRefused)
	}
	if err := n.learnCerts(b.Certs, b.Events, b.From); err != nil {
		n.mu.Unlock()
		return 0, 0, err
	}
	ok := make([]Event, 0, len(b.Events))
	var firstErr error
	for i := range b.Events {
		e := &b.Events[i]
		if e.Origin == n.cfg.Node && e.Validate() == nil && !n.state.newerThanHeld(e) {
			// A peer relays the newest event of a register it owes this
			// node, which may be this node's own: old news, skipped. An
			// own event newer than this node's is refused by Check.
			continue
		}
		reason, err := n.state.Check(e, n.limits())
		if reason == "" {
			reason, err = n.verify(e)
		}
		if reason != "" {
			n.refuse(reason, err, b.From)
			refused++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		ok = append(ok, *e)
	}
	applied, err = n.applyLocked(ok, b.From, true)
	if err == nil {
		n.contact.Heard(b.From, n.now())
	}
	changed := false
	if applied > 0 {
		for _, e := range ok {
			if e.Kind != Heartbeat {
				changed = true
			}
		}
	}
	n.mu.Unlock()
	if err != nil {
		return 0, refused, err
	}
	if ch, ok := n.heard[b.From]; ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if applied > 0 {
		n.kick(b.From)
	}
	if changed && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
	if refused > 0 && refused == len(b.Events) {
		return 0, refused, fmt.Errorf("%w: %v", ErrAllRefused, firstErr)
	}
	return applied, refused, nil
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
	return n.contact.InContact(n.now(), window)
}

// maxHeartbeatsKept is how many heartbeats hbAt holds before the ones
// older than two delivery timeouts are swept.
const maxHeartbeatsKept = 64

// deliveryTimeout bounds one delivery of a batch to a peer.
const deliveryTimeout = 5 * time.Second

// ErrUncovered is Covered's error: the peers may have found this node
// stale since the time asked about.
var ErrUncovered = liveness.ErrUncovered

// Covered reports whether the peers cannot have found this node stale
// since start: a majority acknowledged heartbeats of it made within
// window of every moment from start until now. The peers judge a node by
// the heartbeats they hold of it, made before they were sent, so the
// measure starts at the making of the newest one a majority acknowledged,
// not when the ask is made: a pass that began after a heartbeat and went
// on for the window was still acting when the peers, a window after that
// heartbeat, found the node stale and moved its lines. A cover that ran
// out in between (the process stopped, or cut off, and heard again) fails
// every pass that began before it came back. The window is the time the
// peers wait before they find a silent node stale, Timing's TTL plus
// promotion hold (with neither set, every start is covered); measured on
// this process's monotonic clock.
func (n *Node) Covered(start time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.contact.Covered(start, n.now())
}

// Handler serves the federation endpoints: POST a Batch to Path and get
// {"applied":N,"refused":M}; GET RecordsPath for this node's Records.
// Authentication is the caller's middleware; with RequireSender the
// authenticated name must be a peer, and a batch's From that name.
func (n *Node) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sender := auth.Node(r.Context())
		if n.cfg.RequireSender {
			if _, peer := n.outbox[sender]; !peer {
				n.mu.Lock()
				n.refuse(RefusedSender, fmt.Errorf("request authenticated as %q, which is not a peer", sender), sender)
				n.mu.Unlock()
				writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf("%q is not a peer of %s", sender, n.cfg.Node)})
				return
			}
		}
		if r.URL.Path == RecordsPath {
			if r.Method != http.MethodGet {
				writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "GET the records"})
				return
			}
			writeJSON(w, http.StatusOK, n.records())
			return
		}
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST a batch of events"})
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
		if n.cfg.RequireSender && b.From != sender {
			n.mu.Lock()
			n.refuse(RefusedSender, fmt.Errorf("batch says it is from %q, but the request authenticated as %q", b.From, sender), sender)
			n.mu.Unlock()
			writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf("batch from %q sent by %q", b.From, sender)})
			return
		}
		applied, refused, err := n.Receive(b)
		switch {
		case errors.Is(err, ErrAllRefused):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		case err != nil:
			// A write failed: nothing was applied; the sender retries.
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, map[string]int{"applied": applied, "refused": refused})
		}
	})
}

// records is this node's answer to a pull.
func (n *Node) records() Records {
	n.mu.Lock()
	defer n.mu.Unlock()
	evs := n.state.Events()
	return Records{Node: n.cfg.Node, Incarnation: n.incarnation, Synced: n.synced, Lamport: n.state.lamport, Events: evs, Genesis: n.genesis, Certs: n.certsFor(evs)}
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
	// The first heartbeat is made before any delivery starts, so that the
	// first batch to each peer carries it ahead of a backlog (batchOrder)
	// rather than a backlog going out without it: a peer then hears this
	// node alive in its first batch, however long the backlog.
	if _, err := n.Emit(Heartbeat, "", nil); err != nil {
		n.log.Error("heartbeat", "err", err)
	}
	var wg sync.WaitGroup
	for _, p := range n.cfg.Peers {
		wg.Go(func() { n.deliverLoop(ctx, p) })
	}
	wg.Go(func() { n.syncLoop(ctx) })
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	// Liveness is looked at more often than heartbeats go out, so that a
	// silent node is noticed soon after its TTL runs out rather than at
	// this node's next heartbeat.
	look := time.NewTicker(max(n.cfg.Heartbeat/4, 10*time.Millisecond))
	defer look.Stop()
	beat := false // the first was made above
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
		sent, err := n.deliver(ctx, p)
		if err != nil {
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
		if sent > 0 && n.pending(p.Name) > 0 {
			// A backlog (a pass that moved many epochs) goes out batch
			// after batch, not one batch per heartbeat interval: the
			// sender waits for the peer's acknowledgement of every
			// record before it acts at it.
			n.kickOne(p.Name)
		}
	}
}

// pending is how many registers a peer has not acknowledged.
func (n *Node) pending(peer string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.outbox[peer])
}

// kickOne wakes the delivery loop of one peer.
func (n *Node) kickOne(peer string) {
	select {
	case n.wake[peer] <- struct{}{}:
	default:
	}
}

// batchOrder sorts a peer's outbox for sending: every register that is not
// an epoch observation first (heartbeats, intents, status), then the
// epochs, each part by name. A backlog of epoch records (a thousand
// addresses moved at once) takes several batches; the sender's heartbeat
// must not wait behind it, or its peers would find it stale while it is
// busiest.
func batchOrder(regs []string) {
	slices.SortFunc(regs, func(a, b string) int {
		ea, eb := strings.HasPrefix(a, "epoch|"), strings.HasPrefix(b, "epoch|")
		switch {
		case ea && !eb:
			return 1
		case !ea && eb:
			return -1
		}
		return strings.Compare(a, b)
	})
}

// deliver sends one batch of the peer's outbox and drops what the peer
// acknowledged, unless a newer event took its register meanwhile. It
// returns how many events the batch carried.
func (n *Node) deliver(ctx context.Context, p Peer) (int, error) {
	n.mu.Lock()
	regs := slices.Collect(maps.Keys(n.outbox[p.Name]))
	batchOrder(regs)
	if len(regs) > maxBatch {
		regs = regs[:maxBatch]
	}
	b := Batch{From: n.cfg.Node}
	for _, r := range regs {
		if e, ok := n.state.Get(r); ok {
			b.Events = append(b.Events, e)
		}
	}
	b.Certs = n.certsFor(b.Events)
	n.mu.Unlock()
	if len(b.Events) == 0 {
		return 0, nil
	}
	body, err := json.Marshal(b)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.URL, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return 0, err
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
		return 0, err
	}
	st.Delivered += uint64(len(b.Events))
	st.LastDelivered = n.cfg.Clock()
	for _, e := range b.Events {
		if e.Kind == Heartbeat && e.Origin == n.cfg.Node {
			if at, ok := n.hbAt[e.Seq]; ok && n.contact.Acked(p.Name, at, n.now()) {
				n.wakeCatchUp()
			}
		}
	}
	var done [][]byte
	epochAcked := false
	for _, e := range b.Events {
		cur, _ := n.state.Get(e.Register())
		if cur.Origin == e.Origin && cur.Seq == e.Seq {
			delete(n.outbox[p.Name], e.Register())
			if e.Kind.Durable() {
				done = append(done, []byte(p.Name+"\x00"+e.Register()))
			}
			epochAcked = epochAcked || e.Kind == Epoch
		}
	}
	if epochAcked && n.cfg.OnChange != nil {
		// An epoch record reached one more peer: a pass waiting for it
		// (see Unreplicated) may act now.
		go n.cfg.OnChange()
	}
	if len(done) == 0 {
		return len(b.Events), nil
	}
	// Forgetting an acknowledgement is harmless (the event is sent again),
	// so memory may run ahead of the file here.
	return len(b.Events), n.update(func(tx *bolt.Tx) error {
		box := tx.Bucket(bOutbox)
		for _, k := range done {
			if err := box.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReplicationQuorum is how many peers must hold an epoch record before
// this node acts at it: with this node, a majority of the cluster. A node
// that loses its state learns the line back from PullQuorum peers, and
// any two such sets meet (ReplicationQuorum + PullQuorum = the number of
// peers + 1), so the epoch of every action ever executed is learned back.
func (n *Node) ReplicationQuorum() int { return len(n.nodes) / 2 }

// PullQuorum is how many synced peers a node that lost its state must
// learn the records of before it may act (see ReplicationQuorum).
func (n *Node) PullQuorum() int { return len(n.nodes) - 1 - n.ReplicationQuorum() + 1 }

// Unreplicated returns, of the keys given with the record this node is
// about to act at, those whose epoch record in the federation is not that
// record (lower: not yet published; higher or another holder: the cluster
// moved on, or bumped at once, and this node's pass has not caught up), or
// that fewer than ReplicationQuorum peers are known to hold: a peer holds
// a register's newest event when it is not in the outbox for that peer (it
// acknowledged it, or it sent it), or when it is the event's origin. The
// outbox is persisted, so this survives restarts.
func (n *Node) Unreplicated(want map[capture.Key]capture.EpochRecord) []capture.Key {
	if revertAmnesia {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	need := n.ReplicationQuorum()
	var out []capture.Key
	for k, rec := range want {
		reg := "epoch|" + k.String()
		cur, ok := n.state.regs[reg]
		if !ok || cur.Record == nil || *cur.Record != rec {
			out = append(out, k)
			continue
		}
		if n.heldLocked(reg, cur.Origin) < need {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, capture.Key.Compare)
	return out
}

// Incarnation names this life of the node's log.
func (n *Node) Incarnation() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.incarnation
}

// Synced reports whether this node may act: it was never without its
// state, or it has since learned the records of PullQuorum synced peers
// (or of every peer, none synced: a cluster starting for the first time).
// When it may not, why says what it waits for.
func (n *Node) Synced() (ok bool, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.syncedLocked()
}

func (n *Node) syncedLocked() (bool, string) {
	if revertAmnesia {
		return true, ""
	}
	if n.synced {
		return n.contact.Ready()
	}
	var synced, unsynced []string
	for p, s := range n.pulled {
		if s {
			synced = append(synced, p)
		} else {
			unsynced = append(unsynced, p)
		}
	}
	slices.Sort(synced)
	slices.Sort(unsynced)
	return false, fmt.Sprintf("this node's state is new (incarnation %s): it acts for nothing until it has learned the cluster's epoch records from %d synced peers; learned from %d %v, peers that lost their state too: %v",
		n.incarnation, n.PullQuorum(), len(synced), synced, unsynced)
}

// wakeCatchUp wakes the pull loop: the node may have missed news.
func (n *Node) wakeCatchUp() {
	select {
	case n.catchUp <- struct{}{}:
	default:
	}
}

// MarkUnsynced makes this node unsynced, persistently: the daemon calls it
// when the node's other state (its epochs and journal) is new although the
// federation log is not.
func (n *Node) MarkUnsynced() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.synced || len(n.outbox) == 0 {
		// A node with no peers has nobody to learn from: its own
		// federation log is all there is of the cluster's records, so
		// it stays synced (a lone node that lost that log too cannot
		// tell it from a first start; see --epoch-floor).
		return nil
	}
	// A new incarnation too: what a peer saw of the old one (see
	// Records.Genesis) says nothing of this one.
	var b [16]byte
	rand.Read(b[:])
	inc := hex.EncodeToString(b[:])
	if err := n.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bMeta).Put([]byte("incarnation"), []byte(inc)); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put([]byte("synced"), syncedValue(false))
	}); err != nil {
		return err
	}
	n.synced, n.incarnation = false, inc
	clear(n.pulled)
	n.contact.Forget()
	return nil
}

// syncLoop pulls peers' records whenever this node may not act for want
// of them: until it is synced, and after every start or lapse of its cover
// until it has caught up (see Synced).
func (n *Node) syncLoop(ctx context.Context) {
	every := max(n.cfg.Heartbeat, 20*time.Millisecond)
	for {
		if ok, _ := n.Synced(); ok {
			select {
			case <-ctx.Done():
				return
			case <-n.catchUp:
			}
			continue
		}
		var wg sync.WaitGroup
		for _, p := range n.cfg.Peers {
			n.mu.Lock()
			done := n.pulled[p.Name] && (!n.synced || n.contact.HasRead(p.Name))
			n.mu.Unlock()
			if done {
				continue
			}
			wg.Go(func() {
				if err := n.pull(ctx, p); err != nil {
					n.log.Info("pulling a peer's records", "peer", p.Name, "err", err)
				}
			})
		}
		wg.Wait()
		if ok, _ := n.Synced(); ok {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// errUncheckedRecords: a peer's answer to a pull holds epoch records whose
// signature does not check, so a node that lost its state cannot learn the
// line from it.
var errUncheckedRecords = errors.New("records this node cannot check")

// pull reads one peer's records and takes them in: its events through the
// door (with a jump window no narrower than the default: the answer is a
// member's whole state, which may be far ahead of a node that lost its
// own, but not 2^32 ahead), and this node's own old
// events to learn its sequence numbers back, so that its new events are
// not taken for old ones. Then it decides whether the node is synced.
func (n *Node) pull(ctx context.Context, p Peer) error { return n.pullRecords(ctx, p, false) }

// pullRecords is pull; anyRound keeps the answer of a node that kept its
// state even when its cover lapsed while the pull was out (an operator's
// intent needs the peer's records, not a read that counts as catching up:
// contact.ReadIn still ignores an answer of an older round). Under load
// lapses come often, and refusing such answers left intents unanswered.
func (n *Node) pullRecords(ctx context.Context, p Peer, anyRound bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The answer counts only for the incarnation that asked: a node that
	// lost its state while the pull was on its way (MarkUnsynced) must
	// not count a peer it heard from before the loss.
	// Nor does it count as a read after the node may have missed news
	// again (a lapse of its cover while the pull was out): the answer may
	// have been made before the peers moved this node's lines.
	n.mu.Lock()
	asked, round := n.incarnation, n.contact.Round()
	n.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.URL, "/")+RecordsPath, nil)
	if err != nil {
		return err
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s answered %s: %s", p.Name, resp.Status, bytes.TrimSpace(msg))
	}
	var rec Records
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRecords)).Decode(&rec); err != nil {
		return fmt.Errorf("records of %s: %w", p.Name, err)
	}
	if rec.Node != p.Name {
		return fmt.Errorf("%s answered as %q", p.Name, rec.Node)
	}
	n.mu.Lock()
	if n.incarnation != asked {
		n.mu.Unlock()
		return fmt.Errorf("records of %s: asked by incarnation %s, which has since lost its state", p.Name, asked)
	}
	if n.contact.Round() != round && !(anyRound && n.synced) {
		why := n.contact.Reason()
		n.mu.Unlock()
		return fmt.Errorf("records of %s: asked before this node may have missed news (it %s); asking again", p.Name, why)
	}
	if err := n.learnCerts(rec.Certs, rec.Events, p.Name); err != nil {
		n.mu.Unlock()
		return err
	}
	// The jump window applies to an answer too, at least DefaultMaxJump
	// wide: a node that lost its state knows no counter, and real ones
	// are far below 2^32 (see DefaultMaxJump); a member's own event near
	// the bound would move this node's Lamport clock there and leave it
	// unable to stamp another event.
	lim := n.limits()
	lim.MaxJump = max(lim.MaxJump, DefaultMaxJump)
	var ok []Event
	var unchecked []string
	ownSeq := n.seq
	for i := range rec.Events {
		e := &rec.Events[i]
		if reason, err := n.verify(e); reason != "" {
			n.refuse(reason, fmt.Errorf("in %s's records: %w", p.Name, err), p.Name)
			if e.Kind == Epoch {
				unchecked = append(unchecked, e.Register())
			}
			continue
		}
		if e.Origin == n.cfg.Node {
			// Own events of an earlier incarnation: not refused, but
			// checked like any other.
			if e.Validate() != nil || !keep(e, lim) {
				n.refuse(RefusedMalformed, fmt.Errorf("own event %s in %s's records is not valid", e.ID(), p.Name), p.Name)
				continue
			}
			ownSeq = max(ownSeq, e.Seq)
			ok = append(ok, *e)
			continue
		}
		if reason, err := n.state.Check(e, lim); reason != "" {
			n.refuse(reason, err, p.Name)
			continue
		}
		ok = append(ok, *e)
	}
	if ownSeq > n.seq {
		// Reserve past what the peers saw of this node's earlier life.
		next := ownSeq + seqBlock
		if next >= MaxValue {
			n.mu.Unlock()
			return fmt.Errorf("%s holds sequence number %d of this node, too close to the bound", p.Name, ownSeq)
		}
		if err := n.update(func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put([]byte("seq"), binary.BigEndian.AppendUint64(nil, next))
		}); err != nil {
			n.mu.Unlock()
			return err
		}
		n.seq, n.reserved = ownSeq, next
	}
	if _, err := n.applyLocked(ok, p.Name, false); err != nil {
		n.mu.Unlock()
		return err
	}
	if len(unchecked) > 0 && !n.synced && !slices.Contains(n.cfg.RejoinFrom, p.Name) {
		// A node that lost its state learns the epoch line back from
		// these answers: one that lacks a record (refused above: unsigned,
		// written before mutual TLS, or under a certificate of a CA since
		// replaced) does not count, or the node would sync without it
		// and take the key's epochs again from below it. It stays
		// passive, and says why; an operator who found the line's
		// highest epoch vouches for the peer (--rejoin-from with
		// --epoch-floor).
		n.mu.Unlock()
		return fmt.Errorf("%w: %s's records hold %d epoch records whose signature does not check, first %s: its answer does not count towards syncing", errUncheckedRecords, p.Name, len(unchecked), unchecked[0])
	}
	n.pulled[p.Name], n.pulledInc[p.Name] = rec.Synced, rec.Incarnation
	if rec.Synced || !n.synced {
		// A node that is not synced yet reads every answer (the rules
		// below decide whether it may sync on them); one that kept its
		// state counts only peers that kept theirs.
		n.contact.ReadIn(p.Name, round)
	}
	became := false
	if !n.synced {
		synced, all := 0, len(n.pulled) == len(n.cfg.Peers)
		for _, s := range n.pulled {
			if s {
				synced++
			}
		}
		// A first start: every peer answered, and every one is new; or a
		// peer that saw this very incarnation new at a first start.
		first := all && synced == 0
		joined := rec.Synced && rec.Genesis[n.cfg.Node] == n.incarnation
		vouched := len(n.cfg.RejoinFrom) > 0
		for _, p := range n.cfg.RejoinFrom {
			vouched = vouched && n.pulled[p]
		}
		if synced >= n.PullQuorum() || first || joined || vouched {
			var genesis []byte
			if first {
				genesis, _ = json.Marshal(n.pulledInc)
			}
			if err := n.update(func(tx *bolt.Tx) error {
				if genesis != nil {
					if err := tx.Bucket(bMeta).Put([]byte("genesis"), genesis); err != nil {
						return err
					}
				}
				return tx.Bucket(bMeta).Put([]byte("synced"), syncedValue(true))
			}); err != nil {
				n.mu.Unlock()
				return err
			}
			if first {
				n.genesis = maps.Clone(n.pulledInc)
			} else {
				// Synced on its synced peers: the answers of peers that
				// lost their state, read on the way, are no part of a
				// majority's records (a first start has only those, and
				// nothing to miss).
				for peer, s := range n.pulled {
					if !s {
						n.contact.Unread(peer)
					}
				}
			}
			n.synced, became = true, true
			n.log.Info("synced: learned the cluster's records", "from", slices.Sorted(maps.Keys(n.pulled)), "synced_peers", synced, "first_start", first, "joined_first_start", joined, "vouched_by_operator", vouched)
		}
	}
	n.mu.Unlock()
	if became && n.cfg.OnChange != nil {
		n.cfg.OnChange()
	}
	return nil
}

// Flush tries to deliver every peer's outbox once more, for up to d.
func (n *Node) Flush(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for _, p := range n.cfg.Peers {
		for i := 0; i < 4 && ctx.Err() == nil; i++ {
			if _, err := n.deliver(ctx, p); err != nil {
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

// ErrIntentUnread is EmitIntent's error when this node could not read the
// records of a majority of the cluster before stamping the intent: its
// Lamport clock may not be past an intent another node has answered, so
// the new one could lose to it. Nothing was emitted.
var ErrIntentUnread = errors.New("could not read a majority's records before stamping the intent")

// ErrIntentUnacknowledged is EmitIntent's error when the intent was
// stamped and persisted here but fewer than ReplicationQuorum peers held
// it before the context ended. It is still delivered, and may take
// effect; an intent sent later is not yet ordered after it.
var ErrIntentUnacknowledged = errors.New("the intent is stored on this node but not yet on a majority")

// EmitIntent emits an operator's intent (a drain or an undrain of
// subject) so that it is ordered after every intent answered before it
// was asked, whichever node took that one: it first reads the records of
// ReplicationQuorum peers (with this node, a majority), which moves its
// Lamport clock past every intent a majority holds, then stamps and
// persists the event, and answers only once ReplicationQuorum peers hold
// it. Two majorities meet, so an answered intent is always among what a
// later one read. Without this, an undrain sent to a node that had not
// yet heard of a drain answered a moment before on another node was
// stamped below it and lost: the operator saw 200 and the node stayed
// drained (seen in CI: TestClusterWipedNodeLearnsBeforeActing).
func (n *Node) EmitIntent(ctx context.Context, kind Kind, subject string) (Event, error) {
	// A node that lost its state holds none of the intents it answered
	// before: it reads as many synced peers as a node learning the line
	// back must (PullQuorum), which meet every majority without it.
	if !slices.Contains(n.nodes, subject) {
		// Peers would refuse it (the door's subject rule): it could
		// never reach a majority.
		return Event{}, fmt.Errorf("%s for %q, which is not a node of the cluster", kind, subject)
	}
	need := n.ReplicationQuorum()
	n.mu.Lock()
	kept := n.synced
	n.mu.Unlock()
	if !kept {
		need = n.PullQuorum()
	}
	if err := n.readQuorum(ctx, need); err != nil {
		return Event{}, err
	}
	e, err := n.Emit(kind, subject, nil)
	if err != nil {
		return Event{}, err
	}
	reg := e.Register()
	for {
		n.mu.Lock()
		held := n.heldLocked(reg, e.Origin)
		n.mu.Unlock()
		if held >= n.ReplicationQuorum() {
			return e, nil
		}
		select {
		case <-ctx.Done():
			return e, fmt.Errorf("%w: %d of %d peers needed hold it (%v)", ErrIntentUnacknowledged, held, n.ReplicationQuorum(), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// readQuorum pulls the records of every peer until need of them that kept
// their state (synced) answered, or ctx ends: a peer that lost its state
// may have lost intents it acknowledged. Each peer is asked again after a
// failed pull (its answer may have been made before this node's cover
// lapsed, or it may be syncing), and the read ends as soon as need answers
// are in: a stopped peer, whose pull hangs until its timeout, must not
// hold up an intent a majority can take.
func (n *Node) readQuorum(ctx context.Context, need int) error {
	if need == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var last error
	answered := make(chan bool, len(n.cfg.Peers))
	for _, p := range n.cfg.Peers {
		go func() {
			for {
				err := n.readPeer(ctx, p)
				if err == nil {
					answered <- true
					return
				}
				mu.Lock()
				last = err
				mu.Unlock()
				select {
				case <-ctx.Done():
					answered <- false
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	read := 0
	for range n.cfg.Peers {
		if <-answered {
			if read++; read >= need {
				return nil
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return fmt.Errorf("%w: %d of the %d synced peers needed answered; last: %v", ErrIntentUnread, read, need, last)
}

// readPeer pulls p's records and says whether p kept its state.
func (n *Node) readPeer(ctx context.Context, p Peer) error {
	if err := n.pullRecords(ctx, p, true); err != nil {
		return err
	}
	n.mu.Lock()
	synced := n.pulled[p.Name]
	n.mu.Unlock()
	if !synced {
		return fmt.Errorf("%s lost its state and has not learned the cluster's records back", p.Name)
	}
	return nil
}

// heldLocked counts the peers known to hold the newest event of register
// reg, made by origin: those whose outbox no longer names it (they
// acknowledged it, or sent a newer one), and its origin, which wrote it
// before sending it. This node's outbox may still name the register for
// the origin (this node's own event of the same record, not yet
// acknowledged, which the peer's replaced): counting only the outbox
// refused an acquire whose record two nodes had published at once, and
// the row then waited a retry delay with the address on no NIC.
func (n *Node) heldLocked(reg, origin string) int {
	held := 0
	for peer, box := range n.outbox {
		if !box[reg] || peer == origin {
			held++
		}
	}
	return held
}
