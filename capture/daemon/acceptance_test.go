package daemon_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/provider"
)

// generous bounds the waits of these tests: they check what happens, the
// benchmarks measure how fast (BenchmarkFailover).
const generous = 20 * time.Second

// movedAt returns the time of the first assign of every address to nic
// after since, and whether all were moved.
func epochsOfAssigns(ms []provider.Mutation, nic string) map[string]capture.Epoch {
	out := map[string]capture.Epoch{}
	for _, m := range ms {
		if m.Call == capture.Assign && m.NIC == nic {
			out[m.Address.String()] = m.Epoch
		}
	}
	return out
}

func TestClusterDrainAndUndrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := startCluster(t, settings{nodes: 3, addresses: 4})
	c.waitAllOn("eni-n1", generous)
	first := epochsOfAssigns(c.mutations(), "eni-n1")

	c.intent("n2", "drain", "n1")
	took := c.waitAllOn("eni-n2", generous)
	t.Logf("drain moved %d addresses to n2 in %v", len(c.addrs), took)
	second := epochsOfAssigns(c.mutations(), "eni-n2")

	c.intent("n3", "undrain", "n1")
	took = c.waitAllOn("eni-n1", generous)
	t.Logf("undrain moved them back in %v", took)
	third := epochsOfAssigns(c.mutations(), "eni-n1")
	for _, a := range c.addrs {
		k := a.String()
		if !(first[k] < second[k] && second[k] < third[k]) {
			t.Fatalf("%s: moves at epochs %d, %d, %d: each move must have a new epoch", k, first[k], second[k], third[k])
		}
	}
	checkFence(t, c.mutations())
	// Every node agrees on the line.
	for _, n := range c.names {
		st := c.status(n)
		for _, a := range st.Addresses {
			if a.DesiredHolder != "n1" || a.ProviderHolder != "n1" {
				t.Fatalf("%s's status: %+v", n, a)
			}
		}
	}
}

func TestClusterKillHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	// The watch below asserts that nothing moves while n1 restarts: a
	// 600 ms TTL let a heartbeat of n2 delayed 838 ms on a loaded machine
	// make n3 find n2 stale and move the addresses (correctly) to n1.
	const longTTL = 3 * time.Second
	c := startCluster(t, settings{nodes: 3, addresses: 4, ttl: longTTL})
	c.waitAllOn("eni-n1", generous)
	c.signal("n1", syscall.SIGKILL)
	took := c.waitAllOn("eni-n2", generous)
	t.Logf("n2 seized every address %v after n1 was killed", took)
	seized := len(c.mutations())

	c.start("n1")
	// n1 comes back as a standby: it takes nothing back. Watch for a while.
	deadline := time.Now().Add(4 * ttl)
	for time.Now().Before(deadline) {
		if !c.allOn("eni-n2") {
			t.Fatalf("after n1 restarted: %v", c.holders())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ms := c.mutations()
	checkFence(t, ms)
	for _, m := range ms[seized:] {
		if m.NIC == "eni-n1" && m.Call.Acquire() {
			t.Fatalf("the restarted node acquired: %+v", m)
		}
	}
	for _, a := range c.status("n1").Addresses {
		if a.DesiredHolder != "n2" || a.ProviderHolder != "n2" {
			t.Fatalf("the restarted n1 wants %+v", a)
		}
	}
	// An operator's undrain gives it its place back.
	c.intent("n1", "undrain", "n1")
	c.waitAllOn("eni-n1", generous)
	checkFence(t, c.mutations())
}

func TestClusterPausedHolderIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	// A long de-provision hold keeps n1's own, current release from
	// running while we watch: the test looks at what n1 had planned before
	// the pause.
	c := startCluster(t, settings{nodes: 3, addresses: 2, hold: time.Minute})
	c.waitAllOn("eni-n1", generous)
	c.signal("n1", syscall.SIGSTOP)
	c.waitAllOn("eni-n2", generous)
	seized := len(c.mutations())
	c.signal("n1", syscall.SIGCONT)
	time.Sleep(6 * reconcile)
	ms := c.mutations()
	checkFence(t, ms)
	for _, m := range ms[seized:] {
		if m.NIC == "eni-n1" {
			t.Fatalf("n1 changed the provider after the seize: %+v", m)
		}
	}
	if !c.allOn("eni-n2") {
		t.Fatalf("after SIGCONT: %v", c.holders())
	}
	// Whatever n1 had pending from before is skipped; nothing it planned
	// ran after the seize.
	var rows []capture.Row
	c.api("n1", http.MethodGet, "/v1/actions", nil, &rows)
	st := c.status("n1")
	current := map[string]capture.Epoch{}
	for _, a := range st.Addresses {
		current[a.Address] = a.Epoch
	}
	for _, r := range rows {
		if r.Epoch < current[r.Address.String()] && (r.State == capture.Pending || r.State == capture.Approved || r.State == capture.Running) {
			t.Fatalf("n1 has a stale row that is not skipped: %+v", r)
		}
	}
}

func TestClusterFederationSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := startCluster(t, settings{nodes: 2, addresses: 1})
	c.waitAllOn("eni-n1", generous)
	ep := c.endpoint("n1")
	evil := []byte(`{"from":"n2","events":[{"origin":"n2","seq":99999,"lamport":99999,"kind":"drain","subject":"n1"}]}`)
	post := func(body []byte, hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, ep+"/v1/federation/events", bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// A correctly signed request, sent once, then replayed.
	okBody := []byte(`{"from":"n2","events":[]}`)
	signed, _ := http.NewRequest(http.MethodPost, ep+"/v1/federation/events", nil)
	(&auth.Signer{Secret: c.secret, Node: "n2"}).Sign(signed, okBody)
	replayHdr := map[string]string{}
	for _, h := range []string{"X-Ipfence-Timestamp", "X-Ipfence-Signature", "X-Ipfence-Node", auth.HeaderContentSHA256} {
		replayHdr[h] = signed.Header.Get(h)
	}
	if code := post(okBody, replayHdr); code != http.StatusOK {
		t.Fatalf("the signed request: %d", code)
	}
	cases := []struct {
		name string
		body []byte
		hdr  map[string]string
		want int
	}{
		{"unauthenticated", evil, nil, http.StatusUnauthorized},
		{"wrongly signed", evil, map[string]string{"X-Ipfence-Timestamp": fmt.Sprint(time.Now().UnixNano()), "X-Ipfence-Node": "n2", "X-Ipfence-Signature": strings.Repeat("ab", 32), auth.HeaderContentSHA256: fmt.Sprintf("%x", sha256.Sum256(evil))}, http.StatusUnauthorized},
		{"replayed", okBody, replayHdr, http.StatusUnauthorized},
		{"oversized", bytes.Repeat([]byte("x"), 65*1024), nil, http.StatusRequestEntityTooLarge},
	}
	for _, cs := range cases {
		if got := post(cs.body, cs.hdr); got != cs.want {
			t.Errorf("%s: %d, want %d", cs.name, got, cs.want)
		}
	}
	// Nothing changed: n1 is not drained and still holds the address.
	time.Sleep(2 * reconcile)
	st := c.status("n1")
	for _, m := range st.Members {
		if m.Drained {
			t.Fatalf("a rejected request drained %s", m.Node)
		}
	}
	if !c.allOn("eni-n1") {
		t.Fatalf("a rejected request moved addresses: %v", c.holders())
	}
	// Counted, by reason.
	resp, err := http.Get(ep + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ipfence_rejected_requests_total{reason="missing"} 1`,
		`ipfence_rejected_requests_total{reason="bad-signature"} 1`,
		`ipfence_rejected_requests_total{reason="replayed"} 1`,
		`ipfence_rejected_requests_total{reason="too-large"} 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
