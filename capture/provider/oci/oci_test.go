package oci_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/capture/provider/providertest"
)

// The test's API key: made once per test binary, never written anywhere.
// 1024 bits (OCI asks 2048 of real keys): signing every call of the
// contract suite's concurrent movers with 2048-bit keys costs seconds of
// CPU on a loaded 2-core machine, and the simulator checks and verifies a
// signature the same way whatever its size.
var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyPEM  string
)

const (
	tenancy     = "ocid1.tenancy.oc1..ipfencetest"
	user        = "ocid1.user.oc1..ipfencetest"
	fingerprint = "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff"
	keyID       = tenancy + "/" + user + "/" + fingerprint
)

func testKey(t testing.TB) (*rsa.PrivateKey, string) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			panic(err)
		}
		key = k
		keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	})
	return key, keyPEM
}

// counting sits in front of the simulator and counts calls by method and
// path shape, so tests can say how many of each the driver sent.
type counting struct {
	next  http.Handler
	mu    sync.Mutex
	calls map[string]int
	// fail answers the next n calls of an operation with this status and
	// code before the simulator sees them; lose lets the next n reach the
	// simulator and answers 503 instead of its answer.
	fail map[string]failure
	lose map[string]int
}

type failure struct {
	n      int
	status int
	code   string
}

func opOf(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, ocisim.BasePath)
	switch {
	case r.Method == http.MethodGet && p == "/privateIps":
		return ocisim.OpListPrivateIps
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/privateIps/"):
		return ocisim.OpGetPrivateIp
	case r.Method == http.MethodPut && strings.HasPrefix(p, "/privateIps/"):
		return ocisim.OpUpdatePrivateIp
	case r.Method == http.MethodPost && p == "/privateIps":
		return ocisim.OpCreatePrivateIp
	case r.Method == http.MethodDelete:
		return ocisim.OpDeletePrivateIp
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/vnics/"):
		return ocisim.OpGetVnic
	case r.Method == http.MethodPut && strings.HasPrefix(p, "/vnics/"):
		return ocisim.OpUpdateVnic
	}
	return r.Method + " " + p
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := opOf(r)
	c.mu.Lock()
	c.calls[op]++
	f := c.fail[op]
	inject := f.n > 0
	if inject {
		f.n--
		c.fail[op] = f
	}
	lose := c.lose[op] > 0
	if lose {
		c.lose[op]--
	}
	c.mu.Unlock()
	switch {
	case inject:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"code":%q,"message":"injected by the test"}`, f.code)
	case lose:
		c.next.ServeHTTP(httptest.NewRecorder(), r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"code":"ServiceUnavailable","message":"the answer was lost"}`)
	default:
		c.next.ServeHTTP(w, r)
	}
}

func (c *counting) setFail(op string, f failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[op] = f
}

func (c *counting) loseNext(op string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lose[op] = n
}

func (c *counting) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// env is a simulator over TLS on loopback, the counter in front of it, and
// a driver on it, signing with the test's key, which the simulator
// verifies.
type env struct {
	sim *ocisim.Server
	cnt *counting
	srv *httptest.Server
	drv *oci.Driver
}

func newEnv(t *testing.T, vnics []string) *env {
	t.Helper()
	k, pemKey := testKey(t)
	sim, err := ocisim.New(ocisim.Config{VNICs: vnics, Keys: map[string]*rsa.PublicKey{keyID: &k.PublicKey}})
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counting{next: sim, calls: map[string]int{}, fail: map[string]failure{}, lose: map[string]int{}}
	srv := httptest.NewTLSServer(cnt)
	t.Cleanup(srv.Close)
	e := &env{sim: sim, cnt: cnt, srv: srv}
	e.drv = e.driver(t, pemKey)
	return e
}

