// Package store is a node's capture state on disk: one bbolt file holding
// the epochs, what the node holds, the release intents (markers, the outbox)
// and the journal of actions. Every change is one transaction, committed
// with fsync; every epoch read-modify-write is one transaction; and the gate
// runs inside the transactions that import, sweep and claim, so that no
// stale action slips between a check and a write.
package store

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/plan"
	"github.com/ipfence/ipfence/capture/policy"
)

// Bucket names. Rows are keyed by idempotency key (unique); bySeq orders
// them by import; the state buckets index the rows that are not finished,
// so that sweeps and claims never scan the whole history.
var (
	bMeta    = []byte("meta")
	bEpochs  = []byte("epochs")
	bHeld    = []byte("held")
	bMarkers = []byte("markers")
	bRows    = []byte("rows")
	bSeq     = []byte("by-seq")
	// Index buckets for the unfinished states.
	bIndex = map[capture.State][]byte{
		capture.Pending:  []byte("state-pending"),
		capture.Approved: []byte("state-approved"),
		capture.Running:  []byte("state-running"),
		capture.Failed:   []byte("state-failed"),
	}
)

const schemaVersion = 1

// Options tune a store.
type Options struct {
	// RetryAfter is how long a failed row waits before the next import of
	// the same action re-arms it; 0 means 10 seconds.
	RetryAfter time.Duration
	// NoSync skips the fsync at commit. Only tests that check logic, not
	// durability, may set it: a crash can then lose committed changes.
	NoSync bool
	// UnsafeDisableFence makes the gate accept every action: the planted
	// bug the harness must catch. Never set it outside a test.
	UnsafeDisableFence bool
}

// Store is an open state file.
type Store struct {
	db   *bolt.DB
	opts Options
}

// ErrStale is returned by Claim when the gate skips the row.
var ErrStale = errors.New("stale action")

// ErrNotFound is returned for an idempotency key the journal does not hold.
var ErrNotFound = errors.New("no such journal row")

// Open opens (creating if needed) the state file at path. An existing file
// is checked before it is used (its size against its meta page, bbolt's
// consistency check, the journal's invariants); a damaged one is refused
// with an error wrapping ErrCorrupt and naming the file.
func Open(path string, opts Options) (*Store, error) {
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 10 * time.Second
	}
	existed, err := checkFile(path)
	if err != nil {
		return nil, fmt.Errorf("opening state file %s: %w", path, err)
	}
	db, err := openChecked(path, existed, &bolt.Options{Timeout: 5 * time.Second, NoSync: opts.NoSync})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bMeta, bEpochs, bHeld, bMarkers, bRows, bSeq} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		for _, b := range bIndex {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bMeta)
		if v := meta.Get([]byte("schema")); v != nil {
			if n, _ := binary.Uvarint(v); n != schemaVersion {
				return fmt.Errorf("state file has schema %d, this ipfence reads %d", n, schemaVersion)
			}
			return nil
		}
		return meta.Put([]byte("schema"), binary.AppendUvarint(nil, schemaVersion))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &Store{db: db, opts: opts}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Path is the state file's path.
func (s *Store) Path() string { return s.db.Path() }

func keyBytes(k capture.Key) []byte { return []byte(k.String()) }

// Records are stored as uvarint epoch followed by length-prefixed strings,
// because the epochs and held sets are read whole on every reconcile.
func encodeRecord(r capture.EpochRecord) []byte {
	b := binary.AppendUvarint(nil, uint64(r.Epoch))
	return appendString(b, r.Holder)
}

