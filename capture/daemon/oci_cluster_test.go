package daemon_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// The API key the nodes sign with, as the OCI config file names it; the
// simulator verifies every signature against its public half.
const (
	ociTenancy     = "ocid1.tenancy.oc1..ipfencecluster"
	ociUser        = "ocid1.user.oc1..ipfencecluster"
	ociFingerprint = "0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0"
	// ociProfile is not DEFAULT, so that the nodes find it only if a
	// named profile is read from OCI_CONFIG_FILE.
	ociProfile = "IPFENCE"
)

// ociCluster is a cluster of real `ipfence serve` processes whose provider
// is of type oci, on the OCI simulator served over TLS on loopback by the
// test process: the nodes' unmodified SDK signs with the key of an OCI
// config file the test wrote, and trusts the test server's certificate.
type ociCluster struct {
	*cluster
	sim   *ocisim.Server
	vnics map[string]string // by node
}

// startOCICluster starts the simulator and the nodes (the timing of
// startCluster) and waits until every node has synced.
func startOCICluster(t testing.TB, nodes, addresses int) *ociCluster {
	t.Helper()
	// The SDK reads ~/.oci/config, when there is one, before
	// OCI_CONFIG_FILE: the nodes would sign with someone's real key.
	if u, err := user.Current(); err == nil {
		if _, err := os.Stat(filepath.Join(u.HomeDir, ".oci", "config")); err == nil {
			testenv.Missing(t, "a home without .oci/config (%s/.oci/config exists, and the OCI SDK reads it before the OCI_CONFIG_FILE the test writes)", u.HomeDir)
		}
	}
	dir := t.TempDir()
	oc := &ociCluster{vnics: map[string]string{}}
	c := &cluster{t: t, bin: binary(t), dir: dir, procs: map[string]*exec.Cmd{}, outputs: map[string]*bytes.Buffer{}}
	oc.cluster = c
	var vnics []string
	for i := range nodes {
		n := fmt.Sprintf("n%d", i+1)
		c.names = append(c.names, n)
		oc.vnics[n] = "ocid1.vnic.oc1.iad." + n
		vnics = append(vnics, oc.vnics[n])
	}
	for i := range addresses {
		c.addrs = append(c.addrs, netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)}))
	}

	// 2048 bits, as OCI asks of an API key; the nodes sign every call.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "oci-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	oc.sim, err = ocisim.New(ocisim.Config{
		VNICs: vnics, Subnet: netip.MustParsePrefix("10.0.0.0/24"),
		Keys: map[string]*rsa.PublicKey{ociTenancy + "/" + ociUser + "/" + ociFingerprint: &key.PublicKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(oc.sim)
	// Registered before the cluster's stop, so it runs after it: the
	// nodes stop while the simulator still answers.
	t.Cleanup(srv.Close)
	t.Cleanup(c.stop)
	c.sim = srv.URL
	ca := filepath.Join(dir, "ocisim-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ociConfig := filepath.Join(dir, "oci-config")
	if err := os.WriteFile(ociConfig, []byte(fmt.Sprintf("[%s]\nuser=%s\nfingerprint=%s\ntenancy=%s\nregion=us-ashburn-1\nkey_file=%s\n",
		ociProfile, ociUser, ociFingerprint, ociTenancy, keyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The node processes inherit these. OCI_DEFAULT_CERTS_PATH is the
	// SDK's own CA bundle (common.GetTLSConfigTemplateForTransport): it
	// replaces the system pool for the SDK's client alone, where
	// SSL_CERT_FILE would also work (the SDK leaves RootCAs nil, the
	// system pool, without it) but would change every TLS client of the
	// process. Requests to a loopback address are never proxied, whatever
	// the proxy variables say, so none leaves the machine.
	t.Setenv("OCI_CONFIG_FILE", ociConfig)
	t.Setenv("OCI_DEFAULT_CERTS_PATH", ca)

	c.federate()
	for i, n := range c.names {
		if err := os.WriteFile(c.configPath(n), []byte(oc.config(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.names {
		c.start(n)
	}
	c.waitSynced(generous)
	return oc
}

// config is node i's configuration: startCluster's, with a provider of
// type oci and VNIC OCIDs as the members' targets. No credential is in
// it: the SDK reads them from OCI_CONFIG_FILE's profile.
func (oc *ociCluster) config(i int) string {
	c := oc.cluster
	var b strings.Builder
	fmt.Fprintf(&b, "node: %s\nlisten: 127.0.0.1:%d\ndata_dir: %s-data\npeers:\n", c.names[i], c.ports[i], c.names[i])
	for j, n := range c.names {
		if j != i {
			fmt.Fprintf(&b, "  - name: %s\n    url: http://127.0.0.1:%d\n", n, c.ports[j])
		}
	}
	fmt.Fprintf(&b, "federation:\n  secret_file: secret\n  max_body: 64KiB\nproviders:\n  oc:\n    type: oci\n    endpoint: %s\n    region: us-ashburn-1\n    oci: {subnet: %s, auth: config_file, profile: %s}\n",
		c.sim, oc.sim.SubnetID(), ociProfile)
	b.WriteString("pools:\n  - name: web\n    provider: oc\n    group: g1\n    addresses: [")
	for k, a := range c.addrs {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteString("]\n    members:\n")
	for j, n := range c.names {
		fmt.Fprintf(&b, "      - {node: %s, priority: %d, target: %s}\n", n, j+1, oc.vnics[n])
	}
	b.WriteString("approval:\n  auto: true\n  providers: [\"*\"]\n  kinds: [\"*\"]\n  cidrs: [\"10.0.0.0/16\"]\n  max_per_run: 100000\n")
	fmt.Fprintf(&b, "timing:\n  reconcile_interval: %s\n  heartbeat_interval: %s\n  heartbeat_ttl: %s\n  deprovision_hold: 0s\n", reconcile, heartbeat, ttl)
	return b.String()
}

// allOn reports whether the simulator shows every address on node n's
// VNIC.
func (oc *ociCluster) allOn(n string) bool {
	for _, a := range oc.addrs {
		if oc.sim.Holder(a) != oc.vnics[n] {
			return false
		}
	}
	return true
}

// waitAllOn waits until every address is on node n's VNIC and returns how
// long it took.
func (oc *ociCluster) waitAllOn(n string, limit time.Duration) time.Duration {
	oc.t.Helper()
	start := time.Now()
	for !oc.allOn(n) {
		if time.Since(start) > limit {
			h := map[netip.Addr]string{}
			for _, a := range oc.addrs {
				h[a] = oc.sim.Holder(a)
			}
			oc.t.Fatalf("addresses not all on %s's VNIC after %v: %v", n, limit, h)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// lastAssign is the time of the latest assign to node n's VNIC in the
// record: when the simulator applied the move's last address.
func (oc *ociCluster) lastAssign(ms []provider.Mutation, n string) time.Time {
	var at time.Time
	for _, m := range ms {
		if m.Call == capture.Assign && m.NIC == oc.vnics[n] && m.Time.After(at) {
			at = m.Time
		}
	}
	return at
}

// checkOneHolder replays the simulator's record: an address is on one
// VNIC at a time, every assign takes it from the VNIC the record last put
// it on (never from another, never a second copy), a release takes it off
// its holder only, and an address that moves to a new holder does so at
// an epoch above the one its last holder took it at, so that the fence
// can tell the old holder's calls from the new one's.
func checkOneHolder(t testing.TB, ms []provider.Mutation) {
	t.Helper()
	holder := map[netip.Addr]string{}
	epoch := map[netip.Addr]capture.Epoch{}
	for i, m := range ms {
		switch m.Call {
		case capture.Assign:
			h := holder[m.Address]
			if m.From != h {
				t.Fatalf("mutation %d: %s assigned to %s from %q, but the record had it on %q", i, m.Address, m.NIC, m.From, h)
			}
			if m.Epoch == 0 {
				t.Fatalf("mutation %d: %s assigned to %s without an epoch", i, m.Address, m.NIC)
			}
			if h != "" && m.Epoch <= epoch[m.Address] {
				t.Fatalf("mutation %d: %s moved from %s (taken at epoch %d) to %s at epoch %d: a new holder must take a newer epoch", i, m.Address, h, epoch[m.Address], m.NIC, m.Epoch)
			}
			holder[m.Address], epoch[m.Address] = m.NIC, m.Epoch
		case capture.Unassign:
			if holder[m.Address] != m.NIC {
				t.Fatalf("mutation %d: %s released from %s, but the record had it on %q", i, m.Address, m.NIC, holder[m.Address])
			}
			delete(holder, m.Address)
		}
	}
}

// callsSince is the simulator's calls by operation since before.
func callsSince(now, before map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for op, n := range now {
		if d := n - before[op]; d > 0 {
			out[op] = d
		}
	}
	return out
}

// moveCost is the calls a phase made beyond the idle cluster's rate over
// its length, per address moved, by operation, for the log.
func moveCost(phase map[string]uint64, idle map[string]float64, d time.Duration, moved int) string {
	var parts []string
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for op := range phase {
			if !yield(op) {
				return
			}
		}
	}) {
		extra := float64(phase[op]) - idle[op]*d.Seconds()
		parts = append(parts, fmt.Sprintf("%s %d (%.1f/address above idle)", op, phase[op], extra/float64(moved)))
	}
	return strings.Join(parts, ", ")
}

// Three `ipfence serve` processes on the OCI simulator, through the
// unmodified OCI SDK: the first capture lands on n1's VNIC, a drain of
// n1 moves every address to n2's (UpdatePrivateIp, naming the new VNIC),
// and n2's SIGKILL moves them on to n3's. The simulator's record shows
// each move at a newer epoch, no epoch going down for an address, and one
// holder at a time. Every call was signed with the config file's key and
// verified by the simulator (a node whose signatures it refused would
// move nothing).
func TestOCIClusterDrainAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	oc := startOCICluster(t, 3, 4)
	oc.waitAllOn("n1", generous)
	first := epochsOfAssigns(oc.sim.Mutations(), oc.vnics["n1"])

	// The idle cluster's reads, the background of the moves' counts,
	// once the first capture's forwarding calls (which follow the
	// assigns) are done.
	const quiet = 2 * time.Second
	time.Sleep(time.Second)
	before := oc.sim.Calls()
	time.Sleep(quiet)
	idle := map[string]float64{}
	for op, n := range callsSince(oc.sim.Calls(), before) {
		idle[op] = float64(n) / quiet.Seconds()
	}
	t.Logf("idle cluster: %v calls/s", idle)

	before = oc.sim.Calls()
	drained := time.Now()
	oc.intent("n2", "drain", "n1")
	took := oc.waitAllOn("n2", generous)
	drainCalls := callsSince(oc.sim.Calls(), before)
	ms := oc.sim.Mutations()
	second := epochsOfAssigns(ms, oc.vnics["n2"])
	t.Logf("drain: every address on n2's VNIC %v after the drain was acknowledged (last assign applied at %v); calls: %s",
		took, oc.lastAssign(ms, "n2").Sub(drained), moveCost(drainCalls, idle, took, len(oc.addrs)))
	// Each address reached n2's VNIC by a write of the SDK's: a move
	// (UpdatePrivateIp), or a create when n1 had released it first.
	if w := drainCalls[ocisim.OpUpdatePrivateIp] + drainCalls[ocisim.OpCreatePrivateIp]; w < uint64(len(oc.addrs)) {
		t.Fatalf("the drain put %d addresses on n2's VNIC with %d UpdatePrivateIp and CreatePrivateIp calls", len(oc.addrs), w)
	}

	before = oc.sim.Calls()
	killed := time.Now()
	oc.signal("n2", syscall.SIGKILL)
	took = oc.waitAllOn("n3", generous)
	failCalls := callsSince(oc.sim.Calls(), before)
	ms = oc.sim.Mutations()
	third := epochsOfAssigns(ms, oc.vnics["n3"])
	t.Logf("failover: every address on n3's VNIC %v after n2's SIGKILL (last assign applied at %v); calls: %s",
		took, oc.lastAssign(ms, "n3").Sub(killed), moveCost(failCalls, idle, took, len(oc.addrs)))

	checkFence(t, ms)
	checkOneHolder(t, ms)
	for _, a := range oc.addrs {
		k := a.String()
		if !(0 < first[k] && first[k] < second[k] && second[k] < third[k]) {
			t.Fatalf("%s: on n1, n2, n3 at epochs %d, %d, %d: each holder must take a newer epoch", k, first[k], second[k], third[k])
		}
	}
	// The survivors agree: n3 holds, and the provider says so.
	for _, n := range []string{"n1", "n3"} {
		st := oc.status(n)
		if len(st.Addresses) != len(oc.addrs) {
			t.Fatalf("%s's status shows %d addresses, want %d", n, len(st.Addresses), len(oc.addrs))
		}
		for _, a := range st.Addresses {
			if a.DesiredHolder != "n3" || a.ProviderHolder != "n3" {
				t.Fatalf("%s's status: %+v, want n3 holding", n, a)
			}
		}
	}
}

// BenchmarkOCIFailover is BenchmarkFailover on the OCI simulator: the
// holder's SIGKILL until every address is on the next member's VNIC, then
// a restart and an undrain give n1 its place back for the next run. It
// also reports a drain's move (the acknowledged drain until every address
// is on n2's VNIC) and the calls per address moved above the idle rate,
// for both.
//
//	go test ./capture/daemon -run '^$' -bench OCIFailover -benchtime 10x
func BenchmarkOCIFailover(b *testing.B) {
	oc := startOCICluster(b, 3, 4)
	oc.waitAllOn("n1", generous)
	const quiet = 2 * time.Second
	time.Sleep(time.Second) // the first capture's forwarding calls
	before := oc.sim.Calls()
	time.Sleep(quiet)
	idle := callsSince(oc.sim.Calls(), before)
	perMove := func(phase map[string]uint64, d time.Duration) float64 {
		total := 0.0
		for op, n := range phase {
			total += float64(n) - float64(idle[op])/quiet.Seconds()*d.Seconds()
		}
		return total / float64(len(oc.addrs))
	}
	var fails, drains []time.Duration
	var failCalls, drainCalls []float64
	for b.Loop() {
		before := oc.sim.Calls()
		oc.signal("n1", syscall.SIGKILL)
		d := oc.waitAllOn("n2", generous)
		fails = append(fails, d)
		failCalls = append(failCalls, perMove(callsSince(oc.sim.Calls(), before), d))
		b.StopTimer()
		oc.start("n1")
		oc.intent("n2", "undrain", "n1")
		oc.waitAllOn("n1", generous)
		oc.waitSynced(generous)
		before = oc.sim.Calls()
		oc.intent("n2", "drain", "n1")
		d = oc.waitAllOn("n2", generous)
		drains = append(drains, d)
		drainCalls = append(drainCalls, perMove(callsSince(oc.sim.Calls(), before), d))
		oc.intent("n2", "undrain", "n1")
		oc.waitAllOn("n1", generous)
		b.StartTimer()
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	seconds := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = d.Seconds()
		}
		return out
	}
	b.ReportMetric(median(seconds(fails)), "failover-median-s")
	b.ReportMetric(median(seconds(drains)), "drain-median-s")
	b.ReportMetric(median(failCalls), "failover-calls/address")
	b.ReportMetric(median(drainCalls), "drain-calls/address")
	checkFence(b, oc.sim.Mutations())
	checkOneHolder(b, oc.sim.Mutations())
}
