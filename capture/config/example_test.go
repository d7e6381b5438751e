package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// TestExampleCluster loads examples/cluster's three files and checks that
// they describe the cluster its README runs: one pool on the simulator,
// n1, n2 and n3 in that order of priority, the same everywhere but for
// each node's own name, address and peers.
func TestExampleCluster(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(t), "examples", "cluster")
	secret, err := os.ReadFile(filepath.Join(dir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	listen := map[string]string{"n1": "127.0.0.1:7001", "n2": "127.0.0.1:7002", "n3": "127.0.0.1:7003"}
	wantPool := capture.Pool{
		Name: "web", Provider: "sim", Group: "web",
		Addresses: []netip.Addr{
			netip.MustParseAddr("10.0.0.100"), netip.MustParseAddr("10.0.0.101"),
			netip.MustParseAddr("10.0.0.102"), netip.MustParseAddr("10.0.0.103"),
		},
		Members: []capture.Member{
			{Node: "n1", Priority: 1, Target: "eni-n1"},
			{Node: "n2", Priority: 2, Target: "eni-n2"},
			{Node: "n3", Priority: 3, Target: "eni-n3"},
		},
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		n, err := Load(filepath.Join(dir, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if n.Name != name || n.Listen != listen[name] || n.Advertise != "http://"+listen[name] {
			t.Errorf("%s: name %q, listen %q, advertise %q", name, n.Name, n.Listen, n.Advertise)
		}
		if want := "/tmp/ipfence-cluster/" + name; n.DataDir != want {
			t.Errorf("%s: data_dir %q, want %q", name, n.DataDir, want)
		}
		var peers []Peer
		for _, other := range []string{"n1", "n2", "n3"} {
			if other != name {
				peers = append(peers, Peer{Name: other, URL: "http://" + listen[other]})
			}
		}
		if !reflect.DeepEqual(n.Peers, peers) {
			t.Errorf("%s: peers %+v, want %+v", name, n.Peers, peers)
		}
		if string(n.Federation.Secret) != string(secret[:len(secret)-1]) || n.Federation.TLS != nil {
			t.Errorf("%s: secret %q, TLS %v", name, n.Federation.Secret, n.Federation.TLS)
		}
		wantProviders := map[string]Provider{"sim": {Name: "sim", Type: TypeCloudsim, Endpoint: "http://127.0.0.1:9000", Region: "us-east-1"}}
		if !reflect.DeepEqual(n.Providers, wantProviders) {
			t.Errorf("%s: providers %+v", name, n.Providers)
		}
		if len(n.Pools) != 1 || !reflect.DeepEqual(n.Pools[0], wantPool) {
			t.Errorf("%s: pools %+v, want [%+v]", name, n.Pools, wantPool)
		}
		a := &capture.Action{Provider: "sim", Kind: capture.Assign, Address: netip.MustParseAddr("10.0.0.100")}
		if ok, why := n.Approval.Allows(a); !ok || n.Approval.MaxPerRun != 100 {
			t.Errorf("%s: approval %+v does not approve %v: %s", name, n.Approval, a, why)
		}
		wantTiming := Timing{
			ReconcileInterval: time.Second, HeartbeatInterval: 200 * time.Millisecond,
			HeartbeatTTL: 600 * time.Millisecond, RunningTimeout: time.Minute,
		}
		if n.Timing != wantTiming {
			t.Errorf("%s: timing %+v, want %+v", name, n.Timing, wantTiming)
		}
	}
}

// examples/onprem/h1.yaml is a valid on-premises node: an onprem provider
// under keepalived's authority.
func TestExampleOnPrem(t *testing.T) {
	n, err := Load(filepath.Join(testenv.RepoRoot(t), "examples", "onprem", "h1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p := n.Providers["lan"]; p.Type != TypeOnPrem || p.OnPrem.WorkloadDevice != "wl0" || p.OnPrem.GARPCount != 5 {
		t.Errorf("provider %+v", p)
	}
	if n.Authority.VRRP == nil || n.Authority.VRRP.Instance != "VI_1" || len(n.Pools) != 1 || !n.Pools[0].OnPrem() {
		t.Errorf("authority %+v, pools %+v", n.Authority.VRRP, n.Pools)
	}
}
