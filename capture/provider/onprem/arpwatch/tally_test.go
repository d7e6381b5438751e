package arpwatch

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	addrA = netip.MustParseAddr("10.0.0.200")
	addrB = netip.MustParseAddr("10.0.0.201")
	macH1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macH2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

const ms = time.Millisecond

// round is the k-th 100ms round of addr.
func round(addr netip.Addr, k int, macs ...net.HardwareAddr) Round {
	return Round{Address: addr, Start: time.Duration(k) * 100 * ms, End: time.Duration(k+1) * 100 * ms, Responders: macs}
}

// show renders intervals and changes compactly: [0s-200ms h1] and
// 100ms:[]→[h1].
func show(a AddressReport) string {
	name := func(ms []net.HardwareAddr) string {
		var s []string
		for _, m := range ms {
			s = append(s, "h"+fmt.Sprint(m[5]))
		}
		return strings.Join(s, ",")
	}
	var b strings.Builder
	for _, iv := range a.Intervals {
		fmt.Fprintf(&b, "[%s-%s %s]", iv.Start, iv.End, name(iv.Responders))
	}
	b.WriteString(" ")
	for _, c := range a.Changes {
		fmt.Fprintf(&b, "%s:[%s]→[%s] ", c.At, name(c.From), name(c.To))
	}
	return strings.TrimSpace(b.String())
}

func TestTallySplitBrainAndMove(t *testing.T) {
	var tl Tally
	rounds := []Round{
		round(addrA, 0),
		round(addrA, 1, macH1),
		round(addrA, 2, macH1),
		// Both answer, in any order and with repeats.
		round(addrA, 3, macH2, macH1, macH2),
		round(addrA, 4, macH1, macH2),
		round(addrA, 5, macH2),
		round(addrB, 0, macH2),
	}
	for _, r := range rounds {
		if err := tl.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rep := tl.Report()
	if len(rep.Addresses) != 2 || rep.Addresses[0].Address != addrA || rep.Addresses[1].Address != addrB {
		t.Fatalf("addresses %+v, want %s then %s", rep.Addresses, addrA, addrB)
	}
	a, _ := rep.Address(addrA)
	if a.Rounds != 6 || a.Observed != 600*ms || a.DualResponder != 200*ms {
		t.Fatalf("rounds %d, observed %s, dual %s; want 6, 600ms, 200ms", a.Rounds, a.Observed, a.DualResponder)
	}
	want := "[0s-100ms ][100ms-300ms h1][300ms-500ms h1,h2][500ms-600ms h2] 100ms:[]→[h1] 300ms:[h1]→[h1,h2] 500ms:[h1,h2]→[h2]"
	if got := show(a); got != want {
		t.Fatalf("address A:\n got %s\nwant %s", got, want)
	}
	if len(a.Last) != 1 || a.Last[0].String() != macH2.String() {
		t.Fatalf("last responders %v, want h2", a.Last)
	}
	b, _ := rep.Address(addrB)
	if got := show(b); got != "[0s-100ms h2] 0s:[]→[h2]" || b.DualResponder != 0 {
		t.Fatalf("address B: %s, dual %s", got, b.DualResponder)
	}
	if _, ok := rep.Address(netip.MustParseAddr("10.0.0.9")); ok {
		t.Fatal("report of an address never observed")
	}
}

// A gap (the observer fell behind) splits an interval without being a
// change; a silent round between two answered ones is two changes.
func TestTallyGapsAndSilence(t *testing.T) {
	var tl Tally
	for _, r := range []Round{
		round(addrA, 0, macH1),
		round(addrA, 2, macH1), // round 1 missing
		round(addrA, 3),        // h1 silent once
		round(addrA, 4, macH1),
	} {
		if err := tl.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := tl.Report().Address(addrA)
	want := "[0s-100ms h1][200ms-300ms h1][300ms-400ms ][400ms-500ms h1] 0s:[]→[h1] 300ms:[h1]→[] 400ms:[]→[h1]"
	if got := show(a); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if a.Observed != 400*ms || a.DualResponder != 0 {
		t.Fatalf("observed %s, dual %s", a.Observed, a.DualResponder)
	}
}

func TestTallyRefuses(t *testing.T) {
	var tl Tally
	if err := tl.Add(round(addrA, 2, macH1)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Round{
		round(addrA, 1, macH1),                           // before the last one
		{Address: addrA, Start: 250 * ms, End: 350 * ms}, // overlaps
		{Address: addrA, Start: 500 * ms, End: 400 * ms}, // ends before it starts
		{Start: 0, End: ms},                              // no address
		{Address: addrA, Start: 300 * ms, End: 400 * ms, Late: -1},
		{Address: addrA, Start: 300 * ms, End: 400 * ms, Unmatched: -1},
	} {
		if err := tl.Add(r); err == nil {
			t.Errorf("Add(%+v): no error", r)
		}
	}
	if a, _ := tl.Report().Address(addrA); a.Rounds != 1 {
		t.Fatalf("refused rounds were recorded: %d rounds", a.Rounds)
	}
}

// The report shares nothing with the tally or the rounds it was given.
func TestTallyCopies(t *testing.T) {
	var tl Tally
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	if err := tl.Add(round(addrA, 0, mac)); err != nil {
		t.Fatal(err)
	}
	mac[5] = 9
	r1 := tl.Report()
	r1.Addresses[0].Last[0][5] = 7
	r1.Addresses[0].Intervals[0].Responders[0][5] = 7
	r1.Addresses[0].Changes[0].To[0][5] = 7
	a, _ := tl.Report().Address(addrA)
	if got := show(a); got != "[0s-100ms h1] 0s:[]→[h1]" || a.Last[0][5] != 1 {
		t.Fatalf("report changed through aliases: %s, last %v", got, a.Last)
	}
}
