//go:build linux

package l2lab_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/internal/testonly/l2labtest"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

func TestSpareAddresses(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 2})
	got, err := l.SpareAddresses(3)
	if err != nil {
		t.Fatal(err)
	}
	lan := netip.PrefixFrom(l.IP("h1"), 24).Masked()
	base := lan.Addr().As4()
	for i, a := range got {
		want := base
		want[3] = byte(201 + i)
		if a != netip.AddrFrom4(want) {
			t.Fatalf("spare addresses %v, want .201 to .203 of %s", got, lan)
		}
		for _, n := range []string{"h1", "h2", "obs"} {
			if a == l.IP(n) {
				t.Fatalf("spare address %s is %s's", a, n)
			}
		}
		if a == l.Address() {
			t.Fatalf("spare address %s is the mobile address", a)
		}
	}
	all, err := l.SpareAddresses(53)
	if err != nil || all[52].As4()[3] != 253 {
		t.Fatalf("53 spare addresses: %v, %v; want the last at .253 (.254 is the root namespace's)", all, err)
	}
	for _, n := range []int{0, -1, 54} {
		if _, err := l.SpareAddresses(n); err == nil || !strings.Contains(err.Error(), "1 to 53") {
			t.Errorf("SpareAddresses(%d): %v, want an error naming 1 to 53", n, err)
		}
	}
}

// TestLateResponder: the responder answers for the mobile address with its
// host's MAC, never before its delay; after StopAfterNext it answers no
// more, until Resume.
func TestLateResponder(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 2})
	if _, err := l.StartLateResponder("h9", 0); err == nil || !strings.Contains(err.Error(), `"h9"`) {
		t.Errorf("a responder on h9: %v", err)
	}
	if _, err := l.StartLateResponder("h1", -time.Second); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative delay: %v", err)
	}
	const delay = 300 * time.Millisecond
	r, err := l.StartLateResponder("h1", delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	probe := func(timeout time.Duration) string {
		t.Helper()
		var got []net.HardwareAddr
		err := l.Do(l.Observer(), func() error {
			var err error
			got, err = arpwatch.Probe(t.Context(), l.LANDevice(), l.Address(), arpwatch.ProbeOptions{Count: 1, Timeout: timeout})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, m := range got {
			s = append(s, m.String())
		}
		return strings.Join(s, " ")
	}
	// Waiting less than the delay hears nothing; waiting longer hears h1.
	if got := probe(delay / 2); got != "" {
		t.Fatalf("responders %q before the delay", got)
	}
	if got := probe(delay + time.Second); got != l.MAC("h1").String() {
		t.Fatalf("responders %q, want h1 (%s)", got, l.MAC("h1"))
	}

	stopped := make(chan error, 1)
	go func() {
		_, err := r.StopAfterNext(t.Context())
		stopped <- err
	}()
	// StopAfterNext waits for the next request, which may come before
	// or after it began waiting: probe until it returns.
	deadline := time.Now().Add(10 * time.Second)
	for done := false; !done; {
		probe(10 * time.Millisecond)
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-time.After(50 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("StopAfterNext did not return while requests came")
			}
		}
	}
	if _, err := r.StopAfterNext(t.Context()); err == nil || !strings.Contains(err.Error(), "stopped already") {
		t.Fatalf("StopAfterNext when stopped: %v", err)
	}
	// Let the last reply due go out, then nothing more comes.
	time.Sleep(delay + 200*time.Millisecond)
	n := r.Answered()
	if got := probe(delay + 300*time.Millisecond); got != "" {
		t.Fatalf("responders %q after StopAfterNext", got)
	}
	if r.Answered() != n {
		t.Fatalf("answered %d requests after stopping", r.Answered()-n)
	}
	r.Resume()
	if got := probe(delay + time.Second); got != l.MAC("h1").String() || r.Answered() != n+1 {
		t.Fatalf("after Resume: responders %q, %d answered; want h1, %d", got, r.Answered(), n+1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.StopAfterNext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("StopAfterNext with a cancelled context: %v", err)
	}
	if got := probe(delay + 300*time.Millisecond); got != "" {
		t.Fatalf("responders %q after a cancelled StopAfterNext", got)
	}
}