// driver is another driver on the same simulator: another node.
func (e *env) driver(t *testing.T, pemKey string, opts ...func(*oci.Options)) *oci.Driver {
	t.Helper()
	o := oci.Options{
		SubnetID: e.sim.SubnetID(), Host: e.srv.URL, HTTPClient: e.srv.Client(),
		ConfigurationProvider: common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fingerprint, pemKey, nil),
		PollInterval:          10 * time.Millisecond, ReadAttempts: 3, MaxBackoff: 20 * time.Millisecond,
		VisibleTimeout: time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	drv, err := oci.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

// ignoreEpochs builds a driver for the contract suite, whose concurrent
// callers draw epochs from one counter and then race, and expect every
// seize to succeed (see oci.Options.IgnoreEpochRecord); the record's
// refusals are tested below.
func ignoreEpochs(o *oci.Options) { o.IgnoreEpochRecord = true }

// recorded makes the driver a provider.Recorder through the simulator's
// authoritative history, so the suite checks that the fencing token
// travels in the headers.
type recorded struct {
	*oci.Driver
	sim *ocisim.Server
}

func (r recorded) Mutations() []provider.Mutation { return r.sim.Mutations() }

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T, nics []string) provider.Provider {
		e := newEnv(t, nics)
		_, pemKey := testKey(t)
		return recorded{e.driver(t, pemKey, ignoreEpochs), e.sim}
	})
}

// simFaults breaks the simulator through its fault settings.
type simFaults struct {
	t   *testing.T
	sim *ocisim.Server
}

func (f simFaults) FailMutations(err error) {
	code := ocisim.CodeTooManyRequests
	if errors.Is(err, provider.ErrUnavailable) {
		code = ocisim.CodeInternalServerError
	}
	rates := []ocisim.ErrorRate{{Code: code, Rate: 1}}
	fs := f.sim.Faults()
	fs.Errors = map[string][]ocisim.ErrorRate{
		ocisim.OpCreatePrivateIp: rates, ocisim.OpUpdatePrivateIp: rates, ocisim.OpDeletePrivateIp: rates, ocisim.OpUpdateVnic: rates,
	}
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) SetDelay(d time.Duration) {
	fs := f.sim.Faults()
	fs.RemapDelay = ocisim.Duration(d)
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) Heal() {
	if err := f.sim.SetFaults(ocisim.Faults{}); err != nil {
		f.t.Fatal(err)
	}
	f.sim.Flush()
}

func TestContractFaults(t *testing.T) {
	providertest.RunFaults(t, func(t *testing.T, nics []string) (provider.Provider, providertest.Faults) {
		e := newEnv(t, nics)
		_, pemKey := testKey(t)
		return recorded{e.driver(t, pemKey, ignoreEpochs), e.sim}, simFaults{t, e.sim}
	})
}

var ip = netip.MustParseAddr("10.0.0.50")

func req(nic string, epoch uint64) provider.Request {
	return provider.Request{NIC: nic, Address: ip, Epoch: capture.Epoch(epoch), IdempotencyKey: fmt.Sprintf("t:%s:epoch:%d", nic, epoch)}
}

