// Package liveness holds the rules by which a node decides that it may act:
// it is in contact with a majority of its cluster, a majority holds a
// recent heartbeat of it (so none of them can have found it stale and
// moved its addresses), and after anything that may have made it miss its
// peers' news — a start, a lapse of that cover — it has read a majority's
// records again. The rules are pure, as etcd's raft is: no goroutines, no
// clock, no I/O. Every time is passed in, read by the caller from the
// process's monotonic clock, and a clock that goes back is never taken to
// have refreshed anything.
package liveness

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrUncovered is Covered's error: the peers may have found this node
// stale since the time asked about.
var ErrUncovered = errors.New("not heard by a majority of the cluster within the contact window")

// Contact is one node's record of its cluster: when a batch from each peer
// last arrived, which of its own heartbeats each peer acknowledged, and
// whose records it has read since it may have missed news.
type Contact struct {
	cluster int // nodes, this one included
	peers   int
	window  time.Duration
	// latest is the latest time passed in: times before it are read as
	// it, so that a clock going back refreshes no contact and no cover.
	latest time.Time
	// heard is when a batch from each peer last arrived.
	heard map[string]time.Time
	// heardBy is, for each peer, when the newest heartbeat of this node
	// it acknowledged was made; gap the last time that cover ran out and
	// came back.
	heardBy map[string]time.Time
	gap     time.Time
	// caught are the peers whose records were read since missed happened.
	caught map[string]bool
	missed string
	// round counts the times caught was cleared: a read asked for in an
	// earlier round brings records made before the node missed news.
	round uint64
}

// New returns the contact record of a node in a cluster of cluster nodes
// (itself included) whose peers find a silent node stale after window
// (TTL plus promotion hold; 0 turns the cover off). A new record has just
// started: it has heard nobody and read nobody's records.
func New(cluster int, window time.Duration) *Contact {
	return &Contact{cluster: cluster, peers: max(cluster-1, 0), window: window,
		heard: map[string]time.Time{}, heardBy: map[string]time.Time{}, caught: map[string]bool{}, missed: "started"}
}

// now is t, or the latest time seen when t is earlier.
func (c *Contact) now(t time.Time) time.Time {
	if t.Before(c.latest) {
		return c.latest
	}
	c.latest = t
	return t
}

// Window is the contact window.
func (c *Contact) Window() time.Duration { return c.window }

// Heard records that a batch from peer arrived at at.
func (c *Contact) Heard(peer string, at time.Time) { c.heard[peer] = c.now(at) }

// InContact reports whether a majority of the cluster, this node
// included, was heard from within window of now: a node cut off from most
// of its peers, or stopped for longer than window, is not in contact until
// their news has reached it again.
func (c *Contact) InContact(now time.Time, window time.Duration) bool {
	now = c.now(now)
	heard := 1
	for _, t := range c.heard {
		if now.Sub(t) <= window {
			heard++
		}
	}
	return heard >= c.cluster/2+1
}

// cover is the time up to which the peers' acknowledgements show this node
// fresh to a majority: a majority, this node included, holds a heartbeat
// of it made at cover or later. Zero when no majority does; with no peer
// needed, now.
func (c *Contact) cover(now time.Time) time.Time {
	need := c.cluster/2 + 1 - 1
	if need <= 0 {
		return now
	}
	if len(c.heardBy) < need {
		return time.Time{}
	}
	ts := slices.Collect(maps.Values(c.heardBy))
	slices.SortFunc(ts, func(a, b time.Time) int { return b.Compare(a) })
	return ts[need-1]
}

