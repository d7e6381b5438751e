package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/etcdline"
)

// The etcd epoch line (config: etcd, and epoch_line: etcd on a pool). For
// the keys of such pools the line is etcd's, not the federation's: the
// records the pass plans from are read from etcd, a bump is a
// compare-and-swap there under this node's session lease, and the node
// acts at a record only while etcd holds exactly that record and its
// session is live, read again at every ask of the executor's readiness.
// The federation still carries heartbeats and intents.
//
// A node cut off from etcd acquires nothing: its readiness cannot confirm
// any record. What it does with what it holds differs by provider: in the
// cloud it keeps it (a new holder's reassignment takes the address in one
// call, and a node that cannot reach etcd cannot tell whether one was
// made); on premises it releases (fail-closed: two hosts answering ARP is
// the one outcome the provider cannot undo), as a node that is not VRRP
// master does.

// etcdLine is a node's end of the etcd line.
type etcdLine struct {
	c   *etcdline.Client
	ttl time.Duration
	// read bounds a read of the line: half the contact window, since a
	// pass must act within that window of its start (errPassTooLong) and
	// a read that waits longer on an unreachable etcd would fail every
	// pass, wherever its records come from.
	read time.Duration

	mu   sync.Mutex
	sess *etcdline.Session
	// last is the newest snapshot read, for planning and for the
	// revisions bumps start from.
	last etcdline.Snapshot
	// confirmed are the records confirmEtcd last found etcd holding
	// exactly, by key: their revisions are the tokens the calls made
	// right after carry (lineRevision).
	confirmed map[capture.Key]etcdline.Record
}

// errNoSession: the node holds no live etcd session.
var errNoSession = errors.New("no live session in etcd (cut off from etcd, or etcd lost the lease)")

// newEtcdLine builds the client of the etcd section, or nil when no pool
// is on the etcd line.
func newEtcdLine(d *Daemon) (*etcdLine, error) {
	e := d.cfg.Etcd
	if e == nil || len(d.cfg.EtcdPools) == 0 {
		return nil, nil
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	if e.TLS != nil {
		tc, err := auth.ClientTLS(e.TLS.CertFile, e.TLS.KeyFile, e.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd tls: %w", err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		hc.Transport = tr
	}
	read := max((d.cfg.Timing.HeartbeatTTL+d.cfg.Timing.PromotionHold)/2, 100*time.Millisecond)
	return &etcdLine{c: &etcdline.Client{Endpoints: e.Endpoints, Prefix: e.Prefix, Node: d.cfg.Name, HTTP: hc}, ttl: e.SessionTTL, read: read}, nil
}

// onEtcd says whether k's pool is on the etcd line.
func (d *Daemon) onEtcd(k capture.Key) bool { return d.line != nil && d.cfg.EtcdPools[k.Pool] }

// session is the live session, or nil.
func (l *etcdLine) session(now time.Time) *etcdline.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess.Live(now) {
		return l.sess
	}
	return nil
}

// keepSession opens the node's session and renews it every third of its
// TTL until ctx ends, then revokes it. A renewal that fails leaves the
// session to run out by its own expiry (measured from the last renewal
// sent); a lease etcd no longer knows is replaced by a new one.
func (d *Daemon) keepSession(ctx context.Context) {
	l := d.line
	every := max(l.ttl/3, 100*time.Millisecond)
	for {
		l.mu.Lock()
		s := l.sess
		l.mu.Unlock()
		callCtx, cancel := context.WithTimeout(ctx, every)
		sent := time.Now()
		if s == nil || !s.Live(sent) {
			ns, err := l.c.Open(callCtx, l.ttl, sent)
			if err != nil {
				d.log.Warn("etcd session not opened", "err", err)
			} else {
				l.mu.Lock()
				l.sess = ns
				l.mu.Unlock()
				d.log.Info("etcd session opened", "lease", ns.Lease, "ttl", ns.TTL)
				d.wake.Publish(struct{}{})
			}
		} else if err := l.c.KeepAlive(callCtx, s, sent); err != nil {
			d.log.Warn("etcd session not renewed", "lease", s.Lease, "err", err)
			if errors.Is(err, etcdline.ErrConflict) {
				l.mu.Lock()
				l.sess = nil
				l.mu.Unlock()
				d.wake.Publish(struct{}{})
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			l.mu.Lock()
			s := l.sess
			l.sess = nil
			l.mu.Unlock()
			if s != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
				l.c.Close(closeCtx, s)
				cancel()
			}
			return
		case <-time.After(every):
		}
	}
}

// snapshot reads the line from etcd and keeps it.
func (l *etcdLine) snapshot(ctx context.Context) (etcdline.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, l.read)
	defer cancel()
	snap, err := l.c.Snapshot(ctx)
	if err != nil {
		return etcdline.Snapshot{}, err
	}
	l.mu.Lock()
	l.last = snap
	l.mu.Unlock()
	return snap, nil
}

// overlay puts etcd's records in place of the federation's for the keys
// on the etcd line. When etcd cannot be read the last snapshot serves for
// planning (readiness reads etcd again before anything is done).
func (d *Daemon) overlay(out map[capture.Key]capture.EpochRecord) {
	snap, err := d.line.snapshot(context.Background())
	if err != nil {
		d.log.Debug("etcd epoch line not read", "err", err)
		d.line.mu.Lock()
		snap = d.line.last
		d.line.mu.Unlock()
	}
	for k := range out {
		if d.onEtcd(k) {
			delete(out, k)
		}
	}
	for k, r := range snap.Records {
		if d.onEtcd(k) {
			out[k] = r.EpochRecord
		}
	}
}

