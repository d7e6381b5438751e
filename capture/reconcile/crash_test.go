package reconcile_test

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

// TestMain lets the test binary run as the crash test's child: the
// reconcile/execute loops of one or two nodes, killed with SIGKILL by the
// parent.
func TestMain(m *testing.M) {
	if os.Getenv("IPFENCE_CRASH_CHILD") == "1" {
		crashChild()
		return
	}
	os.Exit(m.Run())
}

// crashChild runs the loops of the nodes IPFENCE_CRASH_NODES names (each
// with its own state file in IPFENCE_STATE_DIR) forever against the
// parent's provider, reading the pools from a file the parent rewrites
// between runs. Two nodes learn each other's epoch records at once, as
// if their federation never lagged: the crash test is about what a kill
// leaves behind, not about gossip.
func crashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pools := func() []capture.Pool {
		var ps []capture.Pool
		b, err := os.ReadFile(os.Getenv("IPFENCE_CONFIG"))
		if err == nil {
			err = json.Unmarshal(b, &ps)
		}
		if err != nil {
			fail(err)
		}
		return ps
	}
	var drv provider.Provider
	switch os.Getenv("IPFENCE_CRASH_CLOUD") {
	case "memory":
		drv = &memory.Client{BaseURL: os.Getenv("IPFENCE_PROVIDER")}
	case "azure":
		d, err := childAzure()
		if err != nil {
			fail(err)
		}
		drv = d
	case "oci":
		d, err := childOCI()
		if err != nil {
			fail(err)
		}
		drv = d
	default:
		fail(fmt.Errorf("IPFENCE_CRASH_CLOUD=%q", os.Getenv("IPFENCE_CRASH_CLOUD")))
	}
	nodes := strings.Split(os.Getenv("IPFENCE_CRASH_NODES"), ",")
	stores := map[string]*store.Store{}
	for _, n := range nodes {
		st, err := store.Open(filepath.Join(os.Getenv("IPFENCE_STATE_DIR"), n+".db"), store.Options{RetryAfter: 50 * time.Millisecond})
		if err != nil {
			fail(err)
		}
		stores[n] = st
	}
	// seen gives node self the newest record of every key among the
	// other nodes' stores.
	seen := func(self string) func() map[capture.Key]capture.EpochRecord {
		return func() map[capture.Key]capture.EpochRecord {
			out := map[capture.Key]capture.EpochRecord{}
			for n, st := range stores {
				if n == self {
					continue
				}
				ep, err := st.Epochs()
				if err != nil {
					fail(err)
				}
				for k, r := range ep {
					if cur, ok := out[k]; !ok || r.Epoch > cur.Epoch {
						out[k] = r
					}
				}
			}
			return out
		}
	}
	var passes sync.Mutex
	for _, n := range nodes {
		loop := reconcile.New(reconcile.Config{
			Node: n, Store: stores[n], Pools: pools, Seen: seen(n),
			Providers: map[string]provider.Provider{"cloud": drv},
			Policy:    policy.AllowAll(1000), Execute: true,
			RunningTimeout: 100 * time.Millisecond, Interval: time.Millisecond,
			OnPass: func(reconcile.Report, error) {
				if os.Getenv("IPFENCE_CRASH_PASSES") == "1" {
					passes.Lock()
					fmt.Println("pass " + n)
					passes.Unlock()
				}
			},
		})
		go loop.Run(context.Background())
	}
	fmt.Println("ready")
	select {}
}

