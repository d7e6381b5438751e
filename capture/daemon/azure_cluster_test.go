package daemon_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// azTenant is the tenant the nodes' EnvironmentCredential names.
const azTenant = "0a1b2c3d-0000-4000-8000-00000000c0de"

// refusingProxy is every node's HTTP(S) proxy: Go's transports send any
// request for a host that is not loopback to it (loopback is never
// proxied), and it refuses them all and records their targets. A request
// meant for Microsoft (instance discovery at login.microsoftonline.com,
// an AZURE_AUTHORITY_HOST, IMDS at 169.254.169.254) thus fails here
// instead of leaving the machine, and the test sees that it was tried.
type refusingProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRefusingProxy(t testing.TB) *refusingProxy {
	p := &refusingProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.Host)
		p.mu.Unlock()
		http.Error(w, "the test lets no request leave loopback", http.StatusForbidden)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *refusingProxy) tried() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.seen...)
}

// azCluster is a cluster of `ipfence serve` nodes with providers of type
// azure on `ipfence-verify cloudsim --dialect arm`, which is also their token
// authority.
type azCluster struct {
	*cluster
	https *http.Client // trusts the simulator's certificate
	proxy *refusingProxy
}

// startAzureCluster starts the simulator and the nodes as
// startCluster does, with the nodes' environment set for the Azure
// driver: the simulator's certificate as their only trust
// (SSL_CERT_FILE), an EnvironmentCredential of the tenant, the refusing
// proxy, and an AZURE_AUTHORITY_HOST that azure.authority_host must
// override (if the nodes used it, their token requests would reach the
// proxy). The environment is the test process's (t.Setenv), which the
// children inherit.
func startAzureCluster(t *testing.T, s settings) *azCluster {
	t.Helper()
	c, nics := newFrame(t, s)
	proxy := newRefusingProxy(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests the proxy refused (they tried to leave loopback): %v", proxy.tried())
		}
	})
	for k, v := range map[string]string{
		"HTTPS_PROXY": proxy.srv.URL, "https_proxy": proxy.srv.URL, "HTTP_PROXY": proxy.srv.URL, "http_proxy": proxy.srv.URL,
		"NO_PROXY": "", "no_proxy": "",
		// Only the environment credential: the rest of the default
		// chain (managed identity's IMDS probe above all) is never
		// built, so a failing token cannot fall through to it.
		"AZURE_TOKEN_CREDENTIALS": "EnvironmentCredential",
		"AZURE_TENANT_ID":         azTenant, "AZURE_CLIENT_ID": "ipfence-node", "AZURE_CLIENT_SECRET": "not-a-real-secret",
		"AZURE_AUTHORITY_HOST":          "https://login.invalid/",
		"AZURE_CLIENT_CERTIFICATE_PATH": "", "AZURE_USERNAME": "", "AZURE_PASSWORD": "", "AZURE_FEDERATED_TOKEN_FILE": "",
		"AZURE_REGIONAL_AUTHORITY_NAME": "", "IDENTITY_ENDPOINT": "", "MSI_ENDPOINT": "",
	} {
		t.Setenv(k, v)
	}
	cert := filepath.Join(c.dir, "armsim.pem")
	c.sim = c.spawn("cloudsim", "cloudsim", "--dialect", "arm", "--latency", "none", "--listen", "127.0.0.1:0", "--nics", strings.Join(nics, ","),
		"--subnet", "10.0.0.0/16", "--cert", cert)
	if !strings.HasPrefix(c.sim, "https://127.0.0.1:") {
		t.Fatalf("cloudsim --dialect arm listens on %q, want https on loopback", c.sim)
	}
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatalf("the simulator's certificate: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", cert)
	}
	t.Setenv("SSL_CERT_FILE", cert)
	t.Setenv("SSL_CERT_DIR", c.dir)
	az := &azCluster{cluster: c, proxy: proxy,
		https: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}

	c.federate()
	// The EC2 cluster's configuration with its provider made Azure: the
	// same pools, members (the simulator's NICs are named eni-n*) and
	// timing.
	ec2 := "    type: cloudsim\n    endpoint: " + c.sim + "\n"
	azure := fmt.Sprintf("    type: azure\n    endpoint: %s\n    azure: {subscription: %s, resource_group: %s, authority_host: %q}\n",
		c.sim, armsim.DefaultSubscription, armsim.DefaultResourceGroup, c.sim+"/")
	for i, n := range c.names {
		cfg := c.config(i, s)
		if !strings.Contains(cfg, ec2) {
			t.Fatalf("the cluster configuration no longer holds %q:\n%s", ec2, cfg)
		}
		if err := os.WriteFile(c.configPath(n), []byte(strings.Replace(cfg, ec2, azure, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.names {
		c.start(n)
	}
	c.waitSynced(generous)
	return az
}

// getJSON reads one of the simulator's admin calls.
func (a *azCluster) getJSON(path string, out any) {
	a.t.Helper()
	resp, err := a.https.Get(a.sim + path)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
}

func (a *azCluster) mutations() []provider.Mutation {
	var ms []provider.Mutation
	a.getJSON("/admin/mutations", &ms)
	return ms
}

// holders is where ARM holds each address (its last accepted PUT).
func (a *azCluster) holders() map[netip.Addr]string {
	var st []armsim.NICState
	a.getJSON("/admin/state", &st)
	out := map[netip.Addr]string{}
	for _, n := range st {
		for _, ad := range n.Secondary {
			out[ad] = n.Name
		}
	}
	return out
}

// waitAllOn waits until every address is on nic and returns how long it
// took.
func (a *azCluster) waitAllOn(nic string, limit time.Duration) time.Duration {
	a.t.Helper()
	start := time.Now()
	for {
		h := a.holders()
		all := true
		for _, ad := range a.addrs {
			all = all && h[ad] == nic
		}
		if all {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			a.t.Fatalf("addresses not all on %s after %v: %v", nic, limit, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorded waits until the record shows every address assigned to nic
// and returns it.
func (a *azCluster) recorded(nic string, limit time.Duration) []provider.Mutation {
	a.t.Helper()
	start := time.Now()
	for {
		ms := a.mutations()
		on := map[netip.Addr]bool{}
		for _, m := range ms {
			if m.Call == capture.Assign && m.NIC == nic {
				on[m.Address] = true
			}
		}
		if len(on) == len(a.addrs) {
			return ms
		}
		if time.Since(start) > limit {
			a.t.Fatalf("the record shows %d of the %d addresses assigned to %s after %v", len(on), len(a.addrs), nic, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSingleHolder replays the record: an address is never on two NICs.
func checkSingleHolder(t testing.TB, ms []provider.Mutation) {
	t.Helper()
	on := map[netip.Addr]map[string]bool{}
	for i, m := range ms {
		if on[m.Address] == nil {
			on[m.Address] = map[string]bool{}
		}
		switch m.Call {
		case capture.Assign:
			if m.From != "" {
				delete(on[m.Address], m.From)
			}
			on[m.Address][m.NIC] = true
		case capture.Unassign:
			delete(on[m.Address], m.NIC)
		}
		if len(on[m.Address]) > 1 {
			t.Fatalf("after mutation %d (%s %s on %s at epoch %d) %s is on %v", i, m.Call, m.Address, m.NIC, m.Epoch, m.Address, on[m.Address])
		}
	}
}

// Three `ipfence serve` nodes of type azure on the ARM simulator, with
// the unmodified SDK and azidentity chain: the addresses go to n1, a
// drain moves them to n2, killing n2 moves them to n3; the simulator's
// record never shows an epoch going back for an address, nor two holders.
// The nodes' tokens come from the simulator (every ARM call carried one it
// issued), and no request tried to leave loopback.
func TestAzureClusterDrainAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	if os.Getenv(loopbackOnlyEnv) != "" {
		assertLoopbackOnly(t)
	}
	c := startAzureCluster(t, settings{nodes: 3, addresses: 4})
	took := c.waitAllOn("eni-n1", generous)
	t.Logf("n1 holds the %d addresses %v after the cluster synced", len(c.addrs), took)

	c.intent("n2", "drain", "n1")
	took = c.waitAllOn("eni-n2", generous)
	t.Logf("the drain of n1 moved them to n2 in %v", took)

	c.signal("n2", syscall.SIGKILL)
	took = c.waitAllOn("eni-n3", generous)
	t.Logf("n3 seized them %v after n2 was killed", took)

	// The record holds changes once visible, which is later than ARM's
	// placement when the simulator delays visibility (Faults.Delay).
	ms := c.recorded("eni-n3", generous)
	checkFence(t, ms)
	checkSingleHolder(t, ms)
	acquired := map[string]int{}
	for _, m := range ms {
		if m.Call == capture.Assign {
			acquired[m.NIC]++
		}
	}
	if acquired["eni-n1"] < len(c.addrs) || acquired["eni-n2"] < len(c.addrs) || acquired["eni-n3"] < len(c.addrs) {
		t.Fatalf("assigns by NIC %v, want every address on each of the three in turn", acquired)
	}

	var id armsim.IdentityLog
	c.getJSON("/admin/identity", &id)
	tokens := 0
	for _, r := range id.Requests {
		switch {
		case r.Method == http.MethodGet && r.Path == "/"+azTenant+armsim.OpenIDPath && r.Status == http.StatusOK:
		case r.Method == http.MethodPost && r.Path == "/"+azTenant+armsim.TokenPath && r.Status == http.StatusOK &&
			r.ClientID == "ipfence-node" && r.GrantType == "client_credentials":
			tokens++
		default:
			t.Errorf("unexpected identity request %+v", r)
		}
	}
	if tokens < len(c.names) || id.Issued != tokens {
		t.Errorf("%d token requests answered, %d issued; want one at least per node (%d)", tokens, id.Issued, len(c.names))
	}
	if id.ARMWithIssued == 0 || id.ARMWithOther != 0 {
		t.Errorf("ARM calls with an issued token %d, with another %d", id.ARMWithIssued, id.ARMWithOther)
	}
	if away := c.proxy.tried(); len(away) != 0 {
		t.Fatalf("requests tried to leave loopback (refused by the test's proxy): %v", away)
	}
	t.Logf("%d mutations; %d identity requests; %d ARM calls with the simulator's tokens", len(ms), len(id.Requests), id.ARMWithIssued)
}

// loopbackOnlyEnv marks the run of TestAzureClusterDrainAndKill that
// TestAzureClusterLoopbackOnly starts in a network namespace of its own.
const loopbackOnlyEnv = "IPFENCE_TEST_LOOPBACK_ONLY"

// assertLoopbackOnly checks that this process has no way off the
// machine: loopback is its only interface, and a connection to a
// documentation address fails at once for want of a route.
func assertLoopbackOnly(t *testing.T) {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	if len(names) != 1 || names[0] != "lo" {
		t.Fatalf("%s is set but the interfaces are %v", loopbackOnlyEnv, names)
	}
	if _, err := net.DialTimeout("tcp", "192.0.2.1:443", time.Second); !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("a connection off the machine: %v, want network unreachable", err)
	}
	t.Logf("loopback only: interfaces %v, no route off the machine", names)
}

// The cluster test again, in a network namespace with only loopback
// (unshare --net), so that any request the nodes, the simulator or the
// SDK would send off the machine cannot leave it even without the proxy:
// the run passes there exactly as here.
func TestAzureClusterLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	if os.Getenv(loopbackOnlyEnv) != "" {
		t.Skip("already inside the namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Missing(t, "unshare (util-linux), to run the cluster in a network namespace of its own")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "ip (iproute2), to bring up loopback in the namespace")
	}
	if out, err := exec.Command(unshare, "--net", "true").CombinedOutput(); err != nil {
		testenv.Missing(t, "the right to create a network namespace (unshare --net: %v %s)", err, bytes.TrimSpace(out))
	}
	cmd := exec.Command(unshare, "--net", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh",
		os.Args[0], "-test.run", "^TestAzureClusterDrainAndKill$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), loopbackOnlyEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the cluster test in a loopback-only namespace: %v\n%s", err, tail(string(out), 6000))
	}
	for _, want := range []string{"loopback only: interfaces [lo], no route off the machine", "--- PASS: TestAzureClusterDrainAndKill"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the namespaced run does not say %q:\n%s", want, tail(string(out), 6000))
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "azure_cluster_test.go") {
			t.Log("namespaced: " + strings.TrimSpace(l))
		}
	}
}
