package aws_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/provider/providertest"
)

// counting sits in front of the simulator: it counts calls per Action and
// can answer some calls itself with an EC2 error, before the simulator
// sees them.
type counting struct {
	next http.Handler
	mu   sync.Mutex
	// calls counts Query API calls by Action.
	calls map[string]int
	// fail answers the next n calls of an Action with this status and code.
	fail map[string]failure
}

type failure struct {
	n      int
	status int
	code   string
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[action]++
	f := c.fail[action]
	inject := f.n > 0
	if inject {
		f.n--
		c.fail[action] = f
	}
	c.mu.Unlock()
	if inject {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>injected by the test</Message></Error></Errors><RequestID>test</RequestID></Response>`, f.code)
		return
	}
	c.next.ServeHTTP(w, r)
}

func (c *counting) setFail(action string, f failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[action] = f
}

func (c *counting) count(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[action]
}

// env is a simulator, the counter in front of it, and a driver on it.
type env struct {
	sim *ec2sim.Server
	cnt *counting
	srv *httptest.Server
	drv *aws.Driver
}

func newEnv(t *testing.T, nics []string) *env {
	t.Helper()
	return newEnvWith(t, nics, nil)
}

// newEnvWith is newEnv with the driver paced by a budget.
func newEnvWith(t *testing.T, nics []string, budget *callbudget.Budget) *env {
	t.Helper()
	sim, err := ec2sim.New(ec2sim.Config{NICs: nics})
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counting{next: sim, fail: map[string]failure{}}
	srv := httptest.NewServer(cnt)
	t.Cleanup(srv.Close)
	drv, err := aws.New(t.Context(), aws.Options{
		Region: "us-east-1", Endpoint: srv.URL,
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		PollInterval: 10 * time.Millisecond, ReadAttempts: 3, MaxBackoff: 20 * time.Millisecond,
		// Short: in ConcurrentReassign another mover can take the address
		// back before this one looks, and the wait then runs to its end.
		VisibleTimeout: time.Second,
		Budget:         budget,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, cnt: cnt, srv: srv, drv: drv}
}

// recorded makes the driver a provider.Recorder through the simulator's
// authoritative history, so the suite checks that the fencing token
// travels in the headers.
type recorded struct {
	*aws.Driver
	sim *ec2sim.Server
}

func (r recorded) Mutations() []provider.Mutation { return r.sim.Mutations() }

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T, nics []string) provider.Provider {
		e := newEnv(t, nics)
		return recorded{e.drv, e.sim}
	})
}

// simFaults breaks the simulator through its fault settings.
type simFaults struct {
	t   *testing.T
	sim *ec2sim.Server
}

func (f simFaults) set(fs ec2sim.Faults) {
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) FailMutations(err error) {
	code := ec2sim.CodeThrottled
	if errors.Is(err, provider.ErrUnavailable) {
		code = ec2sim.CodeInternal
	}
	rates := []ec2sim.ErrorRate{{Code: code, Rate: 1}}
	f.set(ec2sim.Faults{Errors: map[string][]ec2sim.ErrorRate{
		"AssignPrivateIpAddresses": rates, "UnassignPrivateIpAddresses": rates, "ModifyNetworkInterfaceAttribute": rates,
	}})
}

func (f simFaults) SetDelay(d time.Duration) {
	fs := f.sim.Faults()
	fs.RemapDelay = ec2sim.Duration(d)
	f.set(fs)
}

func (f simFaults) Heal() {
	f.set(ec2sim.Faults{})
	if err := f.sim.Flush(); err != nil {
		f.t.Fatal(err)
	}
}

func TestContractFaults(t *testing.T) {
	providertest.RunFaults(t, func(t *testing.T, nics []string) (provider.Provider, providertest.Faults) {
		e := newEnv(t, nics)
		return recorded{e.drv, e.sim}, simFaults{t, e.sim}
	})
}

var ip = netip.MustParseAddr("10.0.0.50")

func req(nic string, epoch uint64) provider.Request {
	return provider.Request{NIC: nic, Address: ip, Epoch: capture.Epoch(epoch), IdempotencyKey: fmt.Sprintf("t:%s:epoch:%d", nic, epoch)}
}

// An acquire is sent once: a delayed SDK retry of an old acquire could take
// the address back from a newer holder.
func TestAcquireIsNeverRetried(t *testing.T) {
	e := newEnv(t, []string{"eni-a", "eni-b"})
	e.cnt.setFail("AssignPrivateIpAddresses", failure{n: 1, status: 503, code: "RequestLimitExceeded"})
	err := e.drv.Assign(t.Context(), req("eni-a", 1), true)
	if !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("throttled assign: %v", err)
	}
	if n := e.cnt.count("AssignPrivateIpAddresses"); n != 1 {
		t.Fatalf("the assign was sent %d times, want once", n)
	}
	e.cnt.setFail("AssignPrivateIpAddresses", failure{n: 1, status: 500, code: "InternalError"})
	if err := e.drv.Assign(t.Context(), req("eni-a", 2), true); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("assign on a 500: %v", err)
	}
	if n := e.cnt.count("AssignPrivateIpAddresses"); n != 2 {
		t.Fatalf("the assigns were sent %d times, want twice", n)
	}
	if obs, _ := e.drv.Describe(t.Context(), ip); obs.NIC != "" {
		t.Fatalf("a refused assign took effect: %+v", obs)
	}
}

// Reads are retried with backoff.
func TestReadsAreRetried(t *testing.T) {
	e := newEnv(t, []string{"eni-a"})
	if err := e.drv.Assign(t.Context(), req("eni-a", 1), false); err != nil {
		t.Fatal(err)
	}
	before := e.cnt.count("DescribeNetworkInterfaces")
	e.cnt.setFail("DescribeNetworkInterfaces", failure{n: 2, status: 503, code: "RequestLimitExceeded"})
	obs, err := e.drv.Describe(t.Context(), ip)
	if err != nil || obs.NIC != "eni-a" {
		t.Fatalf("describe after two throttles: %+v %v", obs, err)
	}
	if n := e.cnt.count("DescribeNetworkInterfaces") - before; n != 3 {
		t.Fatalf("describe was sent %d times, want 3", n)
	}
	// More failures than attempts: the error comes through, mapped.
	e.cnt.setFail("DescribeNetworkInterfaces", failure{n: 5, status: 503, code: "RequestLimitExceeded"})
	if _, err := e.drv.Describe(t.Context(), ip); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("describe throttled past its attempts: %v", err)
	}
}

// After an acquire the driver waits until the address is visible: the
// simulator acknowledges the move at once and shows it 300 ms later.
func TestAssignWaitsUntilVisible(t *testing.T) {
	e := newEnv(t, []string{"eni-a", "eni-b"})
	if err := e.drv.Assign(t.Context(), req("eni-a", 1), false); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetFaults(ec2sim.Faults{RemapDelay: ec2sim.Duration(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.drv.Assign(t.Context(), req("eni-b", 2), true); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("Assign returned after %v, before the move was visible", waited)
	}
	if obs, _ := e.drv.Describe(t.Context(), ip); obs.NIC != "eni-b" {
		t.Fatalf("after Assign returned: %+v", obs)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, []string{"eni-a", "eni-b"})
	ctx := t.Context()
	if err := e.drv.Assign(ctx, req("eni-zz", 1), false); !errors.Is(err, provider.ErrUnknownNIC) {
		t.Errorf("unknown NIC: %v", err)
	}
	if err := e.drv.Assign(ctx, req("eni-a", 1), false); err != nil {
		t.Fatal(err)
	}
	err := e.drv.Assign(ctx, req("eni-b", 2), false)
	if !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Errorf("conflict: %v", err)
	}
	// An unassign from a NIC that does not hold the address is nothing to
	// do, though EC2 calls it an error.
	if err := e.drv.Unassign(ctx, req("eni-b", 3)); err != nil {
		t.Errorf("unassign from the wrong NIC: %v", err)
	}
	// An address outside the subnet is a permanent error with EC2's words.
	bad := provider.Request{NIC: "eni-a", Address: netip.MustParseAddr("192.168.9.9")}
	err = e.drv.Assign(ctx, bad, false)
	if err == nil || errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrThrottled) {
		t.Errorf("address outside the subnet: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.drv.Assign(cancelled, req("eni-a", 4), false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	e.srv.Close()
	if _, err := e.drv.Describe(ctx, ip); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("server down: %v", err)
	}
	if err := e.drv.Unassign(ctx, req("eni-a", 5)); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("server down, unassign: %v", err)
	}
}

// BenchmarkAcquireOverhead measures what the driver adds to an acquire
// beyond the simulated latency of the call: the simulator delays every
// AssignPrivateIpAddresses by 5 ms, and the benchmark reports the median
// acquire time minus those 5 ms.
func BenchmarkAcquireOverhead(b *testing.B) {
	const latency = 5 * time.Millisecond
	sim, err := ec2sim.New(ec2sim.Config{NICs: []string{"eni-a", "eni-b"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.SetFaults(ec2sim.Faults{ActionLatency: map[string]ec2sim.Duration{"AssignPrivateIpAddresses": ec2sim.Duration(latency)}}); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	drv, err := aws.New(b.Context(), aws.Options{Region: "us-east-1", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	if err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	nics := []string{"eni-a", "eni-b"}
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := drv.Assign(b.Context(), req(nics[i%2], uint64(i)), true); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(x, y int) bool { return times[x] < times[y] })
	median := times[len(times)/2]
	b.ReportMetric(float64(median-latency)/float64(time.Millisecond), "overhead-ms/acquire")
	b.ReportMetric(float64(slices.Max(times))/float64(time.Millisecond), "max-ms/acquire")
}

// TestBatches: 240 addresses move with one AssignPrivateIpAddresses call,
// each recorded at the simulator with its own epoch and key; where they
// are is read with one DescribeNetworkInterfaces; a
// release names them in one call, and falls back to one call each when
// EC2 refuses the batch because one address already left the NIC.
func TestBatches(t *testing.T) {
	e := newEnv(t, []string{"eni-a", "eni-b"})
	ctx := t.Context()
	var reqs []provider.Request
	var addrs []netip.Addr
	for i := range 240 {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)})
		addrs = append(addrs, a)
		reqs = append(reqs, provider.Request{NIC: "eni-a", Address: a, Epoch: capture.Epoch(1000 + i), IdempotencyKey: fmt.Sprintf("k%d", i)})
	}
	if err := e.drv.AssignMany(ctx, "eni-a", reqs, false); err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("AssignPrivateIpAddresses"); n != 1 {
		t.Fatalf("%d assign calls for 240 addresses, want 1", n)
	}
	ms := e.sim.Mutations()
	if len(ms) != 240 {
		t.Fatalf("%d mutations, want 240", len(ms))
	}
	for i, m := range ms {
		if m.Address != addrs[i] || m.Epoch != capture.Epoch(1000+i) || m.IdempotencyKey != fmt.Sprintf("k%d", i) || m.NIC != "eni-a" {
			t.Fatalf("mutation %d: %+v", i, m)
		}
	}
	before := e.cnt.count("DescribeNetworkInterfaces")
	obs, err := e.drv.DescribeMany(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.cnt.count("DescribeNetworkInterfaces") - before; n != 1 {
		t.Fatalf("%d describe calls for 240 addresses, want 1", n)
	}
	for _, a := range addrs {
		if obs[a].NIC != "eni-a" || obs[a].Address != a {
			t.Fatalf("%s: %+v", a, obs[a])
		}
	}
	// A move to eni-b with reassignment, then a release from eni-a of
	// addresses of which one is still there.
	if err := e.drv.AssignMany(ctx, "eni-b", []provider.Request{{NIC: "eni-b", Address: addrs[0], Epoch: 2000}, {NIC: "eni-b", Address: addrs[1], Epoch: 2001}}, true); err != nil {
		t.Fatal(err)
	}
	rel := []provider.Request{{NIC: "eni-a", Address: addrs[0], Epoch: 2002}, {NIC: "eni-a", Address: addrs[2], Epoch: 2003}}
	if err := e.drv.UnassignMany(ctx, "eni-a", rel); err != nil {
		t.Fatal(err)
	}
	obs, err = e.drv.DescribeMany(ctx, addrs[:3])
	if err != nil {
		t.Fatal(err)
	}
	if obs[addrs[0]].NIC != "eni-b" || obs[addrs[1]].NIC != "eni-b" || obs[addrs[2]].NIC != "" {
		t.Fatalf("after the move and the release: %+v", obs)
	}
}

// TestMutationsAskReadyLast: a change is sent only if the readiness check
// the context carries (gate.WithReady) passes right before the send, after
// the driver's own looks. The check is made to refuse from the moment the
// simulator served the first describe, as for a node paused inside that
// look while the cluster moved past its epochs: Assign and AssignMany
// describe first and then send nothing, Unassign, UnassignMany and
// SetForwarding send nothing, and every error wraps gate.ErrNotReady.
// Reads are not gated, and with a passing check the changes go through.
func TestMutationsAskReadyLast(t *testing.T) {
	e := newEnv(t, []string{"eni-a", "eni-b"})
	a1, a2 := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")
	r1 := provider.Request{NIC: "eni-a", Address: a1, Epoch: 1, IdempotencyKey: "k1"}
	r2 := provider.Request{NIC: "eni-a", Address: a2, Epoch: 1, IdempotencyKey: "k2"}
	paused := func() error {
		if e.cnt.count("DescribeNetworkInterfaces") >= 1 {
			return errors.New("paused past the contact window")
		}
		return nil
	}
	ctx := gate.WithReady(t.Context(), paused)
	calls := []struct {
		name string
		call func() error
	}{
		{"Assign", func() error { return e.drv.Assign(ctx, r1, false) }},
		{"AssignMany", func() error { return e.drv.AssignMany(ctx, "eni-a", []provider.Request{r1, r2}, false) }},
		{"Unassign", func() error { return e.drv.Unassign(ctx, r1) }},
		{"UnassignMany", func() error { return e.drv.UnassignMany(ctx, "eni-a", []provider.Request{r1, r2}) }},
		{"SetForwarding", func() error { return e.drv.SetForwarding(ctx, r1, true) }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, gate.ErrNotReady) || !strings.Contains(err.Error(), "paused past the contact window") {
			t.Fatalf("%s: %v, want the readiness refusal", c.name, err)
		}
	}
	if n := e.cnt.count("DescribeNetworkInterfaces"); n < 2 {
		t.Fatalf("%d describes: Assign and AssignMany look before they send", n)
	}
	for _, action := range []string{"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "ModifyNetworkInterfaceAttribute"} {
		if n := e.cnt.count(action); n != 0 {
			t.Fatalf("%d %s calls sent while not ready", n, action)
		}
	}
	if ms := e.sim.Mutations(); len(ms) != 0 {
		t.Fatalf("%d mutations while not ready, first %+v", len(ms), ms[0])
	}
	ok := gate.WithReady(t.Context(), func() error { return nil })
	if err := e.drv.AssignMany(ok, "eni-a", []provider.Request{r1, r2}, false); err != nil {
		t.Fatal(err)
	}
	if ms := e.sim.Mutations(); len(ms) != 2 || ms[0].Address != a1 || ms[1].Address != a2 {
		t.Fatalf("mutations with a passing check: %+v", ms)
	}
}
