package azure_test

import (
	"context"
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

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// fakeToken is a token credential for the simulator, which wants any
// bearer token; it counts the tokens asked for.
type fakeToken struct{ asked atomic.Int64 }

func (f *fakeToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	f.asked.Add(1)
	return azcore.AccessToken{Token: "test-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// counting sits in front of the simulator and counts calls by method and
// kind of path, and PUTs by NIC.
type counting struct {
	next  http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := "nic"
	switch {
	case strings.Contains(r.URL.Path, "/operations/"):
		kind = "operation"
	case strings.HasSuffix(r.URL.Path, "/networkInterfaces"):
		kind = "list"
	}
	c.mu.Lock()
	c.calls[r.Method+" "+kind]++
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *counting) count(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[k]
}

// env is a simulator served over TLS on loopback, the counter in front of
// it, and a driver on it that trusts the test server's certificate.
type env struct {
	sim  *armsim.Server
	cnt  *counting
	srv  *httptest.Server
	drv  *azure.Driver
	cred *fakeToken
}

func newEnv(t *testing.T, nics []string) *env {
	t.Helper()
	sim, err := armsim.New(armsim.Config{NICs: nics, Limits: armsim.Limits{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counting{next: sim, calls: map[string]int{}}
	srv := httptest.NewTLSServer(cnt)
	t.Cleanup(srv.Close)
	e := &env{sim: sim, cnt: cnt, srv: srv, cred: &fakeToken{}}
	e.drv = e.driver(t)
	return e
}

// driver builds another driver on the same simulator: another node.
func (e *env) driver(t *testing.T, opts ...func(*azure.Options)) *azure.Driver {
	t.Helper()
	o := azure.Options{
		SubscriptionID: e.sim.SubscriptionID(), ResourceGroup: e.sim.ResourceGroup(),
		Credential: e.cred, Endpoint: e.srv.URL, Transport: e.srv.Client(),
		PollFrequency: 5 * time.Millisecond, ReadRetries: 3, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond,
	}
	for _, f := range opts {
		f(&o)
	}
	drv, err := azure.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

// ignoreEpochs builds a driver for the contract suite, whose concurrent
// callers draw epochs from one counter and then race (see
// azure.Options.IgnoreEpochRecord).
func ignoreEpochs(o *azure.Options) { o.IgnoreEpochRecord = true }

// recorded makes the driver a provider.Recorder through the simulator's
// record, so that the suite checks the fencing token travels.
type recorded struct {
	*azure.Driver
	sim *armsim.Server
}

func (r recorded) Mutations() []provider.Mutation { return r.sim.Mutations() }

var ip = netip.MustParseAddr("10.0.0.50")

func req(nic string, epoch uint64) provider.Request {
	return provider.Request{NIC: nic, Address: ip, Epoch: capture.Epoch(epoch), IdempotencyKey: fmt.Sprintf("t:%s:epoch:%d", nic, epoch)}
}

func expect(t *testing.T, d *azure.Driver, nic string, fwd bool) {
	t.Helper()
	obs, err := d.Describe(t.Context(), ip)
	if err != nil {
		t.Fatal(err)
	}
	if want := (provider.Observation{Address: ip, NIC: nic, Forwarding: fwd}); obs != want {
		t.Fatalf("Describe = %+v, want %+v", obs, want)
	}
}

// A move is two conditional writes: the PUT of the old NIC without the
// address, then the PUT of the new one with it, each polled to its end,
// each recorded with the action's epoch and key; the bearer token comes
// from the credential.
func TestMoveIsTwoWrites(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	ctx := t.Context()
	if err := e.drv.Assign(ctx, req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	expect(t, e.drv, "nic-a", false)
	puts, polls := e.cnt.count("PUT nic"), e.cnt.count("GET operation")
	if puts != 1 || polls < 1 {
		t.Fatalf("an assign of a free address: %d PUTs, %d polls; want 1 PUT polled to its end", puts, polls)
	}
	if err := e.drv.Assign(ctx, req("nic-b", 2), true); err != nil {
		t.Fatal(err)
	}
	expect(t, e.drv, "nic-b", false)
	if n := e.cnt.count("PUT nic") - puts; n != 2 {
		t.Fatalf("a move made %d PUTs, want 2", n)
	}
	ms := e.sim.Mutations()
	want := []provider.Mutation{
		{Call: capture.Assign, NIC: "nic-a", Address: ip, Epoch: 1, IdempotencyKey: "t:nic-a:epoch:1"},
		{Call: capture.Unassign, NIC: "nic-a", Address: ip, Epoch: 2, IdempotencyKey: "t:nic-b:epoch:2"},
		{Call: capture.Assign, NIC: "nic-b", Address: ip, Epoch: 2, IdempotencyKey: "t:nic-b:epoch:2"},
	}
	if len(ms) != len(want) {
		t.Fatalf("record %+v", ms)
	}
	for i := range want {
		want[i].Time = ms[i].Time
		if ms[i] != want[i] {
			t.Fatalf("mutation %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
	if e.cred.asked.Load() == 0 {
		t.Fatal("the credential was never asked for a token")
	}
	// By resource id too, and the NIC keeps its primary.
	id := e.sim.NICID("nic-a")
	if err := e.drv.Assign(ctx, provider.Request{NIC: id, Address: ip, Epoch: 3}, true); err != nil {
		t.Fatal(err)
	}
	expect(t, e.drv, "nic-a", false)
	if err := e.drv.Assign(ctx, provider.Request{NIC: "nic-b", Address: netip.MustParseAddr("10.0.0.4"), Epoch: 4}, true); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("seizing nic-a's primary: %v", err)
	}
	other := strings.Replace(id, "/resourceGroups/"+e.sim.ResourceGroup()+"/", "/resourceGroups/elsewhere/", 1)
	if err := e.drv.Assign(ctx, provider.Request{NIC: other, Address: ip, Epoch: 5}, true); err == nil || !strings.Contains(err.Error(), "not in subscription") {
		t.Fatalf("a NIC of another resource group: %v", err)
	}
}

// TestStaleWriterGets412 is the cloud as a second wall: two nodes race a
// move of one address. The stale one reads the NICs, and its readiness
// check (which passes: its fence is off) holds it right before its first
// send while the fresh one moves the address elsewhere. When the stale
// one sends its PUT, conditional on the etag it read, ARM answers 412 (and
// counts a stale write refused); reading again, the driver finds epoch 3
// in nic-a's epoch record and fails with provider.ErrStale, it sends
// nothing more, and the record has nothing of its epoch.
func TestStaleWriterGets412(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b", "nic-c"})
	ctx := t.Context()
	if err := e.drv.Assign(ctx, req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	stale, fresh := e.driver(t), e.driver(t)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sctx := gate.WithReady(ctx, func() error {
		once.Do(func() { close(held); <-release })
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- stale.Assign(sctx, req("nic-b", 2), true) }()
	<-held
	putsBefore := e.cnt.count("PUT nic")
	if err := fresh.Assign(ctx, req("nic-c", 3), true); err != nil {
		t.Fatal(err)
	}
	close(release)
	err := <-done
	if !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the stale move: %v, want ErrStale", err)
	}
	if n := e.sim.StaleRefused(); n != 1 {
		t.Fatalf("the simulator counted %d stale PUTs refused, want 1", n)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("the stale move's error %v does not carry ARM's 412", err)
	}
	expect(t, e.drv, "nic-c", false)
	// The fresh move's two PUTs and the stale one's refused PUT, nothing
	// after it.
	if n := e.cnt.count("PUT nic") - putsBefore; n != 3 {
		t.Fatalf("%d PUTs after the stale one was held, want 3", n)
	}
	for _, m := range e.sim.Mutations() {
		if m.Epoch == 2 {
			t.Fatalf("the stale writer changed something: %+v", m)
		}
	}
}

// A 412 caused by a write about another address of the same NIC is not a
// conflict for this one: the driver reads again, finds the address where
// it was, and writes with the new etag.
func TestUnrelated412IsRetried(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	ctx := t.Context()
	other := provider.Request{NIC: "nic-a", Address: netip.MustParseAddr("10.0.0.60"), Epoch: 1}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sctx := gate.WithReady(ctx, func() error {
		once.Do(func() { close(held); <-release })
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- e.drv.Assign(sctx, req("nic-a", 2), false) }()
	<-held
	if err := e.driver(t).Assign(ctx, other, false); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("an assign whose NIC changed about another address: %v", err)
	}
	expect(t, e.drv, "nic-a", false)
	if obs, err := e.drv.Describe(ctx, other.Address); err != nil || obs.NIC != "nic-a" {
		t.Fatalf("the other address: %+v %v", obs, err)
	}
}

// TestMutationsAskReadyLast: with a readiness check that refuses from the
// first read on, as for a node paused inside its look, no PUT is sent and
// every error wraps gate.ErrNotReady; reads are not gated.
func TestMutationsAskReadyLast(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	if err := e.drv.Assign(t.Context(), req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	puts := e.cnt.count("PUT nic")
	ctx := gate.WithReady(t.Context(), func() error { return errors.New("paused past the contact window") })
	calls := map[string]func() error{
		"Assign(move)": func() error { return e.drv.Assign(ctx, req("nic-b", 2), true) },
		"Assign(free)": func() error {
			return e.drv.Assign(ctx, provider.Request{NIC: "nic-b", Address: netip.MustParseAddr("10.0.0.61")}, false)
		},
		"Unassign":      func() error { return e.drv.Unassign(ctx, req("nic-a", 2)) },
		"SetForwarding": func() error { return e.drv.SetForwarding(ctx, req("nic-a", 2), true) },
		"AssignMany": func() error {
			return e.drv.AssignMany(ctx, "nic-b", []provider.Request{req("nic-b", 2), {NIC: "nic-b", Address: netip.MustParseAddr("10.0.0.62")}}, true)
		},
		"UnassignMany": func() error {
			return e.drv.UnassignMany(ctx, "nic-a", []provider.Request{req("nic-a", 2), {NIC: "nic-a", Address: netip.MustParseAddr("10.0.0.62")}})
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, gate.ErrNotReady) || !strings.Contains(err.Error(), "paused past the contact window") {
			t.Errorf("%s: %v, want the readiness refusal", name, err)
		}
	}
	if n := e.cnt.count("PUT nic") - puts; n != 0 {
		t.Fatalf("%d PUTs sent while not ready", n)
	}
	if _, err := e.drv.Describe(ctx, ip); err != nil {
		t.Fatalf("a read under a refusing check: %v", err)
	}
	expect(t, e.drv, "nic-a", false)
}

// A write is sent once whatever ARM answers; reads are retried.
func TestWritesAreNeverRetried(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	rates := []armsim.ErrorRate{{Code: armsim.CodeServiceUnavailable, Rate: 1}}
	if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.OpPut: rates}}); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(t.Context(), req("nic-a", 1), false); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("assign on a 503: %v", err)
	}
	if n := e.cnt.count("PUT nic"); n != 1 {
		t.Fatalf("the PUT was sent %d times, want once", n)
	}
	if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.OpList: {{Code: armsim.CodeInternal, Rate: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.Describe(t.Context(), ip); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("describe on 500s: %v", err)
	}
	if n := e.cnt.count("GET list"); n != 1+4 {
		t.Fatalf("%d lists, want the first and 3 retries of the describe", n)
	}
}

// ARM's throttle (429 with Retry-After) is ErrThrottled for a write, which
// is not retried, and a read waits for it.
func TestThrottled(t *testing.T) {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a"}, Limits: armsim.Limits{WriteBurst: 1, WriteRate: 0.001, ReadBurst: 100, ReadRate: 100}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(sim)
	defer srv.Close()
	drv, err := azure.New(azure.Options{SubscriptionID: sim.SubscriptionID(), ResourceGroup: sim.ResourceGroup(),
		Credential: &fakeToken{}, Endpoint: srv.URL, Transport: srv.Client(), PollFrequency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Assign(t.Context(), req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	err = drv.Assign(t.Context(), provider.Request{NIC: "nic-a", Address: netip.MustParseAddr("10.0.0.51"), Epoch: 2}, false)
	if !errors.Is(err, provider.ErrThrottled) || !strings.Contains(err.Error(), "SubscriptionRequestsThrottled") {
		t.Fatalf("a write past the bucket: %v", err)
	}
	if ms := sim.Mutations(); len(ms) != 1 {
		t.Fatalf("record %+v", ms)
	}
}

// Late visibility: with the operation taking 300 ms, Assign returns only
// once it succeeded, so its change is in the record (which holds only
// visible changes) when it returns.
func TestAssignWaitsForTheOperation(t *testing.T) {
	e := newEnv(t, []string{"nic-a"})
	if err := e.sim.SetFaults(armsim.Faults{Delay: ec2sim.Duration(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(t.Context(), req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if ms := e.sim.Mutations(); len(ms) != 1 || ms[0].NIC != "nic-a" {
		t.Fatalf("Assign returned before its operation succeeded: record %+v", ms)
	}
	if n := e.cnt.count("GET operation"); n < 1 {
		t.Fatalf("the operation was never polled")
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	ctx := t.Context()
	for name, err := range map[string]error{
		"Assign":        e.drv.Assign(ctx, req("nic-zz", 1), true),
		"Unassign":      e.drv.Unassign(ctx, req("nic-zz", 1)),
		"SetForwarding": e.drv.SetForwarding(ctx, req("nic-zz", 1), true),
	} {
		if !errors.Is(err, provider.ErrUnknownNIC) {
			t.Errorf("%s on an unknown NIC: %v", name, err)
		}
	}
	bad := provider.Request{NIC: "nic-a", Address: netip.MustParseAddr("192.168.9.9")}
	err := e.drv.Assign(ctx, bad, false)
	if err == nil || errors.Is(err, provider.ErrUnavailable) || !strings.Contains(err.Error(), "PrivateIPAddressNotInSubnet") {
		t.Errorf("address outside the subnet: %v", err)
	}
	if err := e.drv.Assign(ctx, provider.Request{NIC: "nic-a", Address: netip.MustParseAddr("fd00::1")}, false); err == nil {
		t.Error("an IPv6 address was accepted")
	}
	if _, err := azure.New(azure.Options{ResourceGroup: "rg", Credential: &fakeToken{}}); err == nil {
		t.Error("a driver without a subscription")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.drv.Assign(cancelled, req("nic-a", 4), false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	e.srv.Close()
	if _, err := e.drv.Describe(ctx, ip); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("server down: %v", err)
	}
}

// TestBatches: 60 addresses go onto a NIC with one PUT, each recorded
// with its own epoch and key; where they are is read with one list; a
// move of some of them from two NICs is a PUT of each NIC they leave and
// one of the NIC they join; a release names them in one PUT and leaves
// alone those the NIC no longer holds.
func TestBatches(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b", "nic-c"})
	ctx := t.Context()
	var reqs []provider.Request
	var addrs []netip.Addr
	for i := range 60 {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(100 + i)})
		addrs = append(addrs, a)
		reqs = append(reqs, provider.Request{NIC: "nic-a", Address: a, Epoch: capture.Epoch(1000 + i), IdempotencyKey: fmt.Sprintf("k%d", i)})
	}
	if err := e.drv.AssignMany(ctx, "nic-a", reqs, false); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("PUT nic"); n != 1 {
		t.Fatalf("%d PUTs for 60 addresses, want 1", n)
	}
	ms := e.sim.Mutations()
	if len(ms) != 60 {
		t.Fatalf("%d mutations, want 60", len(ms))
	}
	for i, m := range ms {
		if m.Call != capture.Assign || m.Address != addrs[i] || m.Epoch != capture.Epoch(1000+i) || m.IdempotencyKey != fmt.Sprintf("k%d", i) || m.NIC != "nic-a" {
			t.Fatalf("mutation %d: %+v", i, m)
		}
	}
	lists := e.cnt.count("GET list")
	obs, err := e.drv.DescribeMany(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("GET list") - lists; n != 1 {
		t.Fatalf("%d lists for 60 addresses, want 1", n)
	}
	for _, a := range addrs {
		if obs[a] != (provider.Observation{Address: a, NIC: "nic-a"}) {
			t.Fatalf("%s: %+v", a, obs[a])
		}
	}
	// addrs[0] goes to nic-b first; then addrs[0] (from nic-b) and
	// addrs[1] (from nic-a) go to nic-c in one call.
	if err := e.drv.Assign(ctx, provider.Request{NIC: "nic-b", Address: addrs[0], Epoch: 2000}, true); err != nil {
		t.Fatal(err)
	}
	puts := e.cnt.count("PUT nic")
	move := []provider.Request{{NIC: "nic-c", Address: addrs[0], Epoch: 2001, IdempotencyKey: "m0"}, {NIC: "nic-c", Address: addrs[1], Epoch: 2002, IdempotencyKey: "m1"}}
	if err := e.drv.AssignMany(ctx, "nic-c", move, false); !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("a batch without reassignment of held addresses: %v", err)
	}
	if err := e.drv.AssignMany(ctx, "nic-c", move, true); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("PUT nic") - puts; n != 3 {
		t.Fatalf("the move from two NICs made %d PUTs, want 3", n)
	}
	got := e.sim.Mutations()[62:]
	if len(got) != 4 || got[0].NIC != "nic-a" || got[0].Call != capture.Unassign || got[0].Epoch != 2002 ||
		got[1].NIC != "nic-b" || got[1].Call != capture.Unassign || got[1].Epoch != 2001 ||
		got[2].NIC != "nic-c" || got[2].Epoch != 2001 || got[2].IdempotencyKey != "m0" || got[3].NIC != "nic-c" || got[3].Epoch != 2002 {
		t.Fatalf("the move's record: %+v", got)
	}
	rel := []provider.Request{{NIC: "nic-a", Address: addrs[1], Epoch: 3000}, {NIC: "nic-a", Address: addrs[2], Epoch: 3001}, {NIC: "nic-a", Address: addrs[3], Epoch: 3002}}
	puts = e.cnt.count("PUT nic")
	if err := e.drv.UnassignMany(ctx, "nic-a", rel); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("PUT nic") - puts; n != 1 {
		t.Fatalf("the release made %d PUTs, want 1", n)
	}
	obs, err = e.drv.DescribeMany(ctx, addrs[:5])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nic-c", "nic-c", "", "", "nic-a"}
	for i, a := range addrs[:5] {
		if obs[a].NIC != want[i] {
			t.Fatalf("%s on %q, want %q (%+v)", a, obs[a].NIC, want[i], obs)
		}
	}
}

// The executor batches through the driver.
var _ executor.Batcher = (*azure.Driver)(nil)

// TestStorm: 5% 429s and 5% 500s on every ARM operation while two nodes
// move one address among three NICs. Every move succeeds or fails as
// throttled, unavailable or a conflict; the record is one chain of
// two-step moves (an unassign only from the NIC holding the address, an
// assign only when none does) that ends where Describe finds it: never on
// two NICs, nothing lost from the record.
func TestStorm(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b", "nic-c"})
	ctx := t.Context()
	if err := e.drv.Assign(ctx, req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	rates := []armsim.ErrorRate{{Code: armsim.CodeTooManyRequests, Rate: 0.05}, {Code: armsim.CodeInternal, Rate: 0.05}}
	if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.AnyOperation: rates}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	var epoch atomic.Uint64
	epoch.Store(1)
	for node := range 2 {
		d := e.driver(t)
		wg.Go(func() {
			for i := range 30 {
				nic := []string{"nic-a", "nic-b", "nic-c"}[(node+i)%3]
				err := d.Assign(ctx, req(nic, epoch.Add(1)), true)
				kind := "ok"
				switch {
				case err == nil:
				case errors.Is(err, provider.ErrThrottled):
					kind = "throttled"
				case errors.Is(err, provider.ErrUnavailable):
					kind = "unavailable"
				case errors.Is(err, azure.ErrConflict):
					kind = "conflict"
				case errors.Is(err, provider.ErrStale):
					// The nodes draw epochs from one counter: one that
					// drew lower than the other's last write is refused.
					kind = "stale"
				default:
					t.Errorf("move to %s: %v", nic, err)
					kind = "other"
				}
				mu.Lock()
				outcomes[kind]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes of 60 moves: %v", outcomes)
	if outcomes["ok"] == 0 {
		t.Fatalf("no move succeeded: %v", outcomes)
	}
	e.sim.Reset()
	obs, err := e.drv.Describe(ctx, ip)
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	for i, m := range e.sim.Mutations() {
		switch {
		case m.Address != ip || m.From != "":
			t.Fatalf("mutation %d: %+v", i, m)
		case m.Call == capture.Unassign && m.NIC != holder:
			t.Fatalf("mutation %d took %s off %s, which did not hold it (%q did)", i, ip, m.NIC, holder)
		case m.Call == capture.Unassign:
			holder = ""
		case m.Call == capture.Assign && holder != "":
			t.Fatalf("mutation %d put %s on %s while %s held it", i, ip, m.NIC, holder)
		case m.Call == capture.Assign:
			holder = m.NIC
		default:
			t.Fatalf("mutation %d: %+v", i, m)
		}
	}
	if holder != obs.NIC {
		t.Fatalf("the record leaves %s on %q, Describe says %q", ip, holder, obs.NIC)
	}
}

// A PUT that ARM accepted and whose polls are throttled is not a refusal:
// its change may be made, so the error is ErrUnavailable, not
// ErrThrottled (which says nothing happened).
func TestThrottledPollIsUnavailable(t *testing.T) {
	e := newEnv(t, []string{"nic-a"})
	if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.OpStatus: {{Code: armsim.CodeTooManyRequests, Rate: 1}}}}); err != nil {
		t.Fatal(err)
	}
	err := e.drv.Assign(t.Context(), req("nic-a", 1), false)
	if !errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled polls: %v", err)
	}
	e.sim.Reset()
	expect(t, e.drv, "nic-a", false)
}

// The epoch record stops a zombie whose whole call comes after the newer
// write, which the etag alone cannot (it reads the new etag): a node moves
// the address to nic-c at epoch 3; another, its gate off, then tries at
// epoch 2 to move it to nic-b, to release it from nic-c, and (after nic-c
// released it at epoch 4) to take it from no NIC. Each finds a newer epoch
// in the NICs' tags (ipfence-epochs-0) and fails with provider.ErrStale
// without a PUT; in a batch, the current request of the two goes ahead.
// Built with ipfence_revert_cloudwall (epochtag.Enforced false) the stale
// move executes and this test fails.
func TestStaleActionRefusedOnTheRecord(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b", "nic-c"})
	ctx := t.Context()
	zombie := e.driver(t)
	if err := e.drv.Assign(ctx, req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(ctx, req("nic-c", 3), true); err != nil {
		t.Fatal(err)
	}
	puts := e.cnt.count("PUT nic")
	if err := zombie.Assign(ctx, req("nic-b", 2), true); !errors.Is(err, provider.ErrStale) || !strings.Contains(err.Error(), "the record holds 3") {
		t.Fatalf("the stale move: %v, want ErrStale naming epoch 3", err)
	}
	if err := zombie.Unassign(ctx, req("nic-c", 2)); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the stale release: %v, want ErrStale", err)
	}
	if err := zombie.SetForwarding(ctx, req("nic-c", 2), true); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("stale forwarding on the holder: %v, want ErrStale", err)
	}
	if n := e.cnt.count("PUT nic") - puts; n != 0 {
		t.Fatalf("%d PUTs for stale actions, want none", n)
	}
	expect(t, e.drv, "nic-c", false)
	// On a NIC that does not hold the address, forwarding is the NIC's
	// own business and goes ahead.
	if err := zombie.SetForwarding(ctx, req("nic-a", 2), true); err != nil {
		t.Fatalf("forwarding on a former holder: %v", err)
	}
	if err := e.drv.Unassign(ctx, req("nic-c", 4)); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Assign(ctx, req("nic-b", 2), true); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the stale take of a released address: %v, want ErrStale", err)
	}
	expect(t, e.drv, "", false)
	// A batch of a stale request and a current one: the current one is
	// placed, the call reports the stale one.
	other := netip.MustParseAddr("10.0.0.51")
	err := zombie.AssignMany(ctx, "nic-b", []provider.Request{req("nic-b", 2), {NIC: "nic-b", Address: other, Epoch: 9}}, true)
	if !errors.Is(err, provider.ErrStale) {
		t.Fatalf("the batch: %v, want ErrStale for its stale request", err)
	}
	obs, derr := e.drv.DescribeMany(ctx, []netip.Addr{ip, other})
	if derr != nil || obs[ip].NIC != "" || obs[other].NIC != "nic-b" {
		t.Fatalf("after the batch: %+v %v, want %s on no NIC and %s on nic-b", obs, derr, ip, other)
	}
	ms := e.sim.Mutations()
	for _, st := range provider.StaleMutations(ms) {
		if st.Effective {
			t.Fatalf("a stale mutation took effect: %+v", st)
		}
	}
	for _, m := range ms {
		if m.Epoch == 2 && (m.Call != capture.EnableForwarding || m.NIC != "nic-a") {
			t.Fatalf("the zombie changed something beyond the former holder's forwarding: %+v", m)
		}
	}
	var tags map[string]string
	for _, n := range e.sim.State() {
		if n.Name == "nic-c" {
			tags = n.Tags
		}
	}
	if tags["ipfence-epochs-0"] != ip.String()+"=4" {
		t.Fatalf("nic-c's tags: %v, want the record at epoch 4", tags)
	}
}

// An assign that finds the address on its NIC already still raises the
// NIC's epoch record (one PUT of the NIC, its ipConfigurations unchanged),
// so that a move for an older epoch, from a node that has not heard of the
// newer one, is refused instead of taking the address from its holder.
func TestAssignInPlaceRaisesTheRecord(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	ctx := t.Context()
	lagging := e.driver(t)
	if err := e.drv.Assign(ctx, req("nic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := e.drv.Assign(ctx, req("nic-b", 2), true); err != nil {
		t.Fatal(err)
	}
	puts := e.cnt.count("PUT nic")
	if err := e.drv.Assign(ctx, req("nic-b", 3), true); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("PUT nic") - puts; n != 1 {
		t.Fatalf("%d PUTs for the assign in place at 3, want 1 (the record raised)", n)
	}
	if err := e.drv.Assign(ctx, req("nic-b", 3), true); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("PUT nic") - puts; n != 1 {
		t.Fatalf("%d PUTs after a second assign at 3, want still 1", n)
	}
	err := lagging.Assign(ctx, req("nic-a", 2), true)
	if !errors.Is(err, provider.ErrStale) || !strings.Contains(err.Error(), "the record holds 3") {
		t.Fatalf("the lagging move at epoch 2: %v, want ErrStale naming epoch 3", err)
	}
	expect(t, e.drv, "nic-b", false)
	if err := e.drv.Assign(ctx, req("nic-b", 2), true); !errors.Is(err, provider.ErrStale) {
		t.Fatalf("an assign in place at 2 after 3: %v, want ErrStale", err)
	}
}
