package arpwatch

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// A Round is one probe of one address: the requests went out at Start, the
// next round's at End, and Responders answered. Which replies those are
// depends on the observer: the Observer without ObserveOptions.Senders
// counts the replies that arrived until End; with Senders, the replies
// that answered this round's requests, arriving until End or, Late, in the
// interval after it. Times are offsets from the start of the observation,
// on a monotonic clock.
type Round struct {
	Address    netip.Addr
	Start, End time.Duration
	Responders []net.HardwareAddr
	// Late is how many of the replies counted arrived after End, and
	// Unmatched how many replies for the address arrived in this round's
	// window but answered no round still open (from longer ago, or not
	// to a request of the observer's), which were dropped. Both stay zero
	// when replies are not tied to rounds.
	Late, Unmatched int
}

// An Interval is a stretch of consecutive rounds of one address with the
// same set of responders.
type Interval struct {
	Start, End time.Duration
	Responders []net.HardwareAddr
}

// A Change is a round whose set of responders differs from the round
// before: at At (the round's start), From became To. The first round of an
// address counts as a change from nothing when anyone answered it.
type Change struct {
	At       time.Duration
	From, To []net.HardwareAddr
}

// AddressReport is what a Tally knows about one address.
type AddressReport struct {
	Address netip.Addr
	// Rounds is the number of rounds recorded, and Observed the time they
	// cover (gaps between rounds excluded).
	Rounds   int
	Observed time.Duration
	// DualResponder is the total time of the rounds in which more than
	// one hardware address answered: split brain, seen from the LAN.
	DualResponder time.Duration
	// Intervals cover the rounds in order; a new one starts when the
	// responders change or when a round does not start where the one
	// before ended (the observer fell behind).
	Intervals []Interval
	Changes   []Change
	// LateReplies and UnmatchedReplies add up the rounds' Late and
	// Unmatched: how often a responder was slower than a round, and how
	// often slower than two (or answered someone else).
	LateReplies, UnmatchedReplies int
	// Last is the responders of the latest round.
	Last []net.HardwareAddr
}

// Report is a Tally's summary, one entry per address, sorted by address.
type Report struct {
	Addresses []AddressReport
}

// Address returns the report of addr, if it was observed.
func (r Report) Address(addr netip.Addr) (AddressReport, bool) {
	i := slices.IndexFunc(r.Addresses, func(a AddressReport) bool { return a.Address == addr })
	if i < 0 {
		return AddressReport{}, false
	}
	return r.Addresses[i], true
}

// Tally aggregates rounds into a Report. It does no I/O and reads no
// clock: time arrives with the rounds. The zero value is ready; it is not
// safe for concurrent use.
type Tally struct {
	addrs map[netip.Addr]*AddressReport
}

// Add records a round. Rounds of one address must come in order and must
// not overlap; Add refuses one that does, or whose End precedes its Start.
func (t *Tally) Add(r Round) error {
	if !r.Address.IsValid() {
		return fmt.Errorf("arpwatch: round without an address")
	}
	if r.End < r.Start {
		return fmt.Errorf("arpwatch: round of %s ends at %s before it starts at %s", r.Address, r.End, r.Start)
	}
	if r.Late < 0 || r.Unmatched < 0 {
		return fmt.Errorf("arpwatch: round of %s at %s: negative reply counts (%d late, %d unmatched)", r.Address, r.Start, r.Late, r.Unmatched)
	}
	if t.addrs == nil {
		t.addrs = map[netip.Addr]*AddressReport{}
	}
	a := t.addrs[r.Address]
	if a == nil {
		a = &AddressReport{Address: r.Address}
		t.addrs[r.Address] = a
	}
	set := normalize(r.Responders)
	if n := len(a.Intervals); n > 0 && r.Start < a.Intervals[n-1].End {
		return fmt.Errorf("arpwatch: round of %s at %s starts before the previous one ended (%s)", r.Address, r.Start, a.Intervals[n-1].End)
	}

	changed := a.Rounds == 0 && len(set) > 0 || a.Rounds > 0 && !sameMACs(set, a.Last)
	if changed {
		a.Changes = append(a.Changes, Change{At: r.Start, From: cloneMACs(a.Last), To: cloneMACs(set)})
	}
	n := len(a.Intervals)
	if n > 0 && !changed && a.Intervals[n-1].End == r.Start {
		a.Intervals[n-1].End = r.End
	} else {
		a.Intervals = append(a.Intervals, Interval{Start: r.Start, End: r.End, Responders: cloneMACs(set)})
	}
	a.Rounds++
	a.Observed += r.End - r.Start
	a.LateReplies += r.Late
	a.UnmatchedReplies += r.Unmatched
	if len(set) > 1 {
		a.DualResponder += r.End - r.Start
	}
	a.Last = set
	return nil
}

// Report returns what the tally has recorded so far; the report shares
// nothing with the tally.
func (t *Tally) Report() Report {
	var r Report
	for _, a := range t.addrs {
		c := *a
		c.Intervals = slices.Clone(a.Intervals)
		for i := range c.Intervals {
			c.Intervals[i].Responders = cloneMACs(c.Intervals[i].Responders)
		}
		c.Changes = slices.Clone(a.Changes)
		for i := range c.Changes {
			c.Changes[i].From = cloneMACs(c.Changes[i].From)
			c.Changes[i].To = cloneMACs(c.Changes[i].To)
		}
		c.Last = cloneMACs(a.Last)
		r.Addresses = append(r.Addresses, c)
	}
	slices.SortFunc(r.Addresses, func(a, b AddressReport) int { return a.Address.Compare(b.Address) })
	return r
}

// normalize returns the distinct addresses of ms, sorted, in a new slice.
func normalize(ms []net.HardwareAddr) []net.HardwareAddr {
	out := cloneMACs(ms)
	sortMACs(out)
	return slices.CompactFunc(out, func(a, b net.HardwareAddr) bool { return bytes.Equal(a, b) })
}

func sameMACs(a, b []net.HardwareAddr) bool {
	return slices.EqualFunc(a, b, func(x, y net.HardwareAddr) bool { return bytes.Equal(x, y) })
}

// cloneMACs copies the list and every address in it; nil stays nil.
func cloneMACs(ms []net.HardwareAddr) []net.HardwareAddr {
	if ms == nil {
		return nil
	}
	out := make([]net.HardwareAddr, len(ms))
	for i, m := range ms {
		out[i] = slices.Clone(m)
	}
	return out
}
