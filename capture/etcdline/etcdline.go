// Package etcdline holds the epoch line of capture keys in etcd, as an
// option to the federation's line (issue 18): each (pool, address, domain)
// is one etcd key whose value is the epoch record, and a bump is a
// transaction that succeeds only if the key's revision is still the one the
// bump read, and only while the node holds its session lease. Kleppmann's
// fencing token comes from a linearizable store: here the record's
// revision, which the node's actions carry and every claim checks again.
//
// It speaks etcd's JSON gateway (the /v3/ HTTP API every etcd 3.4+ member
// serves on its client URL) with net/http, so the node's binary links no
// gRPC and no etcd client. Reads are linearizable (etcd's default).
package etcdline

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// Record is an epoch record as etcd holds it: the record, and the key's
// revision (0 for a key etcd does not hold: epoch 0, no holder).
type Record struct {
	capture.EpochRecord
	Rev int64
}

// ErrConflict: the key's revision is not the one expected (another node
// moved the line first), or this node's session is gone. The error names
// what etcd holds now.
var ErrConflict = errors.New("etcd epoch line: conflict")

// ErrFutureRevision: a read at a revision etcd has not reached (GetAt).
var ErrFutureRevision = errors.New("etcd epoch line: a revision etcd has not reached")

// ErrUnreachable: no endpoint answered.
var ErrUnreachable = errors.New("etcd epoch line: unreachable")

// maxResponse bounds what the client reads of one answer.
const maxResponse = 4 << 20

// Client is a node's view of the line in etcd.
type Client struct {
	// Endpoints are the members' client URLs (http:// or https://); a
	// request goes to the first that answers.
	Endpoints []string
	// Prefix starts every key this client names (e.g. "/ipfence/").
	Prefix string
	// Node is this node's name: its session key is Prefix+"sessions/"+Node.
	Node string
	// HTTP carries the requests (its transport holds TLS); nil means a
	// client with a 5 s timeout.
	HTTP *http.Client

	// next is the endpoint tried first: the last one that answered, so
	// that a stopped member costs one timeout, not one per request.
	next atomic.Int64
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 5 * time.Second}
}

// keyOf is the etcd key of capture key k.
func (c *Client) keyOf(k capture.Key) string { return c.Prefix + "epochs/" + k.String() }

// sessionKey is this node's session key.
func (c *Client) sessionKey() string { return c.Prefix + "sessions/" + c.Node }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// kv is a key-value as the gateway gives it.
type kv struct {
	Key         string `json:"key"`
	Value       string `json:"value"`
	ModRevision string `json:"mod_revision"`
	Lease       string `json:"lease"`
}

