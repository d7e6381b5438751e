//go:build linux

package arpwatch_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/internal/l2lab"
	"github.com/ipfence/ipfence/verify/arpwatch"
)

// lab is a two-host lab with an on-prem driver on each host.
type lab struct {
	*l2lab.Lab
	drivers map[string]*onprem.Driver
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{Lab: l2lab.ForTest(t, l2lab.Options{Hosts: 2}), drivers: map[string]*onprem.Driver{}}
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
	var o *arpwatch.Observer
	err := l.Do(l.Observer(), func() error {
		var err error
		o, err = arpwatch.Observe(t.Context(), l.LANDevice(), []netip.Addr{l.Address()}, arpwatch.ObserveOptions{Interval: interval})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })

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
	// The report records rounds as seen: a reply that came a round late
	// (a loaded machine delays the responder or the observer past the
	// round's end) shows as a round or two with no responder, which a
	// reader smooths. Smoothed so, the changes are exactly h1, both, h2;
	// a longer silence would be a real outage and stays in the sequence.
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