// childTLS is an HTTP client trusting the certificate the parent wrote.
func childTLS() (*http.Client, error) {
	pem, err := os.ReadFile(os.Getenv("IPFENCE_CRASH_CERT"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", os.Getenv("IPFENCE_CRASH_CERT"))
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}, nil
}

// childOCI is the OCI driver on the parent's OCI simulator, signing with
// the key the parent wrote.
func childOCI() (*oci.Driver, error) {
	client, err := childTLS()
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(os.Getenv("IPFENCE_CRASH_KEY"))
	if err != nil {
		return nil, err
	}
	return oci.New(oci.Options{
		SubnetID: os.Getenv("IPFENCE_CRASH_SUBNET"), Host: os.Getenv("IPFENCE_PROVIDER"), HTTPClient: client,
		ConfigurationProvider: common.NewRawConfigurationProvider("ocid1.tenancy.oc1..crash", "ocid1.user.oc1..crash", "us-ashburn-1",
			"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff", string(key), nil),
		PollInterval: 10 * time.Millisecond, ReadAttempts: 3, MaxBackoff: 20 * time.Millisecond, VisibleTimeout: time.Second,
	})
}

// childAzure is the Azure driver on the parent's ARM simulator, trusting
// the certificate the parent wrote, with a token the simulator accepts.
func childAzure() (*azure.Driver, error) {
	client, err := childTLS()
	if err != nil {
		return nil, err
	}
	return azure.New(azure.Options{
		SubscriptionID: os.Getenv("IPFENCE_CRASH_SUBSCRIPTION"), ResourceGroup: os.Getenv("IPFENCE_CRASH_GROUP"),
		Credential: staticToken{}, Endpoint: os.Getenv("IPFENCE_PROVIDER"), Transport: client,
		PollFrequency: 5 * time.Millisecond, ReadRetries: 3, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond,
	})
}

// staticToken is a bearer token for the simulator, which takes any.
type staticToken struct{}

func (staticToken) GetToken(context.Context, azpolicy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "crash-test", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// effect is what a mutation did, apart from when.
type effect struct {
	call    capture.Kind
	nic     string
	address netip.Addr
	enabled bool
}

// crashCloud is the provider side of a crash test: what the child talks
// to, and the provider's own view the parent checks.
type crashCloud struct {
	name string
	// nics are the targets of nodes a and b.
	nics [2]string
	// url and env tell the child where the provider is.
	url string
	env []string
	// mutations is the provider's record.
	mutations func() []provider.Mutation
	// holders are the NICs holding an address (more than one is a
	// failure the parent reports).
	holders func(netip.Addr) []string
	// forwarding is a NIC's forwarding setting.
	forwarding func(string) bool
	// split is set for a provider whose move is two writes: the parent
	// then kills some children between them.
	split *splitter
}

// memoryCloud is the in-memory provider over HTTP.
func memoryCloud(t *testing.T) *crashCloud {
	cloud := memory.New(memory.Options{NICs: []string{"eni-a", "eni-b"}})
	srv := httptest.NewServer(memory.Handler(cloud))
	t.Cleanup(srv.Close)
	return &crashCloud{
		name: "memory", nics: [2]string{"eni-a", "eni-b"}, url: srv.URL,
		mutations: cloud.Mutations,
		holders: func(a netip.Addr) []string {
			if h := cloud.Holder(a); h != "" {
				return []string{h}
			}
			return nil
		},
		forwarding: cloud.Forwarding,
	}
}

// tlsServer serves h over TLS on loopback and writes its certificate
// where the child will read it.
func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, string) {
	srv := httptest.NewUnstartedServer(h)
	// A child killed mid-handshake is the test's doing, not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cert := filepath.Join(t.TempDir(), "server.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, cert
}

// ociCloud is the OCI simulator over TLS, checking the shape of every
// request's signature. A move is one UpdatePrivateIp.
func ociCloud(t *testing.T) *crashCloud {
	sim, err := ocisim.New(ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}})
	if err != nil {
		t.Fatal(err)
	}
	srv, cert := tlsServer(t, sim)
	k, err := rsa.GenerateKey(crand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &crashCloud{
		name: "oci", nics: [2]string{"vnic-a", "vnic-b"}, url: srv.URL,
		env:       []string{"IPFENCE_CRASH_CERT=" + cert, "IPFENCE_CRASH_KEY=" + key, "IPFENCE_CRASH_SUBNET=" + sim.SubnetID()},
		mutations: sim.Mutations,
		holders: func(a netip.Addr) []string {
			var hs []string
			for _, p := range sim.PrivateIPs() {
				if p.Address == a {
					hs = append(hs, p.VNIC)
				}
			}
			return hs
		},
		forwarding: sim.Forwarding,
	}
}

