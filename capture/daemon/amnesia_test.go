package daemon_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// Issue 14: a node whose data dir was removed (a replaced disk, a reimaged
// host) started silently with empty state, took epoch 1 and seized every
// address although epoch 8 was applied, and the cluster did not converge.
// Now it starts as a new incarnation, passive until it has pulled the
// cluster's records from a majority of its peers; it executes nothing at an
// epoch lower than one already applied, and the cluster converges.
func TestClusterWipedNodeLearnsBeforeActing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := startCluster(t, settings{nodes: 3, addresses: 4})
	c.waitAllOn("eni-n1", generous)
	// Move the line up: n1 → n2 → n1 → n2.
	for i, to := range []string{"n2", "n1", "n2"} {
		verb := "drain"
		if to == "n1" {
			verb = "undrain"
		}
		if code := c.api(c.names[(i+1)%3], http.MethodPost, "/v1/members/n1/"+verb, nil, nil); code != http.StatusOK {
			t.Fatalf("%s n1: %d", verb, code)
		}
		c.waitAllOn("eni-"+to, generous)
	}
	// The holder is n2, n1 is drained; undrain n1 so that, were it to
	// forget, it would be the one priority prefers.
	if code := c.api("n3", http.MethodPost, "/v1/members/n1/undrain", nil, nil); code != http.StatusOK {
		t.Fatalf("undrain: %d", code)
	}
	c.waitAllOn("eni-n1", generous)
	high := map[string]capture.Epoch{}
	for _, m := range c.mutations() {
		high[m.Address.String()] = max(high[m.Address.String()], m.Epoch)
	}
	for a, e := range high {
		if e < 4 {
			t.Fatalf("%s only reached epoch %d", a, e)
		}
	}

	// n1, the holder, loses its disk: killed, its data dir removed.
	c.signal("n1", syscall.SIGKILL)
	c.waitAllOn("eni-n2", generous)
	before := len(c.mutations())
	if err := os.RemoveAll(filepath.Join(c.dir, "n1-data")); err != nil {
		t.Fatal(err)
	}
	// Restarted with n3 stopped: one synced peer of two is not enough in
	// a cluster of three, so n1 stays passive and says why.
	c.signal("n3", syscall.SIGSTOP)
	c.start("n1")
	deadline := time.Now().Add(6 * ttl)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		st := c.status("n1")
		if st.Synced || !strings.Contains(st.Passive, "acts for nothing") {
			t.Fatalf("n1 with one peer of two: synced %v, passive %q", st.Synced, st.Passive)
		}
	}
	for _, m := range c.mutations()[before:] {
		if m.NIC == "eni-n1" {
			t.Fatalf("the unsynced n1 acted: %+v", m)
		}
	}
	c.signal("n3", syscall.SIGCONT)
	deadline = time.Now().Add(generous)
	for !c.status("n1").Synced {
		if time.Now().After(deadline) {
			t.Fatalf("n1 never synced: %+v", c.status("n1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// It learned the line: every node agrees, n2 keeps the addresses.
	deadline = time.Now().Add(generous)
	for {
		agree := true
		ref := c.status("n2").Addresses
		for _, n := range c.names {
			st := c.status(n)
			for i, a := range st.Addresses {
				if a.Epoch != ref[i].Epoch || a.Holder != "n2" || a.Epoch < high[a.Address] {
					agree = false
				}
			}
		}
		if agree {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not converge after n1's wipe: n1 %+v, n2 %+v", c.status("n1").Addresses, ref)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !c.allOn("eni-n2") {
		t.Fatalf("after n1 synced: %v", c.holders())
	}
	// And it acts again, at new epochs: an undrain gives it its place.
	if code := c.api("n1", http.MethodPost, "/v1/members/n1/undrain", nil, nil); code != http.StatusOK {
		t.Fatal("undrain after the wipe")
	}
	c.waitAllOn("eni-n1", generous)
	ms := c.mutations()
	checkFence(t, ms)
	for _, m := range ms[before:] {
		if m.Epoch <= high[m.Address.String()] && m.Call.Acquire() {
			t.Fatalf("after the wipe, %s at epoch %d, not above the %d applied before", m.Call, m.Epoch, high[m.Address.String()])
		}
	}
}
