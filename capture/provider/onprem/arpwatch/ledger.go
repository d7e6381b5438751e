package arpwatch

import (
	"net"
	"net/netip"
	"slices"
	"time"
)

// ledger ties replies to the rounds they answer, between the Observer's
// socket and its Tally. Like the Tally it does no I/O and reads no clock:
// the Observer says when a round begins and when its window ends, and
// hands over each reply as it arrives.
//
// Untied (no senders), a reply counts for the round in whose window it
// arrives, and a round is done when its window ends.
//
// Tied, each round sends from the next address of the pool, in turn, and
// a reply counts for the round whose sender its target protocol address
// names: the current round, or the one before, which stays open for one
// more window after its own so that a reply up to one interval late is
// still credited to it. A reply naming neither is dropped and counted as
// unmatched: crediting it anywhere could only invent a responder (or an
// overlap of two) in a round it did not answer. Consecutive rounds never
// share a sender, and with three or more senders the round before the
// previous one has a sender neither open round has, so that a reply up to
// len(senders)-1 rounds late cannot be mistaken for a newer round's.
type ledger struct {
	addrs   []netip.Addr
	senders []netip.Addr
	// next is the index in senders of the next round's sender. It counts
	// the rounds begun, not the rounds of the schedule, so that rounds
	// the Observer skips cannot make two open rounds share a sender.
	next int
	// held is the round whose window ended last, kept open while the
	// window of cur runs (tied only).
	held, cur *openRound
}

// openRound is a round that can still be credited with replies.
type openRound struct {
	start, end time.Duration
	sender     netip.Addr
	seen       map[netip.Addr][]net.HardwareAddr
	late       map[netip.Addr]int
	unmatched  map[netip.Addr]int
}

func newLedger(addrs, senders []netip.Addr) *ledger {
	return &ledger{addrs: slices.Clone(addrs), senders: slices.Clone(senders)}
}

func (l *ledger) tied() bool { return len(l.senders) > 0 }

// begin opens the round whose window runs from start to end and returns
// the sender protocol address its requests must carry; the zero Addr when
// untied (the interface's own address then). A round still in its window
// is abandoned: its window did not end.
func (l *ledger) begin(start, end time.Duration) netip.Addr {
	r := &openRound{start: start, end: end, seen: map[netip.Addr][]net.HardwareAddr{},
		late: map[netip.Addr]int{}, unmatched: map[netip.Addr]int{}}
	if l.tied() {
		r.sender = l.senders[l.next]
		l.next = (l.next + 1) % len(l.senders)
	}
	l.cur = r
	return r.sender
}

// credit records a reply that arrived in the current round's window: ip
// is at mac, in answer to a request from target. Replies for addresses
// not observed, and any before the first begin, are ignored.
func (l *ledger) credit(ip, target netip.Addr, mac net.HardwareAddr) {
	if l.cur == nil || !slices.Contains(l.addrs, ip) {
		return
	}
	switch {
	case !l.tied() || target == l.cur.sender:
		l.cur.seen[ip] = append(l.cur.seen[ip], slices.Clone(mac))
	case l.held != nil && target == l.held.sender:
		l.held.seen[ip] = append(l.held.seen[ip], slices.Clone(mac))
		l.held.late[ip]++
	default:
		l.cur.unmatched[ip]++
	}
}

// endWindow ends the current round's window and returns the rounds that
// can take no more replies, one per address, for the Tally: untied, the
// current round; tied, the one before it (the current one is held).
func (l *ledger) endWindow() []Round {
	if l.cur == nil {
		return nil
	}
	var done *openRound
	if l.tied() {
		done, l.held = l.held, l.cur
	} else {
		done = l.cur
	}
	l.cur = nil
	return l.rounds(done)
}

func (l *ledger) rounds(r *openRound) []Round {
	if r == nil {
		return nil
	}
	out := make([]Round, 0, len(l.addrs))
	for _, a := range l.addrs {
		out = append(out, Round{Address: a, Start: r.start, End: r.end, Responders: r.seen[a],
			Late: r.late[a], Unmatched: r.unmatched[a]})
	}
	return out
}