// The cloud as a second wall: node 1 (epoch 2) reads the private IP on
// vnic-a and stops right before its move leaves, past its readiness
// check (as with the gate off); node 2 (epoch 3) moves the address to
// vnic-c meanwhile. Node 1's move goes out on the ETag it read: the cloud
// refuses it with 412 (and counts it as a stale write refused), the driver
// reads again, finds epoch 3 in the private IP's record and fails with
// provider.ErrStale without trying again, and nothing changed: the address
// stays on vnic-c and the record has no mutation at epoch 2, so the fence
// checker finds no stale action.
func TestStaleMoveRefusedByTheCloud(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b", "vnic-c"})
	_, pemKey := testKey(t)
	node2 := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	atSend, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stalled := gate.WithReady(t.Context(), func() error {
		once.Do(func() { close(atSend); <-resume })
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- e.drv.Assign(stalled, req("vnic-b", 2), true) }()
	select {
	case <-atSend:
	case err := <-done:
		t.Fatalf("node 1 finished before its send: %v", err)
	}
	if err := node2.Assign(t.Context(), req("vnic-c", 3), true); err != nil {
		t.Fatal(err)
	}
	close(resume)
	err := <-done
	if !errors.Is(err, provider.ErrStale) || !strings.Contains(err.Error(), "412") {
		t.Fatalf("the stale move: %v, want ErrStale after a 412", err)
	}
	if n := e.sim.StaleRefused(); n != 1 {
		t.Fatalf("the simulator counted %d stale writes refused, want 1", n)
	}
	if n := e.cnt.count(ocisim.OpUpdatePrivateIp); n != 2 {
		t.Fatalf("%d UpdatePrivateIp calls, want 2: node 2's, and node 1's once (refused, not retried)", n)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-c" {
		t.Fatalf("after the race: %+v %v", obs, err)
	}
	ms := e.sim.Mutations()
	if len(ms) != 2 || ms[0].Epoch != 1 || ms[1].Epoch != 3 || ms[1].NIC != "vnic-c" || ms[1].From != "vnic-a" {
		t.Fatalf("record: %+v, want the create at 1 and node 2's move at 3", ms)
	}
	if st := provider.StaleMutations(ms); len(st) != 0 {
		t.Fatalf("stale mutations: %+v", st)
	}
}

// A release races a move the same way: the old holder (vnic-a) read the
// private IP and stops before its DeletePrivateIp leaves while another
// node moves the address to vnic-b. The delete names the private IP's
// OCID, which moved with the address: unconditional, it would strip the
// new holder. On the old ETag it is refused; the driver looks again, finds
// the address on another VNIC, and has nothing to do.
func TestLateReleaseRefusedByTheCloud(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	_, pemKey := testKey(t)
	node2 := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	atSend, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stalled := gate.WithReady(t.Context(), func() error {
		once.Do(func() { close(atSend); <-resume })
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- e.drv.Unassign(stalled, req("vnic-a", 1)) }()
	select {
	case <-atSend:
	case err := <-done:
		t.Fatalf("the release finished before its send: %v", err)
	}
	if err := node2.Assign(t.Context(), req("vnic-b", 2), true); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("the late release: %v, want nil (nothing to do once the address left)", err)
	}
	if n := e.cnt.count(ocisim.OpDeletePrivateIp); n != 1 {
		t.Fatalf("%d DeletePrivateIp calls, want the one refused", n)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-b" {
		t.Fatalf("after the late release: %+v %v, want the address on vnic-b", obs, err)
	}
	if ms := e.sim.Mutations(); len(ms) != 2 || ms[1].Call != capture.Assign || ms[1].NIC != "vnic-b" {
		t.Fatalf("record: %+v", ms)
	}
}

// A change is sent only if the readiness check the context carries passes
// right before the send: refused from the first call on, Assign (a create
// and a move), Unassign and SetForwarding read what they need and send no
// change, and every error wraps gate.ErrNotReady.
func TestMutationsAskReadyLast(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	held := netip.MustParseAddr("10.0.0.60")
	if err := e.drv.Assign(t.Context(), provider.Request{NIC: "vnic-a", Address: held}, false); err != nil {
		t.Fatal(err)
	}
	n := len(e.sim.Mutations())
	ctx := gate.WithReady(t.Context(), func() error { return errors.New("paused past the contact window") })
	calls := map[string]func() error{
		"Assign (create)": func() error { return e.drv.Assign(ctx, req("vnic-a", 2), false) },
		"Assign (move)":   func() error { return e.drv.Assign(ctx, provider.Request{NIC: "vnic-b", Address: held, Epoch: 2}, true) },
		"Unassign":        func() error { return e.drv.Unassign(ctx, provider.Request{NIC: "vnic-a", Address: held, Epoch: 2}) },
		"SetForwarding":   func() error { return e.drv.SetForwarding(ctx, req("vnic-a", 2), true) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, gate.ErrNotReady) || !strings.Contains(err.Error(), "paused past the contact window") {
			t.Errorf("%s: %v, want the readiness refusal", name, err)
		}
	}
	if e.cnt.count(ocisim.OpGetPrivateIp) < 2 || e.cnt.count(ocisim.OpListPrivateIps) < 3 {
		t.Errorf("the calls did not read first: %v", e.cnt.calls)
	}
	if got := len(e.sim.Mutations()); got != n {
		t.Fatalf("%d mutations while not ready", got-n)
	}
	if obs, _ := e.drv.Describe(t.Context(), held); obs.NIC != "vnic-a" || obs.Forwarding {
		t.Fatalf("after the refusals: %+v", obs)
	}
}

// A change is sent once: a delayed SDK retry of an old acquire could take
// the address back from a newer holder. Reads are retried with backoff.
func TestChangesAreNeverRetriedReadsAre(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	e.cnt.setFail(ocisim.OpCreatePrivateIp, failure{n: 1, status: 429, code: "TooManyRequests"})
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled create: %v", err)
	}
	e.cnt.setFail(ocisim.OpCreatePrivateIp, failure{n: 1, status: 500, code: "InternalServerError"})
	if err := e.drv.Assign(t.Context(), req("vnic-a", 2), false); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("create on a 500: %v", err)
	}
	if n := e.cnt.count(ocisim.OpCreatePrivateIp); n != 2 {
		t.Fatalf("%d creates sent for two failed acquires, want 2", n)
	}
	if err := e.drv.Assign(t.Context(), req("vnic-a", 3), false); err != nil {
		t.Fatal(err)
	}
	e.cnt.setFail(ocisim.OpUpdatePrivateIp, failure{n: 1, status: 503, code: "ServiceUnavailable"})
	if err := e.drv.Assign(t.Context(), req("vnic-b", 4), true); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("move on a 503: %v", err)
	}
	if n := e.cnt.count(ocisim.OpUpdatePrivateIp); n != 1 {
		t.Fatalf("%d moves sent, want 1", n)
	}
	before := e.cnt.count(ocisim.OpListPrivateIps)
	e.cnt.setFail(ocisim.OpListPrivateIps, failure{n: 2, status: 429, code: "TooManyRequests"})
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-a" {
		t.Fatalf("describe after two throttles: %+v %v", obs, err)
	}
	if n := e.cnt.count(ocisim.OpListPrivateIps) - before; n != 3 {
		t.Fatalf("the list was sent %d times, want 3", n)
	}
	e.cnt.setFail(ocisim.OpListPrivateIps, failure{n: 5, status: 429, code: "TooManyRequests"})
	if _, err := e.drv.Describe(t.Context(), ip); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("describe throttled past its attempts: %v", err)
	}
}