// bumpEtcd moves the keys' lines in etcd to the records the pass took,
// each from the revision last read; a bump another node won first is left
// to the next pass, which reads the winner's record.
func (d *Daemon) bumpEtcd(keys []capture.Key, epochs map[capture.Key]capture.EpochRecord) {
	l := d.line
	s := l.session(time.Now())
	if s == nil {
		d.log.Warn("etcd epoch line: no bump without a session", "keys", len(keys), "first", keys[0])
		return
	}
	lost := 0
	for _, k := range keys {
		l.mu.Lock()
		prev := l.last.Records[k]
		l.mu.Unlock()
		if epochs[k].Epoch <= prev.Epoch {
			continue // etcd is there already, or past: nothing to bump
		}
		if _, err := d.bumpOne(s, k, prev, epochs[k]); err != nil {
			lost++
			d.log.Info("etcd epoch line: bump not made", "key", k, "epoch", epochs[k].Epoch, "holder", epochs[k].Holder, "err", err)
		}
	}
	if lost > 0 {
		d.wake.Publish(struct{}{})
	}
}

// bumpOne moves k's line in etcd from prev to next under session s and
// keeps, and returns, the record etcd now holds.
func (d *Daemon) bumpOne(s *etcdline.Session, k capture.Key, prev etcdline.Record, next capture.EpochRecord) (etcdline.Record, error) {
	l := d.line
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	bump := l.c.Bump
	if d.lockLine(k) {
		bump = l.c.Take
	}
	rec, err := bump(ctx, s.Lease, k, prev, next)
	cancel()
	if err != nil {
		return etcdline.Record{}, err
	}
	l.mu.Lock()
	if l.last.Records == nil {
		l.last.Records = map[capture.Key]etcdline.Record{}
	}
	l.last.Records[k] = rec
	l.mu.Unlock()
	d.log.Info("epoch line moved in etcd", "key", k, "epoch", rec.Epoch, "holder", rec.Holder, "revision", rec.Rev)
	return rec, nil
}

// lineRevision is the executor's token of k at epoch: the revision of the
// record at that epoch the last readiness confirmed in etcd (zero when it
// confirmed none), and whether k is on the etcd line at all. Ready is
// asked right before each call and confirms every key of this node, so the
// revision read after it is the one etcd held then. A bump always raises
// the epoch, so one epoch of a key has one revision: a confirmation of the
// same record by a later ask gives the same token.
func (d *Daemon) lineRevision(k capture.Key, epoch capture.Epoch) (int64, bool) {
	if !d.onEtcd(k) {
		return 0, false
	}
	d.line.mu.Lock()
	defer d.line.mu.Unlock()
	if r, ok := d.line.confirmed[k]; ok && r.Epoch == epoch {
		return r.Rev, true
	}
	return 0, true
}

// lockLine says whether k's line in etcd is taken only from a holder
// whose session is gone (etcdline.Client.Take): on premises. There VRRP
// decides who may hold, and a LAN split that leaves etcd reachable from
// both sides makes two masters; taking the line from a live holder would
// let both answer ARP in turn. In the cloud a move is the provider's
// atomic reassignment and a drain must move the line while its holder
// lives, so any node may move it.
func (d *Daemon) lockLine(k capture.Key) bool {
	for _, p := range d.cfg.Pools {
		if p.Name == k.Pool {
			return p.OnPrem()
		}
	}
	return false
}

// confirmEtcd checks, against etcd now, that every record the node would
// act at is etcd's, and that its session is live there.
func (d *Daemon) confirmEtcd(want map[capture.Key]capture.EpochRecord) error {
	ok := map[capture.Key]etcdline.Record{}
	defer func() {
		// Only what this ask confirmed is a token: a key it did not get
		// to, or found moved, keeps none (its rows are not called).
		d.line.mu.Lock()
		for k := range want {
			delete(d.line.confirmed, k)
		}
		if d.line.confirmed == nil {
			d.line.confirmed = map[capture.Key]etcdline.Record{}
		}
		maps.Copy(d.line.confirmed, ok)
		d.line.mu.Unlock()
	}()
	s := d.line.session(time.Now())
	if s == nil {
		return errNoSession
	}
	snap, err := d.line.snapshot(context.Background())
	if err != nil {
		return fmt.Errorf("etcd epoch line not confirmed: %w", err)
	}
	if snap.Session != s.Lease {
		return fmt.Errorf("%w: etcd holds this node's session under lease %d, not %d", errNoSession, snap.Session, s.Lease)
	}
	for k, r := range want {
		got := snap.Records[k]
		if got.EpochRecord == r {
			ok[k] = got
			continue
		}
		if r.Epoch > got.Epoch {
			// This node's pass moved the line and etcd has not got it yet
			// (its bump was not made: no session then, or etcd out of
			// reach). It is made now, from the revision just read, before
			// anything is done at it; a node that moved the line first
			// makes it fail.
			rec, err := d.bumpOne(s, k, got, r)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errUnreplicated, k, err)
			}
			ok[k] = rec
			continue
		}
		return fmt.Errorf("%w: %s is at epoch %d (holder %q) in etcd, not %d (holder %q)", errUnreplicated, k, got.Epoch, got.Holder, r.Epoch, r.Holder)
	}
	return nil
}