// azureCloud is the ARM simulator over TLS, behind a splitter.
func azureCloud(t *testing.T) *crashCloud {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Limits: armsim.Limits{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	sp := &splitter{next: sim, sim: sim}
	srv, cert := tlsServer(t, sp)
	state := func(name string) (armsim.NICState, bool) {
		for _, n := range sim.State() {
			if n.Name == name {
				return n, true
			}
		}
		return armsim.NICState{}, false
	}
	return &crashCloud{
		name: "azure", nics: [2]string{"nic-a", "nic-b"}, url: srv.URL,
		env:       []string{"IPFENCE_CRASH_CERT=" + cert, "IPFENCE_CRASH_SUBSCRIPTION=" + sim.SubscriptionID(), "IPFENCE_CRASH_GROUP=" + sim.ResourceGroup()},
		mutations: sim.Mutations,
		holders: func(a netip.Addr) []string {
			var hs []string
			for _, n := range sim.State() {
				if slices.Contains(n.Secondary, a) {
					hs = append(hs, n.Name)
				}
			}
			return hs
		},
		forwarding: func(name string) bool {
			n, _ := state(name)
			return n.Forwarding
		},
		split: sp,
	}
}

// moveKind is the text an assign's idempotency key carries: ARM's first
// step of a move is an unassign recorded under the assign's key.
var moveKind = ":" + string(capture.Assign) + ":"

// firstStep says whether m is the first write of a two-step move: the
// address leaving its old NIC under the key of the assign that moves it.
func firstStep(m provider.Mutation) bool {
	return m.Call == capture.Unassign && strings.Contains(m.IdempotencyKey, moveKind)
}

// splitter stands in front of the ARM simulator. Armed, it watches the
// record for a move's first write; once it sees one it answers nothing
// more (each request waits until its client is gone) and says so on hit,
// so that the parent's SIGKILL lands between the two writes of a move.
type splitter struct {
	next http.Handler
	sim  *armsim.Server

	mu      sync.Mutex
	armed   bool
	from    int // the record's length when armed
	holding bool
	hit     chan struct{}
	release chan struct{} // closed by disarm
}

func (s *splitter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	holding, release := s.holding, s.release
	s.mu.Unlock()
	if holding {
		// The body read to its end lets the server notice the client's
		// death (and end the request's context); disarm ends the rest.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		http.Error(w, "held by the crash test", http.StatusServiceUnavailable)
		return
	}
	s.next.ServeHTTP(w, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || s.holding {
		return
	}
	ms := s.sim.Mutations()
	for _, m := range ms[min(s.from, len(ms)):] {
		if firstStep(m) {
			s.holding = true
			close(s.hit)
			return
		}
	}
}

// arm makes the splitter hold everything after the next move's first
// write; the channel is closed when it does.
func (s *splitter) arm() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.holding, s.from = true, false, len(s.sim.Mutations())
	s.hit, s.release = make(chan struct{}), make(chan struct{})
	return s.hit
}

// disarm lets everything through again.
func (s *splitter) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release != nil {
		close(s.release)
		s.release = nil
	}
	s.armed, s.holding = false, false
}

// The node's loop is killed with SIGKILL at random points, hundreds of
// times, and restarted. After every restart: no epoch went down, no
// imported intent was lost, no idempotency key reached the provider twice
// with different effects, and no mutation carried an epoch lower than one
// already applied for its key. At the end the loop settles on the desired
// state.
func TestCrashSafetySIGKILL(t *testing.T) {
	crashTest(t, memoryCloud(t), []string{"a"})
}

// TestCrashSafetySIGKILLAzure is the crash test on the Azure driver and
// ARM's simulator, where a move is two writes: the address leaves its old
// NIC, then joins the new one. Two nodes share one process, a first and b
// second, and a's drain is toggled so that the address moves between
// their NICs. Besides the random kills, some kills land exactly between
// a move's two writes (the splitter holds the second). The address is
// then on no NIC, and whichever node the placement names next finishes
// the move at the current epoch: the address is never on two NICs (ARM
// refuses it; the check is the simulator's state) and never left on none
// once the loops are left alone.
func TestCrashSafetySIGKILLAzure(t *testing.T) {
	crashTest(t, azureCloud(t), []string{"a", "b"})
}

// TestCrashSafetySIGKILLOCI is the crash test of two nodes on the OCI
// driver and OCI's simulator, where a move is one UpdatePrivateIp (and a
// private IP deleted on release is created again on the next holder).
func TestCrashSafetySIGKILLOCI(t *testing.T) {
	crashTest(t, ociCloud(t), []string{"a", "b"})
}