// A create whose answer was lost is repeated with the same opc-retry-token
// (the same action): the cloud answers with the first result instead of a
// 409 for the address the first call took, and nothing is done twice.
func TestLostCreateAnswerIsReplayed(t *testing.T) {
	e := newEnv(t, []string{"vnic-a"})
	// The first create's effect shows only later, so the repeat does not
	// find the address and creates again.
	if err := e.sim.SetFaults(ocisim.Faults{RemapDelay: ocisim.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.cnt.loseNext(ocisim.OpCreatePrivateIp, 1)
	r := req("vnic-a", 1)
	if err := e.drv.Assign(t.Context(), r, false); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("the create whose answer was lost: %v", err)
	}
	if err := e.drv.Assign(t.Context(), r, false); err != nil {
		t.Fatalf("the same action again: %v", err)
	}
	if n := e.cnt.count(ocisim.OpCreatePrivateIp); n != 2 {
		t.Fatalf("%d creates, want 2", n)
	}
	// Another action for the same address is a new create, and the
	// address is taken.
	if err := e.drv.Assign(t.Context(), req("vnic-a", 2), false); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("another action's create: %v", err)
	}
	e.sim.Flush()
	if ms := e.sim.Mutations(); len(ms) != 1 || ms[0].NIC != "vnic-a" || ms[0].Epoch != 1 {
		t.Fatalf("record: %+v, want one create", ms)
	}
	if n := len(e.sim.PrivateIPs()); n != 2 {
		t.Fatalf("%d private IPs, want the primary and one", n)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	ctx := t.Context()
	if err := e.drv.Assign(ctx, req("vnic-zz", 1), false); !errors.Is(err, provider.ErrUnknownNIC) {
		t.Errorf("unknown VNIC: %v", err)
	}
	if err := e.drv.Assign(ctx, req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(ctx, req("vnic-b", 2), false); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Errorf("conflict: %v", err)
	}
	// A VNIC's primary private IP never moves.
	prim := e.sim.VNICs()[0].PrimaryIP
	if err := e.drv.Assign(ctx, provider.Request{NIC: "vnic-b", Address: prim}, true); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Errorf("seizing a primary: %v", err)
	}
	if err := e.drv.Unassign(ctx, provider.Request{NIC: e.sim.VNICs()[0].ID, Address: prim}); err == nil {
		t.Error("unassigning a primary succeeded")
	}
	// An address outside the subnet is a permanent error with OCI's words.
	bad := provider.Request{NIC: "vnic-a", Address: netip.MustParseAddr("192.168.9.9")}
	err := e.drv.Assign(ctx, bad, false)
	if err == nil || errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrThrottled) || !strings.Contains(err.Error(), "InvalidParameter") {
		t.Errorf("address outside the subnet: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.drv.Assign(cancelled, req("vnic-a", 4), false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := oci.New(oci.Options{}); err == nil {
		t.Error("a driver without a subnet was built")
	}
	if _, err := oci.New(oci.Options{SubnetID: "ocid1.subnet.oc1..x", Auth: "api_key_in_yaml"}); err == nil || !strings.Contains(err.Error(), "unknown auth") {
		t.Errorf("an unknown auth: %v", err)
	}
	// The config file chain with no config file: a clear error at once,
	// not a request signed with nothing.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("OCI_CONFIG_FILE", "")
	if _, err := oci.New(oci.Options{SubnetID: "ocid1.subnet.oc1..x"}); err == nil {
		t.Error("a driver was built without any credentials")
	} else {
		t.Logf("without credentials: %v", err)
	}
	e.srv.Close()
	if _, err := e.drv.Describe(ctx, ip); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("server down: %v", err)
	}
	if err := e.drv.SetForwarding(ctx, req("vnic-a", 5), true); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("server down, forwarding: %v", err)
	}
}

