package armsim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/internal/simfault"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

// timed makes a call that waits its latency on a hand timer, ends the
// wait, and returns its length and the answer.
func (e *env) timed(waits <-chan armsim.Wait, method, path string, body any, header map[string]string) (time.Duration, answer) {
	e.t.Helper()
	done := make(chan answer, 1)
	go func() { done <- e.do(method, path, body, header) }()
	var w armsim.Wait
	select {
	case w = <-waits:
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%s %s never began to wait out a latency", method, path)
	}
	w.Fire <- time.Now()
	select {
	case a := <-done:
		return w.D, a
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%s %s never answered", method, path)
	}
	return 0, answer{}
}

// TestRealisticLatency: with the realistic profile a read waits the read
// figure and a PUT the write figure, each jittered from the seed's stream
// (replayed here to know each wait exactly); the PUT's operation is
// InProgress until its settling time has passed on the simulator's clock,
// seconds; the faults' latency and delay add to the profile's, and a
// reset clears them but leaves the profile.
func TestRealisticLatency(t *testing.T) {
	const seed = 11
	prof, err := armsim.LatencyProfile(simfault.LatencyRealistic)
	if err != nil {
		t.Fatal(err)
	}
	clk := handclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Clock: clk.Now, Limits: armsim.Limits{Off: true}, Seed: seed, Latency: prof})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOf(t, sim, clk)
	waits := armsim.HandTimers(sim)
	replay := simfault.NewJitter(seed)
	within := func(what string, got, figure time.Duration, want time.Duration) {
		t.Helper()
		lo, hi := prof.Range(figure)
		if got != want || got < lo || got > hi {
			t.Fatalf("%s waits %v, want %v (%v ±50%%)", what, got, want, figure)
		}
	}

	d, got := e.timed(waits, "GET", e.nicPath("nic-a"), nil, nil)
	within("GET", d, 200*time.Millisecond, prof.Wait(armsim.OpGet, replay))
	d, put := e.timed(waits, "PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), map[string]string{"If-Match": etag(got)})
	within("PUT", d, time.Second, prof.Wait(armsim.OpPut, replay))
	if put.status != 200 {
		t.Fatalf("PUT: %d %v", put.status, put.body)
	}
	settle := prof.SettleWait(replay)
	if lo, hi := prof.Range(6 * time.Second); settle < 3*time.Second || settle < lo || settle > hi {
		t.Fatalf("the operation takes %v, want 6s ±50%%", settle)
	}
	poll := func(want string) {
		t.Helper()
		d, st := e.timed(waits, "GET", statusPath(t, e, put), nil, nil)
		within("the status poll", d, 200*time.Millisecond, prof.Wait(armsim.OpStatus, replay))
		if s, _ := st.body["status"].(string); s != want {
			t.Fatalf("status at %v: %s, want %s", clk.Now(), s, want)
		}
	}
	poll("InProgress")
	clk.Advance(settle - time.Nanosecond)
	poll("InProgress")
	if ms := sim.Mutations(); len(ms) != 0 {
		t.Fatalf("visible before the operation succeeded: %+v", ms)
	}
	clk.Advance(time.Nanosecond)
	poll("Succeeded")
	if ms := sim.Mutations(); len(ms) != 1 || ms[0].Address.String() != "10.0.0.50" {
		t.Fatalf("once the operation succeeded the record is %+v", ms)
	}

	// The faults come on top: 400 ms more per call, 1 s more per
	// operation.
	if err := sim.SetFaults(armsim.Faults{Latency: ec2sim.Duration(400 * time.Millisecond), Delay: ec2sim.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	d, got = e.timed(waits, "GET", e.nicPath("nic-b"), nil, nil)
	if want := 400*time.Millisecond + prof.Wait(armsim.OpGet, replay); d != want {
		t.Fatalf("GET under a 400ms latency fault waits %v, want %v", d, want)
	}
	d, put = e.timed(waits, "PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.51"), map[string]string{"If-Match": etag(got)})
	if want := 400*time.Millisecond + prof.Wait(armsim.OpPut, replay); d != want || put.status != 200 {
		t.Fatalf("PUT under a 400ms latency fault waits %v (%d), want %v", d, put.status, want)
	}
	settle = time.Second + prof.SettleWait(replay)
	if err := sim.SetFaults(armsim.Faults{Latency: ec2sim.Duration(400 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(settle - time.Nanosecond)
	if n := len(sim.Mutations()); n != 1 {
		t.Fatalf("%d mutations before the operation's settling time and delay passed, want 1", n)
	}
	clk.Advance(time.Nanosecond)
	if n := len(sim.Mutations()); n != 2 {
		t.Fatalf("%d mutations once its settling time and delay passed, want 2", n)
	}

	// A reset ends the faults, not the profile.
	sim.Reset()
	d, _ = e.timed(waits, "GET", e.nicPath("nic-a"), nil, nil)
	if want := prof.Wait(armsim.OpGet, replay); d != want {
		t.Fatalf("GET after a reset waits %v, want the profile's %v alone", d, want)
	}
	var shown struct {
		Name   string `json:"name"`
		Settle string `json:"settle"`
	}
	b, _ := json.Marshal(sim.Latency())
	if err := json.Unmarshal(b, &shown); err != nil || shown.Name != "realistic" || shown.Settle != "6s" {
		t.Fatalf("Latency() = %s", b)
	}
}

// statusPath is the path of a PUT's Azure-AsyncOperation URL.
func statusPath(t *testing.T, e *env, put answer) string {
	t.Helper()
	u := put.header.Get("Azure-AsyncOperation")
	if len(u) <= len(e.srv.URL) || u[:len(e.srv.URL)] != e.srv.URL {
		t.Fatalf("Azure-AsyncOperation %q", u)
	}
	return u[len(e.srv.URL):]
}

// TestLatencyProfileNames: none is the zero profile, and other names are
// refused.
func TestLatencyProfileNames(t *testing.T) {
	if p, err := armsim.LatencyProfile(simfault.LatencyNone); err != nil || p.Latency(armsim.OpPut) != 0 || p.Settle != 0 {
		t.Fatalf("none = %+v, %v", p, err)
	}
	if _, err := armsim.LatencyProfile("slow"); err == nil || err.Error() != `latency: "slow" is not one of none, realistic` {
		t.Fatalf("LatencyProfile(slow) = %v", err)
	}
	if _, err := armsim.New(armsim.Config{NICs: []string{"nic-a"}, Latency: simfault.Profile{Operations: map[string]time.Duration{"Nope": time.Second}}}); err == nil {
		t.Fatal("New took a profile naming an unknown operation")
	}
}