func decodeRecord(b []byte) (capture.EpochRecord, error) {
	e, n := binary.Uvarint(b)
	if n <= 0 {
		return capture.EpochRecord{}, errors.New("corrupt epoch record")
	}
	h, _, err := readString(b[n:])
	return capture.EpochRecord{Epoch: capture.Epoch(e), Holder: h}, err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, errors.New("corrupt string in record")
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

func encodeHeld(h capture.Held) []byte {
	b := binary.AppendUvarint(nil, uint64(h.Epoch))
	b = appendString(b, h.Provider)
	b = appendString(b, h.Target)
	if h.Confirmed {
		return append(b, 1)
	}
	return append(b, 0)
}

func decodeHeld(k capture.Key, b []byte) (capture.Held, error) {
	e, n := binary.Uvarint(b)
	if n <= 0 {
		return capture.Held{}, errors.New("corrupt held record")
	}
	prov, rest, err := readString(b[n:])
	if err != nil {
		return capture.Held{}, err
	}
	target, rest, err := readString(rest)
	if err != nil {
		return capture.Held{}, err
	}
	if len(rest) != 1 {
		return capture.Held{}, errors.New("corrupt held record")
	}
	return capture.Held{Key: k, Provider: prov, Target: target, Epoch: capture.Epoch(e), Confirmed: rest[0] == 1}, nil
}

func readEpochs(tx *bolt.Tx) (map[capture.Key]capture.EpochRecord, error) {
	out := map[capture.Key]capture.EpochRecord{}
	err := tx.Bucket(bEpochs).ForEach(func(k, v []byte) error {
		key, err := capture.ParseKey(string(k))
		if err != nil {
			return err
		}
		r, err := decodeRecord(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		out[key] = r
		return nil
	})
	return out, err
}

// Epochs returns every epoch record.
func (s *Store) Epochs() (map[capture.Key]capture.EpochRecord, error) {
	var out map[capture.Key]capture.EpochRecord
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, err = readEpochs(tx)
		return err
	})
	return out, err
}

// ReconcileEpochs brings the epochs of the keys in desired up to date
// (plan.Epochs: adopt a peer's higher record, then bump when the holder
// changed) and returns every record with the keys that changed. When nothing
// changes no write transaction is opened; when something does, the read,
// the computation and the write happen again inside one transaction.
func (s *Store) ReconcileEpochs(desired map[capture.Key]string, seen map[capture.Key]capture.EpochRecord) (map[capture.Key]capture.EpochRecord, []capture.Key, error) {
	local, err := s.Epochs()
	if err != nil {
		return nil, nil, err
	}
	if _, changed := plan.Epochs(desired, local, seen); len(changed) == 0 {
		return local, nil, nil
	}
	var out map[capture.Key]capture.EpochRecord
	var changed []capture.Key
	err = s.db.Update(func(tx *bolt.Tx) error {
		local, err := readEpochs(tx)
		if err != nil {
			return err
		}
		next, ch := plan.Epochs(desired, local, seen)
		b := tx.Bucket(bEpochs)
		for _, k := range ch {
			if err := b.Put(keyBytes(k), encodeRecord(next[k])); err != nil {
				return err
			}
			local[k] = next[k]
		}
		out, changed = local, ch
		return nil
	})
	return out, changed, err
}

// ObserveEpochs merges records learned from peers: a key adopts a record
// whose epoch is higher than its own. It returns the keys that changed.
func (s *Store) ObserveEpochs(seen map[capture.Key]capture.EpochRecord) ([]capture.Key, error) {
	var changed []capture.Key
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bEpochs)
		for k, r := range seen {
			cur := capture.EpochRecord{}
			if v := b.Get(keyBytes(k)); v != nil {
				var err error
				if cur, err = decodeRecord(v); err != nil {
					return err
				}
			}
			if r.Epoch > cur.Epoch {
				if err := b.Put(keyBytes(k), encodeRecord(r)); err != nil {
					return err
				}
				changed = append(changed, k)
			}
		}
		return nil
	})
	return changed, err
}

// Held returns what this node holds.
func (s *Store) Held() (map[capture.Key]capture.Held, error) {
	out := map[capture.Key]capture.Held{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bHeld).ForEach(func(k, v []byte) error {
			key, err := capture.ParseKey(string(k))
			if err != nil {
				return err
			}
			h, err := decodeHeld(key, v)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			out[key] = h
			return nil
		})
	})
	return out, err
}

// Markers returns the persisted release intents, in key order.
func (s *Store) Markers() ([]capture.Action, error) {
	var out []capture.Action
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bMarkers).ForEach(func(k, v []byte) error {
			var a capture.Action
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("marker %s: %w", k, err)
			}
			out = append(out, a)
			return nil
		})
	})
	return out, err
}

