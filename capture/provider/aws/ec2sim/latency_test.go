package ec2sim

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ipfence/ipfence/internal/simfault"
)

// TestRealisticLatency: with the realistic profile each action waits its
// own figure, jittered from the seed's stream (the test replays the
// stream to know each wait exactly), an assign becomes visible only its
// settling time later, the faults' latency adds to the profile's, and a
// reset clears the faults but leaves the profile.
func TestRealisticLatency(t *testing.T) {
	const seed = 7
	prof, err := LatencyProfile(simfault.LatencyRealistic)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Seed: seed, Latency: prof})
	waits := handTimers(e.s)
	replay := simfault.NewJitter(seed)

	// A read waits the describe figure, within its jitter.
	done := make(chan error, 1)
	go func() {
		_, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{})
		done <- err
	}()
	w := nextWait(t, waits)
	want := prof.Wait(actDescribe, replay)
	lo, hi := prof.Range(150 * time.Millisecond)
	if w.d != want || w.d < lo || w.d > hi {
		t.Fatalf("describe waits %v, want %v (150ms ±30%%: %v to %v)", w.d, want, lo, hi)
	}
	w.fire <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A write waits the assign figure, and its change settles later.
	go func() { done <- e.assign("eni-a", false, ip7) }()
	w = nextWait(t, waits)
	want = prof.Wait(actAssign, replay)
	lo, hi = prof.Range(500 * time.Millisecond)
	if w.d != want || w.d < lo || w.d > hi {
		t.Fatalf("assign waits %v, want %v (500ms ±30%%: %v to %v)", w.d, want, lo, hi)
	}
	w.fire <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	settle := prof.SettleWait(replay)
	if lo, hi := prof.Range(time.Second); settle < lo || settle > hi {
		t.Fatalf("settling time %v, want 1s ±30%%", settle)
	}
	e.clock.Advance(settle - time.Nanosecond)
	if p := placement(e.s)[0]; p != "eni-a: check=true" {
		t.Fatalf("a nanosecond before the assign settles eni-a = %q, want nothing yet", p)
	}
	e.clock.Advance(time.Nanosecond)
	if p := placement(e.s)[0]; p != "eni-a:10.0.0.7 check=true" {
		t.Fatalf("once the assign settled eni-a = %q", p)
	}

	// The faults' latency comes on top of the profile's.
	if err := e.s.SetFaults(Faults{Latency: Duration(400 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.assign("eni-b", false, ip8) }()
	w = nextWait(t, waits)
	if want := 400*time.Millisecond + prof.Wait(actAssign, replay); w.d != want {
		t.Fatalf("assign under a 400ms latency fault waits %v, want %v", w.d, want)
	}
	w.fire <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	prof.SettleWait(replay)

	// A reset ends the fault, not the profile.
	if err := e.s.Reset(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.assign("eni-c", false, ip9) }()
	w = nextWait(t, waits)
	if want := prof.Wait(actAssign, replay); w.d != want {
		t.Fatalf("assign after a reset waits %v, want the profile's %v alone", w.d, want)
	}
	w.fire <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The admin API shows the profile.
	resp, err := http.Get(e.srv.URL + "/admin/latency")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got struct {
		Name       string            `json:"name"`
		Operations map[string]string `json:"operations"`
		Settle     string            `json:"settle"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("GET /admin/latency: %v: %s", err, b)
	}
	if got.Name != "realistic" || got.Operations[actAssign] != "500ms" || got.Operations[actDescribe] != "150ms" || got.Settle != "1s" {
		t.Fatalf("GET /admin/latency = %s", b)
	}
}

// TestNoLatency: the none profile, like a Config without one, waits
// nothing: no call starts a timer.
func TestNoLatency(t *testing.T) {
	prof, err := LatencyProfile(simfault.LatencyNone)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Latency: prof})
	waits := handTimers(e.s)
	e.mustAssign("eni-a", false, ip7)
	if p := placement(e.s)[0]; p != "eni-a:10.0.0.7 check=true" {
		t.Fatalf("with no latency eni-a = %q at once", p)
	}
	select {
	case w := <-waits:
		t.Fatalf("with no latency a call waited %v", w.d)
	default:
	}
	if _, err := LatencyProfile("fast"); err == nil || err.Error() != `latency: "fast" is not one of none, realistic` {
		t.Fatalf("LatencyProfile(fast) = %v", err)
	}
}

// TestLatencyJitterBySeed: the same seed draws the same waits, another
// seed others.
func TestLatencyJitterBySeed(t *testing.T) {
	draws := func(seed uint64) []time.Duration {
		e := newEnv(t, Config{Seed: seed, Latency: Realistic})
		waits := handTimers(e.s)
		var out []time.Duration
		for range 3 {
			done := make(chan error, 1)
			go func() {
				_, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{})
				done <- err
			}()
			w := nextWait(t, waits)
			out = append(out, w.d)
			w.fire <- time.Now()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	a, b, c := draws(1), draws(1), draws(2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 1 drew %v, then %v", a, b)
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same || a[0] == a[1] && a[1] == a[2] {
		t.Fatalf("seed 1 drew %v, seed 2 %v: no jitter", a, c)
	}
}