// Acked records that peer acknowledged, at now, a heartbeat of this node
// made at made. It reports whether that ended a lapse of the cover: then
// the peers may have found this node stale meanwhile and moved its lines,
// so passes begun before it fail (see Covered) and the node must read its
// peers' records again before it acts (see Ready).
func (c *Contact) Acked(peer string, made, now time.Time) bool {
	now = c.now(now)
	if !made.After(c.heardBy[peer]) {
		return false
	}
	before := c.cover(now)
	c.heardBy[peer] = made
	after := c.cover(now)
	if c.window <= 0 || after.Equal(before) || !(before.IsZero() || now.Sub(before) >= c.window) {
		return false
	}
	c.gap = now
	if before.IsZero() {
		// The first cover of this life. Until it came, no majority held a
		// heartbeat of this life: the peers may have found this node
		// stale (by the heartbeats of its last life) and moved its lines
		// at any moment since it started, after records it read
		// meanwhile were made. Those reads do not count; with none,
		// Ready already waits for the records a start calls for.
		if len(c.caught) == 0 {
			c.round++ // an answer on its way was made before the cover
			return false
		}
		c.Missed("started and was not heard by a majority until after it read its peers' records")
		return true
	}
	c.Missed("was not heard by a majority for longer than the contact window")
	return true
}

// Covered reports whether the peers cannot have found this node stale
// since start: a majority acknowledged heartbeats of it made within the
// window of every moment from start until now. The measure starts at the
// making of the newest heartbeat a majority acknowledged, not at the ask:
// the peers judge a node by the heartbeats they hold of it. A cover that
// ran out in between fails every pass that began before it came back.
func (c *Contact) Covered(start, now time.Time) error {
	if c.window <= 0 {
		return nil
	}
	now = c.now(now)
	cv := c.cover(now)
	switch {
	case cv.IsZero():
		return ErrUncovered
	case now.Sub(cv) >= c.window:
		return fmt.Errorf("%w: the newest heartbeat a majority holds was made %s ago", ErrUncovered, now.Sub(cv).Round(time.Millisecond))
	case !c.gap.IsZero() && !start.After(c.gap):
		return fmt.Errorf("%w: the cover ran out after this pass began (%s ago) and came back %s ago", ErrUncovered, now.Sub(start).Round(time.Millisecond), now.Sub(c.gap).Round(time.Millisecond))
	}
	return nil
}

// Missed says that the node may have missed its peers' news (why says
// how): it must read a majority's records before it acts again.
func (c *Contact) Missed(why string) {
	if c.peers == 0 {
		return
	}
	clear(c.caught)
	c.missed = why
	c.round++
}

// Read records that peer's records were read (a synced peer's: one that
// lost its state itself is not counted by the caller).
func (c *Contact) Read(peer string) { c.caught[peer] = true }

// Round names the current round of reads: it changes whenever the node
// may have missed news (Missed, Forget). A caller that asks a peer for its
// records notes the round first and counts the answer (ReadIn) only if the
// round has not changed since: an answer made before the node missed news
// says nothing of that news, however late it arrives.
func (c *Contact) Round() uint64 { return c.round }

// ReadIn records that peer's records, asked for in round, were read, if
// round is still the current one, and reports whether it was.
func (c *Contact) ReadIn(peer string, round uint64) bool {
	if round != c.round {
		return false
	}
	c.caught[peer] = true
	return true
}

// Unread forgets that peer's records were read: the caller counted the
// answer of a peer that turned out not to count (one that lost its state,
// read while this node was syncing).
func (c *Contact) Unread(peer string) { delete(c.caught, peer) }

// HasRead reports whether peer's records were read since the node last
// may have missed news.
func (c *Contact) HasRead(peer string) bool { return c.caught[peer] }

// CatchUpQuorum is how many peers' records a node that kept its state
// reads after it may have missed news: with its own log, a majority of the
// cluster, which meets every majority that acknowledged a record. A
// heartbeat says a peer is there, not that everything it sent has arrived.
func (c *Contact) CatchUpQuorum() int { return c.cluster / 2 }

// Ready reports whether the node has read enough records since it last
// may have missed news; why says what it waits for.
func (c *Contact) Ready() (ok bool, why string) {
	need := c.CatchUpQuorum()
	if c.peers == 0 || len(c.caught) >= need {
		return true, ""
	}
	return false, fmt.Sprintf("this node %s and may have missed its peers' news: it acts for nothing until it has read the records of %d synced peers; read %d %v",
		c.missed, need, len(c.caught), slices.Sorted(maps.Keys(c.caught)))
}

// Reason is the last reason the node may have missed news.
func (c *Contact) Reason() string { return c.missed }

// Forget clears the records read (the node lost its state: it syncs
// anew).
func (c *Contact) Forget() {
	clear(c.caught)
	c.round++
}