// ApplyMarkers persists new release intents and drops stale ones, in one
// transaction.
func (s *Store) ApplyMarkers(put []capture.Action, drop []string) error {
	if len(put) == 0 && len(drop) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bMarkers)
		for _, k := range drop {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		for _, a := range put {
			v, err := json.Marshal(a)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(a.IdempotencyKey), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// rowTx reads and writes journal rows inside one transaction, keeping the
// state indexes in step.
type rowTx struct {
	tx     *bolt.Tx
	rows   *bolt.Bucket
	epochs *bolt.Bucket
	// unfenced is Options.UnsafeDisableFence.
	unfenced bool
}

func (s *Store) rowTx(tx *bolt.Tx) *rowTx {
	return &rowTx{tx: tx, rows: tx.Bucket(bRows), epochs: tx.Bucket(bEpochs), unfenced: s.opts.UnsafeDisableFence}
}

func (r *rowTx) get(key string) (capture.Row, bool, error) {
	v := r.rows.Get([]byte(key))
	if v == nil {
		return capture.Row{}, false, nil
	}
	var row capture.Row
	if err := json.Unmarshal(v, &row); err != nil {
		return capture.Row{}, false, fmt.Errorf("journal row %s: %w", key, err)
	}
	return row, true, nil
}

// mustGet is get for a row that must exist.
func (r *rowTx) mustGet(key string) (capture.Row, error) {
	row, ok, err := r.get(key)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return row, err
}

// put writes a row whose state may have changed from old ("" for a new
// row), moving it between index buckets.
func (r *rowTx) put(row *capture.Row, old capture.State) error {
	v, err := json.Marshal(row)
	if err != nil {
		return err
	}
	k := []byte(row.IdempotencyKey)
	if err := r.rows.Put(k, v); err != nil {
		return err
	}
	if old == row.State {
		return nil
	}
	if b, ok := bIndex[old]; ok {
		if err := r.tx.Bucket(b).Delete(k); err != nil {
			return err
		}
	}
	if b, ok := bIndex[row.State]; ok {
		if err := r.tx.Bucket(b).Put(k, seqBytes(row.Seq)); err != nil {
			return err
		}
	}
	return nil
}

func seqBytes(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// current returns the epoch record of a key inside the transaction.
func (r *rowTx) current(k capture.Key) (capture.EpochRecord, bool, error) {
	v := r.epochs.Get(keyBytes(k))
	if v == nil {
		return capture.EpochRecord{}, false, nil
	}
	rec, err := decodeRecord(v)
	return rec, true, err
}

// stale runs the gate against the transaction's view of the epochs.
func (r *rowTx) stale(a *capture.Action) (string, error) {
	if r.unfenced {
		return "", nil
	}
	cur, ok, err := r.current(a.Key)
	if err != nil {
		return "", err
	}
	return gate.Check(a, cur, ok), nil
}

// indexed returns the keys in a state index, in import order.
func (r *rowTx) indexed(st capture.State) []string {
	type kv struct {
		seq uint64
		key string
	}
	var all []kv
	_ = r.tx.Bucket(bIndex[st]).ForEach(func(k, v []byte) error {
		all = append(all, kv{binary.BigEndian.Uint64(v), string(k)})
		return nil
	})
	// Sorting by sequence gives import order.
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]string, len(all))
	for i, x := range all {
		out[i] = x.key
	}
	return out
}

// ImportResult counts what an import did.
type ImportResult struct {
	Imported int
	// Stale actions were refused by the gate.
	Stale int
	// Existing actions had a row already (the same idempotency key).
	Existing int
	// Rearmed failed rows went back to pending.
	Rearmed int
	// Reasons holds the gate's reason per stale idempotency key.
	Reasons map[string]string
	// Keys are the idempotency keys of the rows imported or re-armed, in
	// the order of the actions.
	Keys []string
}

// Import writes the actions to the journal as pending rows, in one
// transaction (one fsync for the batch). The gate refuses stale actions; an
// action whose idempotency key has a row already is not imported again,
// except that a failed row is re-armed once RetryAfter has passed since it
// failed.
func (s *Store) Import(actions []capture.Action, now time.Time) (ImportResult, error) {
	res := ImportResult{Reasons: map[string]string{}}
	if len(actions) == 0 {
		return res, nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		seq := tx.Bucket(bSeq)
		for i := range actions {
			a := &actions[i]
			if why, err := r.stale(a); err != nil {
				return err
			} else if why != "" {
				res.Stale++
				res.Reasons[a.IdempotencyKey] = why
				continue
			}
			row, exists, err := r.get(a.IdempotencyKey)
			if err != nil {
				return err
			}
			if exists {
				if row.State == capture.Failed && now.UnixNano()-row.DoneAt >= int64(s.opts.RetryAfter) {
					row.State = capture.Pending
					row.ApprovedBy = ""
					if err := r.put(&row, capture.Failed); err != nil {
						return err
					}
					res.Rearmed++
					res.Keys = append(res.Keys, a.IdempotencyKey)
					continue
				}
				res.Existing++
				continue
			}
			n, err := seq.NextSequence()
			if err != nil {
				return err
			}
			row = capture.Row{Action: *a, State: capture.Pending, Seq: n, ImportedAt: now.UnixNano()}
			if err := seq.Put(seqBytes(n), []byte(a.IdempotencyKey)); err != nil {
				return err
			}
			if err := r.put(&row, ""); err != nil {
				return err
			}
			res.Imported++
			res.Keys = append(res.Keys, a.IdempotencyKey)
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, fmt.Errorf("importing %d actions: %w", len(actions), err)
	}
	return res, nil
}

// Sweep marks every pending or approved row the gate calls stale as
// skipped, and returns their idempotency keys.
func (s *Store) Sweep(now time.Time) ([]string, error) {
	var skipped []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		for _, st := range []capture.State{capture.Pending, capture.Approved} {
			for _, k := range r.indexed(st) {
				row, _, err := r.get(k)
				if err != nil {
					return err
				}
				why, err := r.stale(&row.Action)
				if err != nil {
					return err
				}
				if why == "" {
					continue
				}
				row.State, row.Reason, row.DoneAt = capture.Skipped, "stale: "+why, now.UnixNano()
				if err := r.put(&row, st); err != nil {
					return err
				}
				skipped = append(skipped, k)
			}
		}
		return nil
	})
	return skipped, err
}

