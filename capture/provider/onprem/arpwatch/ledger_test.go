package arpwatch

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	send0 = netip.MustParseAddr("10.0.0.201")
	send1 = netip.MustParseAddr("10.0.0.202")
	send2 = netip.MustParseAddr("10.0.0.203")
	other = netip.MustParseAddr("10.0.0.7")
)

// arrival is a reply arriving in a round's window: ip at mac, answering
// a request from target.
type arrival struct {
	ip, target netip.Addr
	mac        net.HardwareAddr
}

// feed runs 100ms rounds k = 0, 1, ... (skipping those not in ks) through
// a ledger, with the replies arrive[k] arriving in round k's window, into
// a Tally, and returns the senders of the rounds and the report. Tied, one
// round more runs, with no replies, so that the last one is recorded.
func feed(t *testing.T, senders []netip.Addr, ks []int, arrive map[int][]arrival) ([]netip.Addr, Report) {
	t.Helper()
	l := newLedger([]netip.Addr{addrA}, senders)
	var tl Tally
	var used []netip.Addr
	add := func(rs []Round) {
		for _, r := range rs {
			if err := tl.Add(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range ks {
		r := round(addrA, k)
		used = append(used, l.begin(r.Start, r.End))
		for _, a := range arrive[k] {
			l.credit(a.ip, a.target, a.mac)
		}
		add(l.endWindow())
	}
	if len(senders) > 0 && len(ks) > 0 {
		// Tied, the last round is held until the next one's window
		// ends.
		r := round(addrA, ks[len(ks)-1]+1)
		l.begin(r.Start, r.End)
		add(l.endWindow())
	}
	return used, tl.Report()
}

// counts renders each round's late and unmatched replies, as interval
// starts: "late 0s:1 unmatched 200ms:1".
func counts(rs []Round) string {
	var late, unmatched []string
	for _, r := range rs {
		if r.Late > 0 {
			late = append(late, fmt.Sprintf("%s:%d", r.Start, r.Late))
		}
		if r.Unmatched > 0 {
			unmatched = append(unmatched, fmt.Sprintf("%s:%d", r.Start, r.Unmatched))
		}
	}
	return "late " + strings.Join(late, ",") + " unmatched " + strings.Join(unmatched, ",")
}

// The hand-over CI saw: h2 held and answers every request 1.5 rounds late;
// it stops after round 2's request, and h1 answers from round 3 on, at
// once. The late reply to round 2 arrives in round 3, beside h1's.
func handOver(senders []netip.Addr) map[int][]arrival {
	sender := func(k int) netip.Addr {
		if len(senders) == 0 {
			return netip.Addr{}
		}
		return senders[k%len(senders)]
	}
	arrive := map[int][]arrival{}
	for k := 0; k <= 2; k++ {
		arrive[k+1] = append(arrive[k+1], arrival{addrA, sender(k), macH2})
	}
	for k := 3; k <= 5; k++ {
		arrive[k] = append(arrive[k], arrival{addrA, sender(k), macH1})
	}
	return arrive
}

func TestLedgerTiesLateReplies(t *testing.T) {
	senders := []netip.Addr{send0, send1, send2}
	used, rep := feed(t, senders, []int{0, 1, 2, 3, 4, 5}, handOver(senders))
	if fmt.Sprint(used) != fmt.Sprint([]netip.Addr{send0, send1, send2, send0, send1, send2}) {
		t.Fatalf("senders %v, want the pool in turn", used)
	}
	a, _ := rep.Address(addrA)
	want := "[0s-300ms h2][300ms-600ms h1] 0s:[]→[h2] 300ms:[h2]→[h1]"
	if got := show(a); got != want || a.DualResponder != 0 {
		t.Fatalf("tied:\n got %s, dual %s\nwant %s, dual 0s", got, a.DualResponder, want)
	}
	if a.LateReplies != 3 || a.UnmatchedReplies != 0 || a.Rounds != 6 {
		t.Fatalf("%d late, %d unmatched replies over %d rounds; want 3, 0, 6", a.LateReplies, a.UnmatchedReplies, a.Rounds)
	}

	// Untied, the same replies make round 3 a split brain, and round 0 a
	// silence, that never were.
	_, rep = feed(t, nil, []int{0, 1, 2, 3, 4, 5}, handOver(nil))
	a, _ = rep.Address(addrA)
	want = "[0s-100ms ][100ms-300ms h2][300ms-400ms h1,h2][400ms-600ms h1] 100ms:[]→[h2] 300ms:[h2]→[h1,h2] 400ms:[h1,h2]→[h1]"
	if got := show(a); got != want || a.DualResponder != 100*ms || a.LateReplies != 0 {
		t.Fatalf("untied:\n got %s, dual %s, %d late\nwant %s, dual 100ms, 0 late", got, a.DualResponder, a.LateReplies, want)
	}
}

// A reply two rounds late names a sender neither open round has, and is
// dropped; so are replies to nobody's request and for other addresses.
func TestLedgerDropsOlderReplies(t *testing.T) {
	senders := []netip.Addr{send0, send1, send2}
	l := newLedger([]netip.Addr{addrA}, senders)
	var rounds []Round
	for k := range 5 {
		r := round(addrA, k)
		s := l.begin(r.Start, r.End)
		switch k {
		case 0:
			l.credit(addrA, s, macH1)
		case 2:
			l.credit(addrA, send0, macH2) // round 0's, two rounds late
			l.credit(addrA, other, macH2) // someone else's request
			l.credit(addrB, s, macH2)     // not observed
			l.credit(addrA, s, macH1)
		}
		rounds = append(rounds, l.endWindow()...)
	}
	var got []string
	for _, r := range rounds {
		got = append(got, fmt.Sprintf("%s:%d", r.Start, len(r.Responders)))
	}
	if strings.Join(got, " ") != "0s:1 100ms:0 200ms:1 300ms:0" {
		t.Fatalf("rounds %v, want 0s:1 100ms:0 200ms:1 300ms:0", got)
	}
	if c := counts(rounds); c != "late  unmatched 200ms:2" {
		t.Fatalf("%s, want two unmatched replies in round 2", c)
	}
}

// Rounds the observer skips do not make two open rounds share a sender:
// the pool turns per round begun.
func TestLedgerSkippedRounds(t *testing.T) {
	senders := []netip.Addr{send0, send1, send2}
	// Round 1's reply arrives while round 4 runs (rounds 2 and 3 were
	// skipped): still round 1's.
	used, rep := feed(t, senders, []int{0, 1, 4, 5}, map[int][]arrival{
		0: {{addrA, send0, macH1}},
		4: {{addrA, send1, macH1}, {addrA, send2, macH1}},
		5: {{addrA, send0, macH1}},
	})
	if fmt.Sprint(used) != fmt.Sprint([]netip.Addr{send0, send1, send2, send0}) {
		t.Fatalf("senders %v, want the pool in turn", used)
	}
	a, _ := rep.Address(addrA)
	want := "[0s-200ms h1][400ms-600ms h1] 0s:[]→[h1]"
	if got := show(a); got != want || a.LateReplies != 1 || a.UnmatchedReplies != 0 {
		t.Fatalf("\n got %s, %d late, %d unmatched\nwant %s, 1 late, 0 unmatched", got, a.LateReplies, a.UnmatchedReplies, want)
	}
}