// crashTest kills the loops of nodes (one or two) on cloud, hundreds of
// times.
func crashTest(t *testing.T, cloud *crashCloud, nodes []string) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it restarts a process hundreds of times")
	}
	// The three clouds' tests spend most of their time starting children
	// and waiting for kills: they run side by side.
	t.Parallel()
	kills := 200
	if s := os.Getenv("IPFENCE_CRASH_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	dir := t.TempDir()
	configPath := filepath.Join(dir, "pools.json")
	var addrs []netip.Addr
	for i := range 5 {
		addrs = append(addrs, netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", 50+i)))
	}
	writeConfig := func(drained bool) {
		members := []capture.Member{{Node: "a", Priority: 1, Target: cloud.nics[0], Drained: drained}}
		if len(nodes) == 2 {
			members = append(members, capture.Member{Node: "b", Priority: 2, Target: cloud.nics[1]})
		}
		pools := []capture.Pool{{Name: "web", Provider: "cloud", Group: "g1", Addresses: addrs, Members: members}}
		b, _ := json.Marshal(pools)
		tmp := configPath + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, configPath); err != nil {
			t.Fatal(err)
		}
	}
	// start starts the child; with passes, it prints a line after every
	// pass, which the caller must read.
	start := func(passes bool) (*exec.Cmd, *bufio.Reader, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "IPFENCE_CRASH_CHILD=1", "IPFENCE_STATE_DIR="+dir,
			"IPFENCE_CONFIG="+configPath, "IPFENCE_PROVIDER="+cloud.url,
			"IPFENCE_CRASH_CLOUD="+cloud.name, "IPFENCE_CRASH_NODES="+strings.Join(nodes, ","))
		cmd.Env = append(cmd.Env, cloud.env...)
		if passes {
			cmd.Env = append(cmd.Env, "IPFENCE_CRASH_PASSES=1")
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		rd := bufio.NewReader(out)
		line, err := rd.ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, nil, fmt.Errorf("child did not start: %q %v", line, err)
		}
		return cmd, rd, nil
	}

	r := rand.New(rand.NewPCG(20261130, 1))
	maxEpoch := map[string]map[capture.Key]capture.Epoch{}
	imported := map[string]map[string]bool{}
	for _, n := range nodes {
		maxEpoch[n], imported[n] = map[capture.Key]capture.Epoch{}, map[string]bool{}
	}
	effects := map[string]effect{}
	checked := 0 // mutations already checked
	high := map[netip.Addr]capture.Epoch{}
	splits := 0 // kills that landed between a move's two writes
	drained := false
	writeConfig(drained)

	check := func(round int) {
		for _, n := range nodes {
			st, err := store.Open(filepath.Join(dir, n+".db"), store.Options{})
			if err != nil {
				t.Fatalf("round %d: reopening %s's state: %v", round, n, err)
			}
			ep, err := st.Epochs()
			if err != nil {
				t.Fatal(err)
			}
			for k, rec := range ep {
				if rec.Epoch < maxEpoch[n][k] {
					t.Fatalf("round %d: %s's epoch of %s went down from %d to %d", round, n, k, maxEpoch[n][k], rec.Epoch)
				}
				maxEpoch[n][k] = rec.Epoch
			}
			rows, err := st.Rows(store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			present := map[string]bool{}
			for _, row := range rows {
				present[row.IdempotencyKey] = true
			}
			for k := range imported[n] {
				if !present[k] {
					t.Fatalf("round %d: %s's imported row %s was lost", round, n, k)
				}
			}
			for k := range present {
				imported[n][k] = true
			}
		}
		ms := cloud.mutations()
		for i, m := range ms[checked:] {
			// A move of two writes records both under one key: an effect
			// is a key's write to one NIC.
			id := m.IdempotencyKey + " " + string(m.Call) + " " + m.NIC
			e := effect{m.Call, m.NIC, m.Address, m.Enabled}
			if prev, ok := effects[id]; ok && prev != e {
				t.Fatalf("round %d: key %s reached the provider twice with different effects: %+v then %+v", round, m.IdempotencyKey, prev, e)
			}
			effects[id] = e
			// Where two nodes share the address, a former holder's
			// forwarding setting may carry the epoch it held at after the
			// new holder's assign (the README's stale forwarding on former
			// holders, which placement never reads): the epoch order is
			// checked on the writes that place the address.
			if len(nodes) > 1 && m.Call != capture.Assign && m.Call != capture.Unassign {
				continue
			}
			if m.Epoch < high[m.Address] {
				t.Fatalf("round %d: mutation %d carries epoch %d after %d for %s", round, checked+i, m.Epoch, high[m.Address], m.Address)
			}
			high[m.Address] = m.Epoch
		}
		for _, a := range addrs {
			if hs := cloud.holders(a); len(hs) > 1 {
				t.Fatalf("round %d: %s is on %d NICs: %v", round, a, len(hs), hs)
			}
		}
		// A first write whose key has no second write yet: this round's
		// kill split that move.
		done := map[string]bool{}
		for _, m := range ms {
			if m.Call == capture.Assign {
				done[m.IdempotencyKey] = true
			}
		}
		for _, m := range ms[checked:] {
			if firstStep(m) && !done[m.IdempotencyKey] {
				splits++
				break
			}
		}
		checked = len(ms)
	}

	// The kill lands at a random moment in a window of 15 ms after the
	// start. On a loaded machine (a race-detector suite beside a CPU hog)
	// a process may never get as far as the provider in 15 ms, and then
	// the kills test nothing: the window doubles after every round in
	// which no mutation has reached the provider yet, up to 500 ms, so the
	// kills land in the middle of the work whatever the machine's speed.
	window := 15 * time.Millisecond
	// round runs the child once and kills it: at a random moment, or,
	// with split, once a move's first write is in (or the move is done in
	// one write, when the old holder released first). It says whether
	// the kill landed between a move's two writes.
	round := func(i int, split bool) bool {
		var hit <-chan struct{}
		if split {
			hit = cloud.split.arm()
			defer cloud.split.disarm()
		}
		cmd, _, err := start(false)
		if err != nil {
			t.Fatal(err)
		}
		if len(effects) == 0 && i > 0 {
			window = min(2*window, 500*time.Millisecond)
		}
		between := false
		if hit != nil {
			want := cloud.nics[0]
			if drained {
				want = cloud.nics[1]
			}
			deadline := time.After(60 * time.Second)
		wait:
			for {
				select {
				case <-hit:
					between = true
					break wait
				case <-deadline:
					t.Fatalf("round %d: the move to %s neither split nor ended in 60 s", i, want)
				case <-time.After(5 * time.Millisecond):
					moved := true
					for _, a := range addrs {
						if hs := cloud.holders(a); len(hs) != 1 || hs[0] != want {
							moved = false
						}
					}
					if moved {
						break wait
					}
				}
			}
		} else {
			time.Sleep(time.Duration(r.Int64N(int64(window))))
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		return between
	}
	for i := range kills {
		toggled := false
		if r.IntN(3) == 0 {
			drained = !drained
			writeConfig(drained)
			toggled = true
		}
		// Every other toggle on a two-step provider, the kill waits for a
		// move's first write.
		round(i, cloud.split != nil && toggled && r.IntN(2) == 0)
		check(i)
	}
	// On a two-step provider the last kill splits a move, so that the
	// loops left alone below must finish it at the epoch it began at.
	if cloud.split != nil {
		for i := 0; ; i++ {
			if i == 20 {
				t.Fatal("20 moves in a row ended without a kill between their two writes")
			}
			drained = !drained
			writeConfig(drained)
			between := round(kills+i, true)
			check(kills + i)
			if between {
				break
			}
		}
	}

	// Settle: the loops, left alone, bring the provider to the desired
	// state, and finish every row.
	cmd, out, err := start(true)
	if err != nil {
		t.Fatal(err)
	}
	var passes atomic.Int64
	go func() {
		for {
			if _, err := out.ReadString('\n'); err != nil {
				return
			}
			passes.Add(1)
		}
	}()
	want := cloud.nics[0]
	if drained {
		want = ""
		if len(nodes) == 2 {
			want = cloud.nics[1]
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	settled := func() bool {
		for _, a := range addrs {
			hs := cloud.holders(a)
			if want == "" && len(hs) != 0 || want != "" && (len(hs) != 1 || hs[0] != want) {
				return false
			}
		}
		if want == "" {
			return !cloud.forwarding(cloud.nics[0])
		}
		return cloud.forwarding(want)
	}
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Let the passes in flight finish their bookkeeping, and whole passes
	// after them, begun with the provider settled; then stop.
	deadline = time.Now().Add(30 * time.Second)
	for seen := passes.Load(); passes.Load() < seen+2*int64(len(nodes)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			t.Fatalf("the loops did not complete two passes each in 30 s once the provider was settled (%d passes in all)", passes.Load())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	check(kills)
	if !settled() {
		t.Fatalf("after %d kills the provider did not settle on %q", kills, want)
	}
	if len(effects) == 0 {
		t.Fatal("no mutation ever reached the provider: the kills came too early to test anything")
	}
	if cloud.split != nil && splits == 0 {
		t.Fatal("no kill landed between the two writes of a move")
	}
	rows := 0
	for _, n := range nodes {
		rows += len(imported[n])
	}
	t.Logf("%d kills (%d between a move's two writes), %d distinct effects, %d mutations, %d rows", kills, splits, len(effects), checked, rows)
}