// AutoApprove approves the pending rows the policy allows, in import order,
// up to its cap, and returns their keys. A release waits until it has been
// pending for hold (the de-provision hold): an address that flaps away and
// back within the hold is never released, because the gate skips the
// release when it comes back.
func (s *Store) AutoApprove(p policy.Policy, now time.Time, hold time.Duration) ([]string, error) {
	var approved []string
	if !p.Auto || p.MaxPerRun <= 0 {
		return nil, nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		for _, k := range r.indexed(capture.Pending) {
			if len(approved) >= p.MaxPerRun {
				break
			}
			row, _, err := r.get(k)
			if err != nil {
				return err
			}
			if ok, _ := p.Allows(&row.Action); !ok {
				continue
			}
			if !row.Kind.Acquire() && now.UnixNano()-row.ImportedAt < int64(hold) {
				continue
			}
			row.State, row.ApprovedBy = capture.Approved, "policy"
			if err := r.put(&row, capture.Pending); err != nil {
				return err
			}
			approved = append(approved, k)
		}
		return nil
	})
	return approved, err
}

// Approve approves a pending row on an operator's word.
func (s *Store) Approve(key, by string) error {
	return s.decide(key, by, capture.Approved, "", 0)
}

// Reject skips a pending or approved row on an operator's word.
func (s *Store) Reject(key, by string, now time.Time) error {
	return s.decide(key, by, capture.Skipped, fmt.Sprintf("rejected by %s", by), now.UnixNano())
}

// decide moves a row on an operator's word; at is the time of a rejection.
func (s *Store) decide(key, by string, to capture.State, reason string, at int64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		row, err := r.mustGet(key)
		if err != nil {
			return err
		}
		old := row.State
		if old != capture.Pending && !(to == capture.Skipped && old == capture.Approved) {
			return fmt.Errorf("row %s is %s; only a pending row can be approved, and a pending or approved one rejected", key, old)
		}
		row.State = to
		if to == capture.Approved {
			row.ApprovedBy = by
		} else {
			row.Reason, row.DoneAt = reason, at
		}
		return r.put(&row, old)
	})
}

// Approved returns the keys of approved rows in import order.
func (s *Store) Approved() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		out = s.rowTx(tx).indexed(capture.Approved)
		return nil
	})
	return out, err
}

