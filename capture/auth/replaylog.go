package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ReplayLog persists the signatures a Verifier accepted, each until the
// window of its timestamp closes, so that a request captured before a
// restart is refused after it as it would have been before. It holds at
// most what the replay cache holds: entries are dropped once expired.
type ReplayLog struct {
	db *bolt.DB

	mu      sync.Mutex
	records int // since the last prune
}

var bReplay = []byte("replay")

// pruneEvery is how many records go by between drops of expired entries.
const pruneEvery = 1024

// OpenReplayLog opens (creating) the replay log at path and returns it with
// the signatures still live at now, for Verifier.Preload. fresh reports a
// log that did not exist or held nothing: the process cannot know what
// was accepted before it, and should refuse requests signed before its
// start (Verifier.NotBefore).
func OpenReplayLog(path string, now time.Time) (log *ReplayLog, live map[[sha256.Size]byte]time.Time, fresh bool, err error) {
	fi, err := os.Stat(path)
	fresh = errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, nil, false, fmt.Errorf("auth: open replay log %s: %w", path, err)
	}
	live = map[[sha256.Size]byte]time.Time{}
	err = db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bReplay) == nil {
			fresh = true
		}
		b, err := tx.CreateBucketIfNotExists(bReplay)
		if err != nil {
			return err
		}
		var expired [][]byte
		err = b.ForEach(func(k, v []byte) error {
			if len(k) != sha256.Size || len(v) != 8 {
				expired = append(expired, append([]byte(nil), k...))
				return nil
			}
			exp := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			if exp.Before(now) {
				expired = append(expired, append([]byte(nil), k...))
				return nil
			}
			live[[sha256.Size]byte(k)] = exp
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, nil, false, fmt.Errorf("auth: replay log %s: %w", path, err)
	}
	return &ReplayLog{db: db}, live, fresh, nil
}

// Record persists one accepted signature until it expires. Every
// pruneEvery records it also drops the entries that expired.
func (l *ReplayLog) Record(sig [sha256.Size]byte, expires time.Time) error {
	l.mu.Lock()
	l.records++
	prune := l.records >= pruneEvery
	if prune {
		l.records = 0
	}
	l.mu.Unlock()
	return l.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bReplay)
		if prune {
			// Drop what expired before now, on the wall clock: an entry
			// is only needed while a request could still be accepted.
			now := time.Now()
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(v) == 8 && time.Unix(0, int64(binary.BigEndian.Uint64(v))).Before(now) {
					if err := c.Delete(); err != nil {
						return err
					}
				}
			}
		}
		return b.Put(sig[:], binary.BigEndian.AppendUint64(nil, uint64(expires.UnixNano())))
	})
}

// Len is how many entries the log holds.
func (l *ReplayLog) Len() int {
	n := 0
	l.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bReplay).Stats().KeyN
		return nil
	})
	return n
}

// Close closes the log.
func (l *ReplayLog) Close() error { return l.db.Close() }
