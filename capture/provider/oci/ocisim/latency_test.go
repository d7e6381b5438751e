package ocisim_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/simfault"
)

// timed makes a call that waits its latency on a hand timer, ends the
// wait, and returns its length and the call's error.
func timed(t *testing.T, waits <-chan ocisim.Wait, f func() error) (time.Duration, error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	var w ocisim.Wait
	select {
	case w = <-waits:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never began to wait out a latency")
	}
	w.Fire <- time.Now()
	select {
	case err := <-done:
		return w.D, err
	case <-time.After(30 * time.Second):
		t.Fatal("the call never answered")
	}
	return 0, nil
}

// TestRealisticLatency: with the realistic profile each operation waits
// its own figure, jittered from the seed's stream (replayed here to know
// each wait exactly), writes longer than reads; the move is visible at
// once, as OCI's synchronous UpdatePrivateIp; a latency fault adds to
// the profile and a reset leaves the profile.
func TestRealisticLatency(t *testing.T) {
	const seed = 5
	prof, err := ocisim.LatencyProfile(simfault.LatencyRealistic)
	if err != nil {
		t.Fatal(err)
	}
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}, Seed: seed, Latency: prof})
	waits := ocisim.HandTimers(s.sim)
	replay := simfault.NewJitter(seed)
	check := func(what string, got, figure, want time.Duration) {
		t.Helper()
		lo, hi := prof.Range(figure)
		if got != want || got < lo || got > hi {
			t.Fatalf("%s waits %v, want %v (%v ±30%%)", what, got, want, figure)
		}
	}

	var id, etag string
	d, err := timed(t, waits, func() error {
		r, err := s.create(t, "vnic-a", "10.0.0.7", "")
		id, etag = str(r.Id), str(r.Etag)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	check("CreatePrivateIp", d, 400*time.Millisecond, prof.Wait(ocisim.OpCreatePrivateIp, replay))
	d, err = timed(t, waits, func() error { _, err := s.move(t, id, "vnic-b", etag); return err })
	if err != nil {
		t.Fatal(err)
	}
	check("UpdatePrivateIp", d, 400*time.Millisecond, prof.Wait(ocisim.OpUpdatePrivateIp, replay))
	var vnic string
	d, _ = timed(t, waits, func() error {
		items := s.list(t, "10.0.0.7")
		if len(items) == 1 {
			vnic = str(items[0].VnicId)
		}
		return nil
	})
	check("ListPrivateIps", d, 200*time.Millisecond, prof.Wait(ocisim.OpListPrivateIps, replay))
	if vnic != "vnic-b" {
		t.Fatalf("right after the move the list shows it on %q, want vnic-b", vnic)
	}

	if err := s.sim.SetFaults(ocisim.Faults{Latency: ocisim.Duration(400 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	d, _ = timed(t, waits, func() error { s.list(t, "10.0.0.7"); return nil })
	if want := 400*time.Millisecond + prof.Wait(ocisim.OpListPrivateIps, replay); d != want {
		t.Fatalf("a list under a 400ms latency fault waits %v, want %v", d, want)
	}
	s.sim.Reset()
	d, _ = timed(t, waits, func() error { s.list(t, "10.0.0.7"); return nil })
	if want := prof.Wait(ocisim.OpListPrivateIps, replay); d != want {
		t.Fatalf("a list after a reset waits %v, want the profile's %v alone", d, want)
	}
	if p := s.sim.Latency(); p.Name != "realistic" || p.Latency(ocisim.OpUpdatePrivateIp) != 400*time.Millisecond {
		t.Fatalf("Latency() = %+v", p)
	}
}

// TestProfileSettle: a profile's settling time makes a move visible to
// reads that much later, and the faults' remap delay adds to it.
func TestProfileSettle(t *testing.T) {
	var mu sync.Mutex
	// Now, as the signatures' Date headers are checked against it.
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	prof := simfault.Profile{Name: "test", Settle: 2 * time.Second}
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}, Clock: clock, Latency: prof})
	created, err := s.create(t, "vnic-a", "10.0.0.7", "")
	if err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Second)
	if err := s.sim.SetFaults(ocisim.Faults{RemapDelay: ocisim.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.move(t, str(created.Id), "vnic-b", str(created.Etag)); err != nil {
		t.Fatal(err)
	}
	advance(3*time.Second - time.Nanosecond)
	if items := s.list(t, "10.0.0.7"); len(items) != 1 || str(items[0].VnicId) != "vnic-a" {
		t.Fatalf("before 2s settling and 1s delay passed: %+v", items)
	}
	advance(time.Nanosecond)
	if items := s.list(t, "10.0.0.7"); len(items) != 1 || str(items[0].VnicId) != "vnic-b" {
		t.Fatalf("once they passed: %+v", items)
	}
}