// Claim moves an approved row to running, after the gate has checked it in
// the same transaction: this is the last check before the provider call. A
// stale row is skipped instead, and Claim returns ErrStale with the reason.
func (s *Store) Claim(key string, now time.Time) (capture.Row, error) {
	var row capture.Row
	var stale string
	err := s.db.Update(func(tx *bolt.Tx) (err error) {
		row, stale, err = s.claimTx(tx, key, now)
		return err
	})
	if err != nil {
		return capture.Row{}, err
	}
	if stale != "" {
		return row, fmt.Errorf("%w: %s", ErrStale, stale)
	}
	return row, nil
}

// Claimed is the outcome of one key of ClaimMany: the row, running, or
// skipped with the gate's reason in Stale.
type Claimed struct {
	Row   capture.Row
	Stale string
}

// ClaimMany claims approved rows as Claim does, all in one transaction
// (one fsync for the batch), each gated against the epochs as the
// transaction sees them. A key whose row is not approved any more is left
// out; any other error aborts the whole batch, which then claims nothing.
func (s *Store) ClaimMany(keys []string, now time.Time) ([]Claimed, error) {
	var out []Claimed
	err := s.db.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		for _, k := range keys {
			row, stale, err := s.claimTx(tx, k, now)
			if errors.Is(err, errNotApproved) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, Claimed{Row: row, Stale: stale})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errNotApproved: the row to claim is in another state.
var errNotApproved = errors.New("not approved")

// claimTx is Claim inside a transaction; stale is the gate's reason when
// it skipped the row.
func (s *Store) claimTx(tx *bolt.Tx, key string, now time.Time) (row capture.Row, stale string, err error) {
	r := s.rowTx(tx)
	if row, err = r.mustGet(key); err != nil {
		return row, "", err
	}
	if row.State != capture.Approved {
		return row, "", fmt.Errorf("row %s is %s, %w", key, row.State, errNotApproved)
	}
	if stale, err = r.stale(&row.Action); err != nil {
		return row, "", err
	}
	if stale != "" {
		row.State, row.Reason, row.DoneAt = capture.Skipped, "stale at execute: "+stale, now.UnixNano()
		return row, stale, r.put(&row, capture.Approved)
	}
	row.State, row.ClaimedAt = capture.Running, now.UnixNano()
	row.Attempts++
	if err := r.put(&row, capture.Approved); err != nil {
		return row, "", err
	}
	if row.Kind == capture.Assign || row.Kind == capture.ProxyARPStart {
		return row, "", maybeHeld(tx, &row)
	}
	return row, "", nil
}

// maybeHeld records, before an acquire's provider call, that the node may
// hold the address from now on: should the node crash with the call's
// outcome unknown, the planner still releases the address when it is no
// longer desired here. A confirmed capture on another target is kept until
// the new one succeeds, so that its release is not forgotten either.
func maybeHeld(tx *bolt.Tx, row *capture.Row) error {
	held := tx.Bucket(bHeld)
	hk := keyBytes(row.Key)
	if v := held.Get(hk); v != nil {
		h, err := decodeHeld(row.Key, v)
		if err != nil {
			return err
		}
		if h.Confirmed && h.Target != row.Target {
			return nil
		}
	}
	return held.Put(hk, encodeHeld(capture.Held{Key: row.Key, Provider: row.Provider, Target: row.Target, Epoch: row.Epoch}))
}

// Outcome is what a provider call did.
type Outcome struct {
	// Err is the call's error; nil means success.
	Err error
	// Observed is the provider's state of the address after the call.
	Observed string
	// NotCalled: the call was never sent (the node was not ready to act
	// when it came to send it). The row goes back to approved, with Err
	// as its reason, so that a later run claims it, and gates it, again
	// as soon as the node is ready, rather than failing and waiting
	// RetryAfter: that wait is for a provider that failed, and none was
	// asked.
	NotCalled bool
	// LineRevision is the etcd line revision the call carried (see
	// capture.Row.LineRevision); zero for none.
	LineRevision int64
}

// Complete records the outcome of a running row. On success it also
// updates what the node holds (an assign or proxy-ARP start confirms the
// capture on the target; an unassign or stop from the held target ends it)
// and removes the row's marker, in the same transaction. A failed acquire
// leaves the capture recorded as maybe held: the call may have taken effect.
func (s *Store) Complete(key string, out Outcome, now time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error { return s.completeTx(tx, key, out, now) })
}