// A storm of 429s and 5xx on every operation while two nodes move one
// address among three VNICs: every acquire either succeeds or fails with a
// clear kind (throttled, unavailable, or the cloud's 412 refusal), and the
// record is one chain of moves, each from the VNIC that held the address
// then, ending where Describe finds it: nothing lost, never two holders.
func TestStorm(t *testing.T) {
	vnics := []string{"vnic-a", "vnic-b", "vnic-c"}
	e := newEnv(t, vnics)
	_, pemKey := testKey(t)
	nodes := []*oci.Driver{e.drv, e.driver(t, pemKey)}
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	n := len(e.sim.Mutations())
	storm := []ocisim.ErrorRate{{Code: ocisim.CodeTooManyRequests, Rate: 0.2}, {Code: ocisim.CodeInternalServerError, Rate: 0.1}}
	if err := e.sim.SetFaults(ocisim.Faults{Errors: map[string][]ocisim.ErrorRate{ocisim.AnyOperation: storm}}); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		kinds = map[string]int{}
		epoch atomic.Uint64
		wg    sync.WaitGroup
	)
	epoch.Store(1)
	for g, node := range nodes {
		wg.Go(func() {
			for i := range 30 {
				err := node.Assign(t.Context(), req(vnics[(g+i)%len(vnics)], epoch.Add(1)), true)
				kind := ""
				switch {
				case err == nil:
					kind = "ok"
				case errors.Is(err, provider.ErrThrottled):
					kind = "throttled"
				case errors.Is(err, provider.ErrUnavailable):
					kind = "unavailable"
				case errors.Is(err, oci.ErrChanged):
					kind = "changed"
				case errors.Is(err, provider.ErrStale):
					// The two nodes draw epochs from one counter: one
					// that drew lower than the other's last write is
					// refused on the record.
					kind = "stale"
				default:
					t.Errorf("an acquire in the storm failed without a kind: %v", err)
				}
				mu.Lock()
				kinds[kind]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if kinds["ok"] == 0 || kinds["throttled"]+kinds["unavailable"] == 0 {
		t.Fatalf("outcomes %v: want successes and failures of the storm", kinds)
	}
	t.Logf("outcomes of 60 acquires: %v", kinds)
	if err := e.sim.SetFaults(ocisim.Faults{}); err != nil {
		t.Fatal(err)
	}
	obs, err := e.drv.Describe(t.Context(), ip)
	if err != nil {
		t.Fatal(err)
	}
	holder := "vnic-a"
	for i, m := range e.sim.Mutations()[n:] {
		if m.Call != capture.Assign || m.From != holder || m.NIC == holder {
			t.Fatalf("mutation %d: %+v, with the address on %s", i, m, holder)
		}
		holder = m.NIC
	}
	if obs.NIC != holder {
		t.Fatalf("the record leaves the address on %s, Describe finds it on %q", holder, obs.NIC)
	}
}

// BenchmarkMove reports what a seize costs: API calls per move (a get of
// the private IP and its ETag, its OCID remembered from the first look;
// the conditional update; a get that sees it) and the time of a move
// against the simulator on loopback.
func BenchmarkMove(b *testing.B) {
	k, pemKey := testKey(b)
	sim, err := ocisim.New(ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}, Keys: map[string]*rsa.PublicKey{keyID: &k.PublicKey}})
	if err != nil {
		b.Fatal(err)
	}
	cnt := &counting{next: sim, calls: map[string]int{}, fail: map[string]failure{}, lose: map[string]int{}}
	srv := httptest.NewServer(cnt)
	defer srv.Close()
	drv, err := oci.New(oci.Options{SubnetID: sim.SubnetID(), Host: srv.URL,
		ConfigurationProvider: common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fingerprint, pemKey, nil)})
	if err != nil {
		b.Fatal(err)
	}
	if err := drv.Assign(b.Context(), req("vnic-a", 1), false); err != nil {
		b.Fatal(err)
	}
	cnt.mu.Lock()
	clear(cnt.calls)
	cnt.mu.Unlock()
	nics := []string{"vnic-b", "vnic-a"}
	i := 0
	for b.Loop() {
		i++
		if err := drv.Assign(b.Context(), req(nics[i%2], uint64(i+1)), true); err != nil {
			b.Fatal(err)
		}
	}
	cnt.mu.Lock()
	total := 0
	for _, c := range cnt.calls {
		total += c
	}
	cnt.mu.Unlock()
	b.ReportMetric(float64(total)/float64(i), "calls/move")
}

