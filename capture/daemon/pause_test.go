package daemon_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// TestClusterPausedInsideAcquireIsFenced: n1 is stopped (SIGSTOP) inside
// a batched acquire of 4 addresses, after its executor's own readiness
// checks passed and before the assign is sent: a proxy in front of the
// simulator holds the describe AssignMany makes first and stops n1 there.
// The others find n1 silent and move the line on to n2. When n1 wakes and
// the describe's answer comes in, it must check again before it sends,
// find its pass too old, and send nothing of it: no assign, no enable and
// no action below the new line's epoch on n1's NIC after the stop (its
// clean-up at the new epoch is the projection's, and allowed), the fence
// holds, and every address stays on n2.
func TestClusterPausedInsideAcquireIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	var (
		target  atomic.Pointer[url.URL]
		armed   atomic.Bool
		hit     = make(chan struct{})
		resume  = make(chan struct{})
		unblock sync.Once
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") == "DescribeNetworkInterfaces" && armed.CompareAndSwap(true, false) {
			close(hit)
			<-resume
		}
		httputil.NewSingleHostReverseProxy(target.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	t.Cleanup(func() { unblock.Do(func() { close(resume) }) })
	c := startCluster(t, settings{nodes: 3, addresses: 4, via: func(node, sim string) string {
		if node != "n1" {
			return sim
		}
		u, err := url.Parse(sim)
		if err != nil {
			t.Fatal(err)
		}
		target.Store(u)
		return proxy.URL
	}})
	c.waitAllOn("eni-n1", generous)
	// Move everything to n2, and let n1's releases and their looks end.
	c.intent("n1", "drain", "n1")
	c.waitAllOn("eni-n2", generous)
	time.Sleep(6 * reconcile)
	var before capture.Epoch
	for _, a := range c.status("n2").Addresses {
		before = max(before, a.Epoch)
	}
	// n1's next provider call is the describe of its acquire.
	armed.Store(true)
	c.intent("n1", "undrain", "n1")
	select {
	case <-hit:
	case <-time.After(generous):
		t.Fatal("n1 never started its acquire")
	}
	c.signal("n1", syscall.SIGSTOP)
	stopped := len(c.mutations())
	// n2 and n3 find n1 silent and move every address's line past the
	// epoch n1 is acting at (before+1), back to n2.
	deadline := time.Now().Add(generous)
	for {
		moved := true
		for _, a := range c.status("n2").Addresses {
			if a.DesiredHolder != "n2" || a.Holder != "n2" || a.Epoch < before+2 {
				moved = false
			}
		}
		if moved && c.allOn("eni-n2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line did not move on to n2 while n1 was stopped: %+v, %v", c.status("n2").Addresses, c.holders())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.signal("n1", syscall.SIGCONT)
	unblock.Do(func() { close(resume) })
	time.Sleep(6 * reconcile)
	ms := c.mutations()
	checkFence(t, ms)
	// What n1 may still do after it wakes is its part of the new line: a
	// de-provisioning of its own NIC at the epoch the others moved on to
	// (its forwarding may have been switched on at before+1 before it was
	// stopped, and the projection at the new epoch switches it off again).
	// What it must never send is anything of its stale pass: an action at
	// an epoch below the new line's, or any assign or enable at all.
	for _, m := range ms[stopped:] {
		if m.NIC != "eni-n1" {
			continue
		}
		if m.Epoch < before+2 || m.Call == capture.Assign || m.Call == capture.EnableForwarding {
			t.Fatalf("n1 sent from its stale pass after it woke: %+v", m)
		}
		t.Logf("n1's clean-up at the new line after it woke: %s %s at epoch %d", m.Call, m.Address, m.Epoch)
	}
	if !c.allOn("eni-n2") {
		t.Fatalf("after SIGCONT: %v", c.holders())
	}
}