// Completion is one row's outcome for CompleteMany.
type Completion struct {
	Key     string
	Outcome Outcome
}

// CompleteMany records outcomes as Complete does, in one transaction, in
// order.
func (s *Store) CompleteMany(done []Completion, now time.Time) error {
	if len(done) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, c := range done {
			if err := s.completeTx(tx, c.Key, c.Outcome, now); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) completeTx(tx *bolt.Tx, key string, out Outcome, now time.Time) error {
	r := s.rowTx(tx)
	row, err := r.mustGet(key)
	if err != nil {
		return err
	}
	if row.State != capture.Running {
		return fmt.Errorf("row %s is %s, not running", key, row.State)
	}
	if out.NotCalled {
		row.State, row.Reason = capture.Approved, ""
		if out.Err != nil {
			row.Reason = out.Err.Error()
		}
		return r.put(&row, capture.Running)
	}
	row.DoneAt, row.Observed, row.LineRevision = now.UnixNano(), out.Observed, out.LineRevision
	if out.Err != nil {
		row.State, row.Reason = capture.Failed, out.Err.Error()
		return r.put(&row, capture.Running)
	}
	row.State, row.Reason = capture.Succeeded, ""
	if err := r.put(&row, capture.Running); err != nil {
		return err
	}
	held := tx.Bucket(bHeld)
	hk := keyBytes(row.Key)
	switch row.Kind {
	case capture.Assign, capture.ProxyARPStart:
		h := capture.Held{Key: row.Key, Provider: row.Provider, Target: row.Target, Epoch: row.Epoch, Confirmed: true}
		if err := held.Put(hk, encodeHeld(h)); err != nil {
			return err
		}
	case capture.Unassign, capture.ProxyARPStop:
		if v := held.Get(hk); v != nil {
			h, err := decodeHeld(row.Key, v)
			if err != nil {
				return err
			}
			// A release of another target (an older NIC) does not
			// end the capture on the current one.
			if h.Target == row.Target {
				if err := held.Delete(hk); err != nil {
					return err
				}
			}
		}
	}
	if !row.Kind.Acquire() {
		return tx.Bucket(bMarkers).Delete([]byte(key))
	}
	return nil
}

// Requeue sends rows that have been running longer than timeout back to
// approved: the node crashed or lost the call's answer. Provider calls are
// idempotent, and the claim runs the gate again.
func (s *Store) Requeue(now time.Time, timeout time.Duration) ([]string, error) {
	var out []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		for _, k := range r.indexed(capture.Running) {
			row, _, err := r.get(k)
			if err != nil {
				return err
			}
			if now.UnixNano()-row.ClaimedAt < int64(timeout) {
				continue
			}
			row.State = capture.Approved
			row.Reason = fmt.Sprintf("requeued after running for %s", time.Duration(now.UnixNano()-row.ClaimedAt))
			if err := r.put(&row, capture.Running); err != nil {
				return err
			}
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// Row returns one journal row.
func (s *Store) Row(key string) (capture.Row, error) {
	var row capture.Row
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		row, err = s.rowTx(tx).mustGet(key)
		return err
	})
	return row, err
}

// Filter selects journal rows; zero fields match everything.
type Filter struct {
	State capture.State
	Kind  capture.Kind
	Pool  string
}

// Rows returns the journal rows the filter selects, in import order.
func (s *Store) Rows(f Filter) ([]capture.Row, error) {
	var out []capture.Row
	err := s.db.View(func(tx *bolt.Tx) error {
		r := s.rowTx(tx)
		c := tx.Bucket(bSeq).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			row, ok, err := r.get(string(v))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("index names row %s, which is missing", v)
			}
			if (f.State == "" || row.State == f.State) && (f.Kind == "" || row.Kind == f.Kind) && (f.Pool == "" || row.Key.Pool == f.Pool) {
				out = append(out, row)
			}
		}
		return nil
	})
	return out, err
}

// Count returns how many rows are in each state.
func (s *Store) Count() (map[capture.State]int, error) {
	rows, err := s.Rows(Filter{})
	out := map[capture.State]int{}
	for _, r := range rows {
		out[r.State]++
	}
	return out, err
}
