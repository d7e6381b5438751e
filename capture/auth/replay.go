package auth

import (
	"container/heap"
	"crypto/sha256"
	"sync"
	"time"
)

type replayResult int

const (
	replayNew  replayResult = iota // recorded now
	replaySeen                     // already recorded and not expired
	replayFull                     // not seen, but no room to record it
)

// replayCache remembers accepted signatures until their window closes. It is
// bounded twice: entries leave when they expire, and a cap refuses new ones
// when every entry is still live.
type replayCache struct {
	mu      sync.Mutex
	seen    map[[sha256.Size]byte]struct{}
	expires expiryHeap
}

// add records sig, which may be replayed until exp, unless it is already
// recorded or the cache holds max live entries. Expired entries are dropped
// first, as of now. For replayFull it also returns how long until the
// earliest entry expires and makes room.
func (c *replayCache) add(sig [sha256.Size]byte, exp, now time.Time, max int) (replayResult, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evict(now)
	if _, ok := c.seen[sig]; ok {
		return replaySeen, 0
	}
	if len(c.seen) >= max {
		return replayFull, c.expires[0].exp.Sub(now)
	}
	if c.seen == nil {
		c.seen = make(map[[sha256.Size]byte]struct{})
	}
	c.seen[sig] = struct{}{}
	heap.Push(&c.expires, replayEntry{exp: exp, sig: sig})
	return replayNew, 0
}

// evict drops the entries whose window closed before now. A signature whose
// expiry equals now is kept, because a timestamp exactly Window old is still
// accepted.
func (c *replayCache) evict(now time.Time) {
	for len(c.expires) > 0 && c.expires[0].exp.Before(now) {
		e := heap.Pop(&c.expires).(replayEntry)
		delete(c.seen, e.sig)
	}
}

func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

type replayEntry struct {
	exp time.Time
	sig [sha256.Size]byte
}

// expiryHeap orders entries by expiry, earliest first. Expiries do not
// arrive in order, since timestamps may lie anywhere in the window.
type expiryHeap []replayEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp.Before(h[j].exp) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

func (h *expiryHeap) Push(x any) { *h = append(*h, x.(replayEntry)) }

func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