// The driver remembers an address's private IP OCID; when another node
// deleted that object and made a new one for the address, the remembered
// OCID answers 404 and the driver finds the new one: the seize moves it.
func TestRememberedOCIDGoneStale(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b", "vnic-c"})
	_, pemKey := testKey(t)
	node2 := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	first := e.sim.PrivateIPs()
	if err := node2.Unassign(t.Context(), req("vnic-a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := node2.Assign(t.Context(), req("vnic-b", 3), false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(t.Context(), req("vnic-c", 4), true); err != nil {
		t.Fatalf("a seize with a remembered OCID gone stale: %v", err)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-c" {
		t.Fatalf("after the seize: %+v %v", obs, err)
	}
	var ids []string
	for _, p := range append(first, e.sim.PrivateIPs()...) {
		if p.Address == ip {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("private IP OCIDs of %s before and after: %v, want two different", ip, ids)
	}
	ms := e.sim.Mutations()
	if len(ms) != 4 || ms[3].NIC != "vnic-c" || ms[3].From != "vnic-b" || ms[3].Epoch != 4 {
		t.Fatalf("record: %+v", ms)
	}
}

// A caller that gives up during a call gets its context's error at once
// and nothing changes; under the race detector this also checks the
// driver's guard against the SDK's retry loop racing with itself when its
// context ends mid-call.
func TestCancelledMidCall(t *testing.T) {
	e := newEnv(t, []string{"vnic-a"})
	for _, op := range []string{ocisim.OpListPrivateIps, ocisim.OpCreatePrivateIp} {
		// An hour of latency on op holds the call there.
		if err := e.sim.SetFaults(ocisim.Faults{OperationLatency: map[string]ocisim.Duration{op: ocisim.Duration(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		before := e.cnt.count(op)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.drv.Assign(ctx, req("vnic-a", 1), false) }()
		for e.cnt.count(op) == before {
			select {
			case err := <-done:
				t.Fatalf("the acquire returned before its %s arrived: %v", op, err)
			case <-time.After(time.Millisecond):
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled during %s: %v, want context.Canceled", op, err)
		}
	}
	if n := len(e.sim.PrivateIPs()); n != 1 || len(e.sim.Mutations()) != 0 {
		t.Fatalf("an abandoned acquire changed something: %+v", e.sim.PrivateIPs())
	}
}

// The epoch record is the wall against a zombie whose whole call comes
// after the newer write, which the ETag alone cannot stop (it reads the
// new ETag): node 2 moves the address to vnic-c at epoch 3; node 1, its
// gate off, then tries to move it to vnic-b at epoch 2 and to release it
// from vnic-c at epoch 2. Both read epoch 3 in the private IP's freeform
// tags and fail with provider.ErrStale without sending a write; a current
// action (epoch 4) still moves it, and raises the record. Built with
// ipfence_revert_cloudwall (epochtag.Enforced false) the stale move
// executes and this test fails.
func TestStaleActionRefusedOnTheRecord(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b", "vnic-c"})
	_, pemKey := testKey(t)
	node2 := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := node2.Assign(t.Context(), req("vnic-c", 3), true); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		return e.cnt.count(ocisim.OpUpdatePrivateIp) + e.cnt.count(ocisim.OpDeletePrivateIp) + e.cnt.count(ocisim.OpCreatePrivateIp)
	}
	before := writes()
	if err := e.drv.Assign(t.Context(), req("vnic-b", 2), true); !errors.Is(err, provider.ErrStale) || !strings.Contains(err.Error(), "holds 3)") {
		t.Fatalf("the stale move: %v, want ErrStale naming epoch 3", err)
	}
	if err := e.drv.Unassign(t.Context(), req("vnic-c", 2)); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the stale release: %v, want ErrStale", err)
	}
	if err := e.drv.SetForwarding(t.Context(), req("vnic-c", 2), true); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("stale forwarding on the holder: %v, want ErrStale", err)
	}
	if n := e.cnt.count(ocisim.OpUpdateVnic); n != 0 {
		t.Fatalf("%d UpdateVnic calls for stale forwarding, want none", n)
	}
	if err := e.drv.SetForwarding(t.Context(), req("vnic-a", 2), true); err != nil {
		t.Fatalf("forwarding on a former holder: %v", err)
	}
	if n := writes() - before; n != 0 {
		t.Fatalf("%d writes sent for stale actions, want none", n)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-c" {
		t.Fatalf("after the stale actions: %+v %v, want the address on vnic-c", obs, err)
	}
	if err := e.drv.Assign(t.Context(), req("vnic-b", 4), true); err != nil {
		t.Fatalf("the current move: %v", err)
	}
	ms := e.sim.Mutations()
	// The create at 1, the moves at 3 and 4, and between them the
	// forwarding on the former holder, stale but harmless.
	if len(ms) != 4 || ms[1].Epoch != 3 || ms[2].Call != capture.EnableForwarding || ms[2].NIC != "vnic-a" || ms[3].Epoch != 4 || ms[3].NIC != "vnic-b" {
		t.Fatalf("record: %+v, want the create at 1, the move at 3, forwarding on vnic-a, the move at 4", ms)
	}
	for _, st := range provider.StaleMutations(ms) {
		if st.Effective {
			t.Fatalf("a stale mutation took effect: %+v", st)
		}
	}
	var tags map[string]string
	for _, p := range e.sim.PrivateIPs() {
		if p.Address == ip {
			tags = p.Freeform
		}
	}
	if tags["ipfence-epochs-0"] != ip.String()+"=4" {
		t.Fatalf("the private IP's tags: %v, want the record at epoch 4", tags)
	}
}

// An assign that finds the address on its VNIC already still raises the
// private IP's epoch record (a tag-only UpdatePrivateIp), so that a move
// for an older epoch, from a node that has not heard of the newer one, is
// refused by the cloud instead of taking the address from its holder.
func TestAssignInPlaceRaisesTheRecord(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	_, pemKey := testKey(t)
	lagging := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(t.Context(), req("vnic-b", 2), true); err != nil {
		t.Fatal(err)
	}
	// The holder's assign at 3 finds the address in place.
	if err := e.drv.Assign(t.Context(), req("vnic-b", 3), true); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count(ocisim.OpUpdatePrivateIp); n != 2 {
		t.Fatalf("%d UpdatePrivateIp calls, want 2: the move at 2 and the record raised at 3", n)
	}
	// Again at 3: the record holds 3 already, nothing is written.
	if err := e.drv.Assign(t.Context(), req("vnic-b", 3), true); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count(ocisim.OpUpdatePrivateIp); n != 2 {
		t.Fatalf("%d UpdatePrivateIp calls after a second assign at 3, want still 2", n)
	}
	// A node one event behind moves for epoch 2.
	err := lagging.Assign(t.Context(), req("vnic-a", 2), true)
	if !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the lagging move at epoch 2: %v, want ErrStale", err)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-b" {
		t.Fatalf("after the lagging move: %+v %v, want the address on vnic-b", obs, err)
	}
	ms := e.sim.Mutations()
	if len(ms) != 2 || ms[0].Epoch != 1 || ms[1].Epoch != 2 || ms[1].NIC != "vnic-b" {
		t.Fatalf("record: %+v, want the create at 1 and the move at 2 only", ms)
	}
	// A hold older than the record is refused as stale too.
	if err := e.drv.Assign(t.Context(), req("vnic-b", 2), true); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("an assign in place at 2 after 3: %v, want ErrStale", err)
	}
}

// A read may show a placement late. An assign whose read still shows the
// address on its own VNIC, when it has in fact moved away, must not
// report done with the address elsewhere: the write that raises the
// record names the VNIC, and so moves the address back.
func TestAssignInPlaceOnALateReadMovesTheAddress(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	_, pemKey := testKey(t)
	other := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	// From now on placements show an hour late: the move to vnic-b at 2
	// is made, and reads still show vnic-a.
	if err := e.sim.SetFaults(ocisim.Faults{RemapDelay: ocisim.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := other.Assign(t.Context(), req("vnic-b", 2), true); err != nil {
		t.Fatal(err)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-a" {
		t.Fatalf("the late read: %+v %v, want vnic-a still shown", obs, err)
	}
	// vnic-a's node acts at 3 and reads the address in place.
	if err := e.drv.Assign(t.Context(), req("vnic-a", 3), true); err != nil {
		t.Fatal(err)
	}
	// vnic-b's node releases at 3, as the former holder does.
	if err := other.Unassign(t.Context(), req("vnic-b", 3)); err != nil {
		t.Fatal(err)
	}
	e.sim.Flush()
	ms := e.sim.Mutations()
	if len(ms) != 3 || ms[2].Epoch != 3 || ms[2].NIC != "vnic-a" || ms[2].From != "vnic-b" {
		t.Fatalf("record: %+v, want the create at 1, the move to vnic-b at 2 and the move back to vnic-a at 3", ms)
	}
	if obs, err := e.drv.Describe(t.Context(), ip); err != nil || obs.NIC != "vnic-a" {
		t.Fatalf("in the end: %+v %v, want the address on vnic-a", obs, err)
	}
}