// call posts req to path on the first endpoint that answers and decodes
// the answer into out. It starts with the endpoint that answered last, and
// when ctx has a deadline each endpoint gets an equal share of what is left
// of it: a paused member (its socket accepts, nothing answers) must not use
// up the whole deadline before the next member is asked. A request that
// timed out may still have been applied, so each is safe to send again to
// another member: a bump or a check is a transaction guarded by a revision
// (sent twice, the second fails its compare); a session's put writes the
// same value under the same lease; a lease granted twice leaves one unused,
// which expires.
func (c *Client) call(ctx context.Context, path string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	n := len(c.Endpoints)
	first := int(c.next.Load())
	var errs []error
	for i := range n {
		j := (first + i) % n
		ep := c.Endpoints[j]
		done, err := c.try(ctx, n-i, ep, path, body, out)
		if done {
			if err == nil {
				c.next.Store(int64(j))
			}
			return err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w: %v", ErrUnreachable, errors.Join(errs...))
}

// try posts body to one endpoint, with a share 1/left of ctx's remaining
// time. done reports that the endpoint answered (err is then the answer's
// error, if any); otherwise err says why it could not be reached.
func (c *Client) try(ctx context.Context, left int, ep, path string, body []byte, out any) (done bool, err error) {
	if dl, ok := ctx.Deadline(); ok && left > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(left))
		defer cancel()
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(ep, "/")+path, bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(r)
	if err != nil {
		return false, err
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	if rerr != nil {
		return false, fmt.Errorf("%s: %w", ep, rerr)
	}
	if resp.StatusCode != http.StatusOK {
		// etcd answered: an error of the request, not of reaching it.
		return true, fmt.Errorf("etcd %s%s answered %s: %s", ep, path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return true, fmt.Errorf("etcd %s%s: %w", ep, path, err)
	}
	return true, nil
}

// decode reads a record from an etcd value.
func decode(v kv) (Record, error) {
	raw, err := base64.StdEncoding.DecodeString(v.Value)
	if err != nil {
		return Record{}, fmt.Errorf("etcd value of %q: %w", v.Key, err)
	}
	var rec struct {
		Epoch  uint64 `json:"epoch"`
		Holder string `json:"holder"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("etcd value of %q is no epoch record: %w", v.Key, err)
	}
	rev, err := strconv.ParseInt(v.ModRevision, 10, 64)
	if err != nil || rev <= 0 {
		return Record{}, fmt.Errorf("etcd value of %q has revision %q", v.Key, v.ModRevision)
	}
	if rec.Epoch == 0 || rec.Epoch >= 1<<63-1 {
		return Record{}, fmt.Errorf("etcd value of %q has epoch %d, out of bounds", v.Key, rec.Epoch)
	}
	return Record{EpochRecord: capture.EpochRecord{Epoch: capture.Epoch(rec.Epoch), Holder: rec.Holder}, Rev: rev}, nil
}

func encode(r capture.EpochRecord) string {
	b, _ := json.Marshal(struct {
		Epoch  uint64 `json:"epoch"`
		Holder string `json:"holder"`
	}{uint64(r.Epoch), r.Holder})
	return base64.StdEncoding.EncodeToString(b)
}

// Get reads k's record, linearizably.
func (c *Client) Get(ctx context.Context, k capture.Key) (Record, error) { return c.GetAt(ctx, k, 0) }

// GetAt reads k's record as etcd held it at revision rev (0: now): the
// record written last at or before rev, with its own revision, or the
// zero Record when k had none then. A checker reads the records the
// nodes' calls carried the revisions of; etcd answers for any revision
// it has not compacted.
func (c *Client) GetAt(ctx context.Context, k capture.Key, rev int64) (Record, error) {
	var out struct {
		Kvs []kv `json:"kvs"`
	}
	req := map[string]any{"key": b64(c.keyOf(k))}
	if rev > 0 {
		req["revision"] = strconv.FormatInt(rev, 10)
	}
	if err := c.call(ctx, "/v3/kv/range", req, &out); err != nil {
		// etcd's own words (mvcc.ErrFutureRev): the gateway gives no
		// other mark of it.
		if rev > 0 && strings.Contains(err.Error(), "required revision is a future revision") {
			return Record{}, fmt.Errorf("%w: %d: %v", ErrFutureRevision, rev, err)
		}
		return Record{}, err
	}
	if len(out.Kvs) == 0 {
		return Record{}, nil
	}
	v := out.Kvs[0]
	if raw, err := base64.StdEncoding.DecodeString(v.Key); err == nil {
		v.Key = string(raw)
	}
	return decode(v)
}

// txnResult is a transaction's answer.
type txnResult struct {
	Header struct {
		Revision string `json:"revision"`
	} `json:"header"`
	Succeeded bool `json:"succeeded"`
	Responses []struct {
		ResponseRange *struct {
			Kvs []kv `json:"kvs"`
		} `json:"response_range"`
	} `json:"responses"`
}

// guards are the comparisons every change and check makes: the key is at
// rev, and this node's session key is held under lease.
func (c *Client) guards(k capture.Key, rev int64, lease Lease) []map[string]any {
	return []map[string]any{
		{"target": "MOD", "key": b64(c.keyOf(k)), "mod_revision": strconv.FormatInt(rev, 10), "result": "EQUAL"},
		{"target": "LEASE", "key": b64(c.sessionKey()), "lease": strconv.FormatInt(int64(lease), 10), "result": "EQUAL"},
	}
}

// conflict explains a failed transaction from its failure branch's reads
// (the key, then the session key; a third read, Take's, is not looked at).
func (c *Client) conflict(k capture.Key, res txnResult, want int64, lease Lease) error {
	cur := Record{}
	var sess *kv
	for i, r := range res.Responses {
		if r.ResponseRange == nil || len(r.ResponseRange.Kvs) == 0 {
			continue
		}
		switch i {
		case 0:
			if rec, err := decode(r.ResponseRange.Kvs[0]); err == nil {
				cur = rec
			}
		case 1:
			sess = &r.ResponseRange.Kvs[0]
		}
	}
	switch {
	case sess == nil:
		return fmt.Errorf("%w: this node's session in etcd is gone (its lease expired or was revoked)", ErrConflict)
	case sess.Lease != strconv.FormatInt(int64(lease), 10):
		return fmt.Errorf("%w: this node's session in etcd is under lease %s, not %d", ErrConflict, sess.Lease, lease)
	}
	if cur.Rev == want {
		// The key and the session are as expected: a guard beyond them
		// failed (Take's), or the reads raced a change back.
		return fmt.Errorf("%w: %s is at revision %d as expected and this node's session is live", errNoConflict, k, want)
	}
	return fmt.Errorf("%w: %s is at revision %d (epoch %d, holder %q), not %d", ErrConflict, k, cur.Rev, cur.Epoch, cur.Holder, want)
}

// errNoConflict: a failed transaction whose failure reads show the key at
// the expected revision and this node's session live. It wraps
// ErrConflict, so that callers retry as for any conflict.
var errNoConflict = fmt.Errorf("%w: not on the key or the session", ErrConflict)

// failureReads are the reads of a failed transaction: the key and the
// session key.
func (c *Client) failureReads(k capture.Key) []map[string]any {
	return []map[string]any{
		{"request_range": map[string]any{"key": b64(c.keyOf(k))}},
		{"request_range": map[string]any{"key": b64(c.sessionKey())}},
	}
}

// Bump moves k's line from prev (as Get or an earlier Bump gave it) to
// next, in one transaction that succeeds only if k is still at prev's
// revision and this node's session (lease) is live. An epoch that does not
// rise is refused before anything is sent: the line never goes down.
func (c *Client) Bump(ctx context.Context, lease Lease, k capture.Key, prev Record, next capture.EpochRecord) (Record, error) {
	return c.bump(ctx, lease, k, prev, next, false)
}

// ErrHeld: Take would take the line from another node whose session in
// etcd is still live.
var ErrHeld = errors.New("etcd epoch line: held by a live session")

// Take is Bump for a line held as a lock: besides Bump's conditions, when
// prev names another node as holder, that node must hold no session in
// etcd (its lease expired or was revoked), checked in the same
// transaction. The holder itself may always move the line on. On
// premises two hosts that both believe they are VRRP master (a LAN split
// that leaves etcd reachable from both) would otherwise take the line
// from each other every pass and both answer ARP; with Take the first
// keeps it while it is alive, and the other captures nothing.
func (c *Client) Take(ctx context.Context, lease Lease, k capture.Key, prev Record, next capture.EpochRecord) (Record, error) {
	return c.bump(ctx, lease, k, prev, next, true)
}

func (c *Client) bump(ctx context.Context, lease Lease, k capture.Key, prev Record, next capture.EpochRecord, lock bool) (Record, error) {
	if next.Epoch <= prev.Epoch {
		return Record{}, fmt.Errorf("etcd epoch line: %s from epoch %d to %d does not rise", k, prev.Epoch, next.Epoch)
	}
	if uint64(next.Epoch) >= 1<<63-1 {
		return Record{}, fmt.Errorf("etcd epoch line: %s: epoch %d is out of bounds", k, next.Epoch)
	}
	var res txnResult
	guards, failure := c.guards(k, prev.Rev, lease), c.failureReads(k)
	other := ""
	if lock && prev.Holder != "" && prev.Holder != c.Node {
		other = c.Prefix + "sessions/" + prev.Holder
		guards = append(guards, map[string]any{"target": "VERSION", "key": b64(other), "version": "0", "result": "EQUAL"})
		failure = append(failure, map[string]any{"request_range": map[string]any{"key": b64(other)}})
	}
	req := map[string]any{
		"compare": guards,
		"success": []map[string]any{{"request_put": map[string]any{"key": b64(c.keyOf(k)), "value": encode(next)}}},
		"failure": failure,
	}
	if err := c.call(ctx, "/v3/kv/txn", req, &res); err != nil {
		return Record{}, err
	}
	if !res.Succeeded {
		err := c.conflict(k, res, prev.Rev, lease)
		if other != "" && len(res.Responses) == 3 && errors.Is(err, errNoConflict) {
			if r := res.Responses[2].ResponseRange; r != nil && len(r.Kvs) > 0 {
				return Record{}, fmt.Errorf("%w: %s: %s holds it under a live session (lease %s)", ErrHeld, k, prev.Holder, r.Kvs[0].Lease)
			}
		}
		return Record{}, err
	}
	rev, err := strconv.ParseInt(res.Header.Revision, 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("etcd epoch line: revision %q: %w", res.Header.Revision, err)
	}
	return Record{EpochRecord: next, Rev: rev}, nil
}

// Check asks, in one transaction, whether k is still at rec's revision and
// this node's session is live: the question every claim of a journal row
// asks before the provider call it carries rec's revision into.
func (c *Client) Check(ctx context.Context, lease Lease, k capture.Key, rec Record) error {
	var res txnResult
	req := map[string]any{"compare": c.guards(k, rec.Rev, lease), "failure": c.failureReads(k)}
	if err := c.call(ctx, "/v3/kv/txn", req, &res); err != nil {
		return err
	}
	if !res.Succeeded {
		return c.conflict(k, res, rec.Rev, lease)
	}
	return nil
}

// Lease is an etcd lease ID.
type Lease int64

// Session is a node's lease and when it runs out, as far as the node
// knows: from the moment each keepalive was sent plus the TTL etcd gave,
// on the caller's monotonic clock, so that a node that cannot reach etcd
// stops acting before etcd lets the lease go.
type Session struct {
	Lease   Lease
	TTL     time.Duration
	expires time.Time
}

// Live reports whether the session is still live at now.
func (s *Session) Live(now time.Time) bool { return s != nil && now.Before(s.expires) }

// Expires is when the session runs out unless renewed.
func (s *Session) Expires() time.Time { return s.expires }

// Open grants a lease of ttl and puts this node's session key under it.
// sent is when the grant was sent, on the caller's monotonic clock.
func (c *Client) Open(ctx context.Context, ttl time.Duration, sent time.Time) (*Session, error) {
	secs := int64(ttl / time.Second)
	if secs < 1 {
		return nil, fmt.Errorf("etcd epoch line: a session TTL of %s is under a second", ttl)
	}
	var g struct {
		ID    string `json:"ID"`
		TTL   string `json:"TTL"`
		Error string `json:"error"`
	}
	if err := c.call(ctx, "/v3/lease/grant", map[string]any{"TTL": secs}, &g); err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(g.ID, 10, 64)
	if err != nil || id == 0 {
		return nil, fmt.Errorf("etcd epoch line: lease grant gave %q (%s)", g.ID, g.Error)
	}
	got, _ := strconv.ParseInt(g.TTL, 10, 64)
	var put struct{}
	if err := c.call(ctx, "/v3/kv/put", map[string]any{"key": b64(c.sessionKey()), "value": b64(c.Node), "lease": strconv.FormatInt(id, 10)}, &put); err != nil {
		return nil, err
	}
	return &Session{Lease: Lease(id), TTL: time.Duration(got) * time.Second, expires: sent.Add(time.Duration(got) * time.Second)}, nil
}

// KeepAlive renews s; sent is when the renewal was sent. A lease etcd no
// longer knows is ErrConflict: the session is over, and a new one must be
// opened (and the line read again) before acting.
func (c *Client) KeepAlive(ctx context.Context, s *Session, sent time.Time) error {
	var out struct {
		Result struct {
			TTL string `json:"TTL"`
		} `json:"result"`
	}
	if err := c.call(ctx, "/v3/lease/keepalive", map[string]any{"ID": strconv.FormatInt(int64(s.Lease), 10)}, &out); err != nil {
		return err
	}
	ttl, _ := strconv.ParseInt(out.Result.TTL, 10, 64)
	if ttl <= 0 {
		s.expires = time.Time{}
		return fmt.Errorf("%w: lease %d is gone", ErrConflict, s.Lease)
	}
	s.expires = sent.Add(time.Duration(ttl) * time.Second)
	return nil
}

// Close revokes the session's lease, which deletes its session key.
func (c *Client) Close(ctx context.Context, s *Session) error {
	var out struct{}
	s.expires = time.Time{}
	return c.call(ctx, "/v3/lease/revoke", map[string]any{"ID": strconv.FormatInt(int64(s.Lease), 10)}, &out)
}

// Snapshot is the line as etcd holds it at one revision: every epoch
// record under the prefix, and the lease this node's session key is held
// under (0 when it has none).
type Snapshot struct {
	Records map[capture.Key]Record
	Session Lease
}

// maxRecords bounds the records one snapshot takes in.
const maxRecords = 1 << 17

// Snapshot reads every record and this node's session in one transaction
// (one revision, linearizable). A value that is no record is an error
// naming its key: the line is not read past what it cannot check.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	prefix := c.Prefix + "epochs/"
	var res txnResult
	req := map[string]any{"success": []map[string]any{
		{"request_range": map[string]any{"key": b64(prefix), "range_end": b64(prefixEnd(prefix)), "limit": strconv.Itoa(maxRecords + 1)}},
		{"request_range": map[string]any{"key": b64(c.sessionKey())}},
	}}
	if err := c.call(ctx, "/v3/kv/txn", req, &res); err != nil {
		return Snapshot{}, err
	}
	if !res.Succeeded || len(res.Responses) != 2 || res.Responses[0].ResponseRange == nil || res.Responses[1].ResponseRange == nil {
		return Snapshot{}, fmt.Errorf("etcd epoch line: a snapshot read gave %d answers", len(res.Responses))
	}
	out := Snapshot{Records: map[capture.Key]Record{}}
	kvs := res.Responses[0].ResponseRange.Kvs
	if len(kvs) > maxRecords {
		return Snapshot{}, fmt.Errorf("etcd epoch line: more than %d records under %s", maxRecords, prefix)
	}
	for _, v := range kvs {
		raw, err := base64.StdEncoding.DecodeString(v.Key)
		if err != nil {
			return Snapshot{}, fmt.Errorf("etcd epoch line: key %q: %w", v.Key, err)
		}
		k, err := capture.ParseKey(strings.TrimPrefix(string(raw), prefix))
		if err != nil {
			return Snapshot{}, fmt.Errorf("etcd epoch line: key %q: %w", raw, err)
		}
		v.Key = string(raw)
		rec, err := decode(v)
		if err != nil {
			return Snapshot{}, err
		}
		out.Records[k] = rec
	}
	if s := res.Responses[1].ResponseRange.Kvs; len(s) > 0 {
		id, _ := strconv.ParseInt(s[0].Lease, 10, 64)
		out.Session = Lease(id)
	}
	return out, nil
}

// prefixEnd is the end of the range of keys that start with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
