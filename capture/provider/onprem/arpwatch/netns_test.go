//go:build linux

package arpwatch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/internal/testonly/l2labtest"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

// lab is a two-host lab with an on-prem driver on each host.
type lab struct {
	*l2lab.Lab
	drivers map[string]*onprem.Driver
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{Lab: l2labtest.New(t, l2lab.Options{Hosts: 2}), drivers: map[string]*onprem.Driver{}}
	for _, h := range l.Hosts() {
		err := l.Do(h, func() error {
			d, err := onprem.New(onprem.Options{LAN: l.LANDevice(), WorkloadDevice: l.WorkloadDevice(h), GARPRepeatAfter: -1})
			l.drivers[h] = d
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.drivers[h].Close() })
	}
	return l
}

// hold makes exactly the hosts given answer for the lab's address.
func (l *lab) hold(t *testing.T, hosts ...string) {
	t.Helper()
	r := provider.Request{NIC: l.LANDevice(), Address: l.Address()}
	for _, h := range l.Hosts() {
		var err error
		if slices.Contains(hosts, h) {
			err = l.drivers[h].Assign(t.Context(), r, false)
		} else {
			err = l.drivers[h].Unassign(t.Context(), r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// observe starts an observer of the lab's address in the observer's
// namespace, its rounds tied to replies through senders from the lab's
// spare addresses.
func (l *lab) observe(t *testing.T, interval time.Duration) *arpwatch.Observer {
	t.Helper()
	senders, err := l.SpareAddresses(5)
	if err != nil {
		t.Fatal(err)
	}
	var o *arpwatch.Observer
	err = l.Do(l.Observer(), func() error {
		var err error
		o, err = arpwatch.Observe(t.Context(), l.LANDevice(), []netip.Addr{l.Address()}, arpwatch.ObserveOptions{Interval: interval, Senders: senders})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// changes renders the report's changes of responders as sets in order,
// with a change to nobody left out when another follows within two rounds:
// a reply lost, or later than the observer waits for (a loaded machine),
// which a reader smooths; a longer silence is an outage and stays. It
// returns how many it left out.
func (l *lab) changes(rep arpwatch.AddressReport, interval time.Duration) ([]string, int) {
	var seq []string
	dropouts := 0
	for i, c := range rep.Changes {
		if len(c.To) == 0 && i+1 < len(rep.Changes) && rep.Changes[i+1].At-c.At <= 2*interval {
			dropouts++
			continue
		}
		if set := "[" + join(c.To) + "]"; len(seq) == 0 || seq[len(seq)-1] != set {
			seq = append(seq, set)
		}
	}
	return seq, dropouts
}

func (l *lab) macs(hosts ...string) string {
	var s []string
	for _, h := range hosts {
		s = append(s, l.MAC(h).String())
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func join(ms []net.HardwareAddr) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.String())
	}
	return strings.Join(s, " ")
}

func TestProbeCountsResponders(t *testing.T) {
	l := newLab(t)
	probe := func(ctx context.Context, iface string, addr netip.Addr, opts arpwatch.ProbeOptions) ([]net.HardwareAddr, error) {
		var got []net.HardwareAddr
		err := l.Do(l.Observer(), func() error {
			var err error
			got, err = arpwatch.Probe(ctx, iface, addr, opts)
			return err
		})
		return got, err
	}
	opts := arpwatch.ProbeOptions{Timeout: 300 * time.Millisecond}
	for _, tc := range []struct {
		name  string
		hosts []string
	}{
		{"none", nil},
		{"one", []string{"h2"}},
		{"split brain", []string{"h1", "h2"}},
		{"the other one", []string{"h1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.hold(t, tc.hosts...)
			got, err := probe(t.Context(), l.LANDevice(), l.Address(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if join(got) != l.macs(tc.hosts...) {
				t.Fatalf("responders %q, want %q", join(got), l.macs(tc.hosts...))
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		// An Ethernet interface without an IPv4 address (veth: not every
		// kernel has the dummy driver).
		if out, err := l.Command(l.Observer(), "ip", "link", "add", "bare0", "type", "veth", "peer", "name", "bare1").CombinedOutput(); err != nil {
			t.Fatalf("ip link add bare0: %v: %s", err, out)
		}
		for _, tc := range []struct {
			iface string
			addr  netip.Addr
			want  string
		}{
			{"eth0", netip.MustParseAddr("fd00::1"), "not an IPv4 address"},
			{"eth9", l.Address(), `interface "eth9"`},
			{"bare0", l.Address(), "bare0 has no IPv4 address"},
		} {
			_, err := probe(t.Context(), tc.iface, tc.addr, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Probe(%s, %s): %v, want an error containing %q", tc.iface, tc.addr, err, tc.want)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := probe(ctx, l.LANDevice(), l.Address(), arpwatch.ProbeOptions{Timeout: time.Minute})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Errorf("cancelled probe: %v after %s", err, time.Since(start))
		}
	})
}

// TestObserver watches a move that goes through a split brain: h1 holds,
// h2 acquires too, h1 releases. The report must show the three sets in
// order and about as much dual-responder time as the split lasted.
func TestObserver(t *testing.T) {
	l := newLab(t)
	const interval = 50 * time.Millisecond
	o := l.observe(t, interval)

	const split = 500 * time.Millisecond
	time.Sleep(3 * interval)
	l.hold(t, "h1")
	time.Sleep(6 * interval)
	// The split lasts at least from the end of the first hold to the
	// start of the second, and at most from the start of the first to
	// the end of the second: on a loaded machine both can stretch.
	splitFrom := time.Now()
	l.hold(t, "h1", "h2")
	splitIn := time.Now()
	time.Sleep(split)
	splitOut := time.Now()
	l.hold(t, "h2")
	splitTo := time.Now()
	time.Sleep(6 * interval)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	rep, ok := o.Report().Address(l.Address())
	if !ok {
		t.Fatal("no report for the address")
	}
	// The report records rounds as seen: a reply that came more than a
	// round late (a loaded machine delays the responder or the observer)
	// shows as a round with no responder, which a reader smooths.
	// Smoothed so, the changes are exactly h1, both, h2.
	seq, dropouts := l.changes(rep, interval)
	want := []string{"[" + l.macs("h1") + "]", "[" + l.macs("h1", "h2") + "]", "[" + l.macs("h2") + "]"}
	if !slices.Equal(seq, want) {
		t.Fatalf("responder changes %v (%d one- or two-round dropouts smoothed), want %v", seq, dropouts, want)
	}
	// The split is seen from the round after h2 acquired to the round in
	// which h1 released: within two rounds of its length, as the test
	// measured it (and less any rounds lost to dropouts).
	lo, hi := splitOut.Sub(splitIn), splitTo.Sub(splitFrom)
	if d := rep.DualResponder; d < lo-time.Duration(2+2*dropouts)*interval || d > hi+2*interval {
		t.Fatalf("dual-responder time %s, want the split's %s to %s", d, lo, hi)
	}
	if join(rep.Last) != l.macs("h2") {
		t.Fatalf("last responders %q, want h2", join(rep.Last))
	}
	// A loaded observer skips rounds rather than shorten them, so how
	// many it made depends on the machine; each phase needs one at least.
	if rep.Rounds < len(want) || rep.Observed < time.Duration(rep.Rounds)*interval {
		t.Fatalf("%d rounds observed over %s", rep.Rounds, rep.Observed)
	}
	t.Logf("%d rounds over %s; dual responders for %s (split held %s)", rep.Rounds, rep.Observed, rep.DualResponder, split)
}

// TestObserverLateHolder hands the address over, three times, from a
// holder that answers 1.5 rounds late (h1, through the lab's late
// responder) to one that answers at once (h2, the kernel's proxy-ARP), and
// back. The late holder stops right after a request, and h2 acquires at
// once: h2 answers the next round while h1's reply to the last one is
// still on its way and arrives in that same round. Counted where it
// arrives, that reply made a split brain nobody had; tied to the request
// it answers, it is credited to its own round, and no round has both.
//
// The hosts filter strictly (rp_filter=1, arp_filter=1), so the test also
// shows that the kernel answers requests from the spare addresses.
func TestObserverLateHolder(t *testing.T) {
	l := newLab(t)
	// Rounds of 100 ms leave h1's replies, 150 ms after each request, a
	// margin of 50 ms before they are too late even to be credited.
	const interval = 100 * time.Millisecond
	for _, h := range l.Hosts() {
		err := l.Do(h, func() error {
			for _, k := range []string{"conf/all/rp_filter", "conf/eth0/rp_filter", "conf/all/arp_filter", "conf/eth0/arp_filter"} {
				if err := os.WriteFile("/proc/sys/net/ipv4/"+k, []byte("1"), 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slow, err := l.StartLateResponder("h1", 3*interval/2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := slow.Close(); err != nil {
			t.Error(err)
		}
	})
	o := l.observe(t, interval)

	const handOvers = 3
	time.Sleep(6 * interval)
	for range handOvers {
		if _, err := slow.StopAfterNext(t.Context()); err != nil {
			t.Fatal(err)
		}
		l.hold(t, "h2")
		time.Sleep(6 * interval)
		// Back to h1: h2 lets go first, and h1 resumes a round later,
		// so that this way round nothing overlaps either. The late
		// responder decides when its goroutine reads a request, not when
		// the request arrived: resumed at once, a loaded one read a
		// request h2 had answered before letting go and answered it too
		// (CI beside a CPU hog: one round with both). The round or two
		// without a responder is a dropout the comparison below smooths.
		l.hold(t)
		time.Sleep(interval)
		slow.Resume()
		time.Sleep(6 * interval)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	rep, ok := o.Report().Address(l.Address())
	if !ok {
		t.Fatal("no report for the address")
	}
	seq, dropouts := l.changes(rep, interval)
	// h1 answers late by design, so a loaded machine (CI beside other
	// suites) can delay its replies past even the late credit for more
	// than two rounds: a stretch with no responder is a dropout however
	// long, never a wrong responder. What this test holds is the order of
	// the holders and that no round had two (DualResponder above).
	seq = slices.Compact(slices.DeleteFunc(seq, func(s string) bool { return s == "[]" }))
	var want []string
	for range handOvers {
		want = append(want, "["+l.macs("h1")+"]", "["+l.macs("h2")+"]")
	}
	want = append(want, "["+l.macs("h1")+"]")
	t.Logf("%d rounds over %s; dual responders for %s; %d replies late, %d unmatched (h1 answered %d); %d dropouts smoothed",
		rep.Rounds, rep.Observed, rep.DualResponder, rep.LateReplies, rep.UnmatchedReplies, slow.Answered(), dropouts)
	if rep.DualResponder != 0 {
		var eps []string
		for _, iv := range rep.Intervals {
			if len(iv.Responders) > 1 {
				eps = append(eps, fmt.Sprintf("%s-%s", iv.Start, iv.End))
			}
		}
		t.Fatalf("dual-responder time %s (%v) with never two holders", rep.DualResponder, eps)
	}
	if !slices.Equal(seq, want) {
		t.Fatalf("responder changes %v (%d one- or two-round dropouts smoothed), want %v", seq, dropouts, want)
	}
	// Every reply of h1's leaves after its round ended: the ones the
	// observer credited came late.
	if rep.LateReplies == 0 {
		t.Fatal("no reply was credited late: h1's rounds were not tied to their replies")
	}
}
