package armsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// A paused simulator holds ARM calls until it resumes; a call whose caller
// gave up meanwhile changes nothing.
func TestPause(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	e.sim.Pause()
	body, _ := json.Marshal(nicBody("10.0.0.4", false, "10.0.0.50"))
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "PUT", e.srv.URL+e.nicPath("nic-a")+"?api-version="+armsim.APIVersion, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	waitFor(t, func() bool { return e.sim.Waiting() == 1 })
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the abandoned call was answered while paused")
	}
	waitFor(t, func() bool { return e.sim.Waiting() == 0 })
	held := make(chan answer, 1)
	go func() { held <- e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.51"), nil) }()
	waitFor(t, func() bool { return e.sim.Waiting() == 1 })
	if ms := e.sim.Mutations(); len(ms) != 0 {
		t.Fatalf("changed while paused: %+v", ms)
	}
	e.sim.Resume()
	if a := <-held; a.status != 200 {
		t.Fatalf("the held PUT after the resume: %d %v", a.status, a.body)
	}
	ms := e.sim.Mutations()
	if len(ms) != 1 || ms[0].NIC != "nic-b" {
		t.Fatalf("record %+v: want the held PUT's change only, not the abandoned one's", ms)
	}
}

// waitFor polls cond until it holds; a minute bounds a hang, far past
// what a loaded machine needs.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("gave up waiting after a minute")
		case <-time.After(time.Millisecond):
		}
	}
}
