package daemon_test

import (
	"fmt"
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
		c.intent(c.names[(i+1)%3], verb, "n1")
		c.waitAllOn("eni-"+to, generous)
	}
	// The holder is n2, n1 is drained; undrain n1 so that, were it to
	// forget, it would be the one priority prefers.
	c.intent("n3", "undrain", "n1")
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
	c.intent("n1", "undrain", "n1")
	c.waitAllOn("eni-n1", generous)
	ms := c.mutations()
	checkFence(t, ms)
	for _, m := range ms[before:] {
		if m.Epoch <= high[m.Address.String()] && m.Call.Acquire() {
			t.Fatalf("after the wipe, %s at epoch %d, not above the %d applied before", m.Call, m.Epoch, high[m.Address.String()])
		}
	}
}

// An operator's intent sent to a node that has just come back without its
// state must not lose to an older one it never saw: n1 is drained through
// n2; n3 is wiped and restarted; the undrain of n1, sent to n3 the moment
// it answers, must leave n1 undrained on every node (or be refused, so the
// operator knows to send it again). With n2 stopped meanwhile, n3 refuses
// it (having lost its state, it must read both peers before stamping an
// intent) until n2 is back, and then takes it.
func TestClusterWipedNodeOrdersIntentsAfterWhatItLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	for _, pause := range []bool{false, true} {
		t.Run(fmt.Sprintf("n2 stopped %v", pause), func(t *testing.T) {
			c := startCluster(t, settings{nodes: 3, addresses: 2})
			c.waitAllOn("eni-n1", generous)
			// Lamport time runs ahead on n1 and n2 with a few intents.
			for _, verb := range []string{"drain", "undrain", "drain", "undrain", "drain"} {
				c.intent("n2", verb, "n1")
			}
			running := map[string]bool{"n1": true, "n2": true, "n3": true}
			views := func() (drained map[string]bool, text string) {
				drained = map[string]bool{}
				var out []string
				for _, n := range c.names {
					if !running[n] {
						continue
					}
					st := c.status(n)
					for _, m := range st.Members {
						if m.Node == "n1" {
							drained[n] = m.Drained
						}
					}
					out = append(out, fmt.Sprintf("%s: %+v", n, st.Members))
				}
				return drained, strings.Join(out, "; ")
			}
			waitDrained := func(want bool, what string) {
				for deadline := time.Now().Add(generous); ; time.Sleep(50 * time.Millisecond) {
					d, text := views()
					all := true
					for n := range running {
						if running[n] && d[n] != want {
							all = false
						}
					}
					if all {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: %s", what, text)
					}
				}
			}
			waitDrained(true, "n1 never drained on every node")
			c.signal("n3", syscall.SIGKILL)
			if err := os.RemoveAll(filepath.Join(c.dir, "n3-data")); err != nil {
				t.Fatal(err)
			}
			if pause {
				c.signal("n2", syscall.SIGSTOP)
				running["n2"] = false
			}
			c.start("n3")
			if pause {
				// n3 lost its state, so it must read both peers before it
				// stamps an intent (with n1 alone it could miss what only
				// n2 holds): while n2 is stopped, every answer is 503 and
				// nothing is taken.
				refused := 0
				for until := time.Now().Add(2 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
					code := c.api("n3", http.MethodPost, "/v1/members/n1/undrain", nil, nil)
					if code != http.StatusServiceUnavailable {
						t.Fatalf("the wiped n3, with n2 stopped, answered an undrain %d, want 503", code)
					}
					refused++
				}
				if d, text := views(); !d["n1"] {
					t.Fatalf("a refused undrain was taken: %s", text)
				}
				t.Logf("n3 refused the undrain %d times while n2 was stopped", refused)
				c.signal("n2", syscall.SIGCONT)
				running["n2"] = true
			}
			for deadline := time.Now().Add(generous); ; time.Sleep(5 * time.Millisecond) {
				code := c.api("n3", http.MethodPost, "/v1/members/n1/undrain", nil, nil)
				if code == http.StatusOK {
					break
				}
				if code != http.StatusServiceUnavailable {
					t.Fatalf("undrain through the wiped n3: %d", code)
				}
				if time.Now().After(deadline) {
					t.Fatal("the wiped n3 never took the undrain")
				}
			}
			waitDrained(false, "the undrain n3 answered 200 for was lost")
		})
	}
}
