package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/federation"
)

// postAs sends a batch to node n's federation endpoint signed with the
// federation's secret as peer from, and returns the status code.
func (c *cluster) postAs(from, n string, events []federation.Event) int {
	c.t.Helper()
	body, _ := json.Marshal(federation.Batch{From: from, Events: events})
	cl := &http.Client{Timeout: 10 * time.Second, Transport: (&auth.Signer{Secret: c.secret, Node: from}).Transport(http.DefaultTransport)}
	resp, err := cl.Post(c.endpoint(n)+federation.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Issue 14, as reproduced against real nodes: a peer (or a holder of the
// federation's secret) sends an epoch record at 2^64−1, a drain at Lamport
// 2^64−1, a heartbeat at seq 2^64−1 for a healthy node, and 5,120 drains
// for names that are no member. Every one is refused and counted; the
// holder change that follows moves the address at a higher epoch, undrain
// works, nobody goes stale, the federation logs do not grow, and the
// provider's record holds no stale mutation.
func TestClusterHostilePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := startCluster(t, settings{nodes: 3, addresses: 2})
	c.waitAllOn("eni-n1", generous)
	st := c.status("n2")
	key := capture.Key{Pool: "web", Address: c.addrs[0], Domain: capture.CloudDomain("sim", "g1", "")}
	now := time.Now().UnixNano()
	const top = ^uint64(0)
	// Relayed by n2: each names a healthy node that did not make it.
	evil := func(other string) []federation.Event {
		return []federation.Event{
			{Origin: "n2", Seq: 100000, Lamport: 5, Time: now, Kind: federation.Epoch, Subject: key.String(), Record: &capture.EpochRecord{Epoch: capture.Epoch(top), Holder: "n3"}},
			{Origin: "n2", Seq: 100001, Lamport: top, Time: now, Kind: federation.Drain, Subject: "n3"},
			{Origin: other, Seq: top, Lamport: 6, Time: now, Kind: federation.Heartbeat},
		}
	}
	sizes := map[string]int64{}
	for _, n := range c.names {
		sizes[n] = fileSizeOf(t, filepath.Join(c.dir, n+"-data", "federation.db"))
	}
	for n, other := range map[string]string{"n1": "n3", "n3": "n1"} {
		for _, e := range evil(other) {
			if code := c.postAs("n2", n, []federation.Event{e}); code != http.StatusBadRequest {
				t.Fatalf("%s took %s %s: %d", n, e.Kind, e.ID(), code)
			}
		}
	}
	for i := range 5120 / 256 {
		var batch []federation.Event
		for j := range 256 {
			seq := uint64(i*256 + j + 1)
			batch = append(batch, federation.Event{Origin: "n2", Seq: seq, Lamport: seq, Time: now, Kind: federation.Drain, Subject: fmt.Sprintf("ghost-%d", seq)})
		}
		if code := c.postAs("n2", "n1", batch); code != http.StatusBadRequest {
			t.Fatalf("ghost drains: %d", code)
		}
	}
	refused := c.status("n1").Refused
	if refused[federation.RefusedBounds] != 3 || refused[federation.RefusedSubject] != 5120 {
		t.Fatalf("n1 counted %v", refused)
	}
	// The holder changes: drain n1, then undrain it and n3's drain never
	// came.
	c.intent("n2", "drain", "n1")
	c.waitAllOn("eni-n2", generous)
	c.intent("n3", "undrain", "n1")
	c.waitAllOn("eni-n1", generous)
	for _, n := range c.names {
		for _, m := range c.status(n).Members {
			if m.Stale || m.Drained {
				t.Fatalf("%s sees %+v", n, m)
			}
		}
	}
	ms := c.mutations()
	checkFence(t, ms)
	for _, m := range ms {
		if m.Epoch == 0 || m.Epoch > 1000 {
			t.Fatalf("mutation at epoch %d: %+v", m.Epoch, m)
		}
	}
	for _, a := range c.status("n3").Addresses {
		if a.Epoch < st.Addresses[0].Epoch+2 || a.Epoch > 1000 {
			t.Fatalf("n3's line: %+v", a)
		}
	}
	for _, n := range c.names {
		if after := fileSizeOf(t, filepath.Join(c.dir, n+"-data", "federation.db")); after > sizes[n]+64<<10 {
			t.Fatalf("%s's federation log grew from %d to %d bytes", n, sizes[n], after)
		}
	}
}

func fileSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
