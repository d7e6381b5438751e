package executor_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/store"
)

// calls counts the simulator's Query API calls by action.
type calls struct {
	next http.Handler
	mu   sync.Mutex
	n    map[string]int
}

func (c *calls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	c.mu.Lock()
	c.n[form.Get("Action")]++
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

// TestBatchedRun: 229 approved acquires (and a 230th gone stale) on one NIC, with their forwarding
// rows, run as three assign calls (100 + 100 + 29), one forwarding call,
// every row succeeds with what it observed, and the
// simulator records each address at its own epoch; one row whose epoch
// the line has passed is fenced at the claim and never reaches the
// provider.
// batchEnv is a simulator behind a call counter, the AWS driver on it,
// and a journal of 230 approved acquires with their forwarding rows, the
// last address's gone stale.
type batchEnv struct {
	sim  *ec2sim.Server
	cnt  *calls
	drv  *aws.Driver
	st   *store.Store
	keys []capture.Key
	last capture.Key
	now  time.Time
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	sim, err := ec2sim.New(ec2sim.Config{NICs: []string{"eni-a", "eni-b"}, Subnet: netip.MustParsePrefix("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	cnt := &calls{next: sim, n: map[string]int{}}
	srv := httptest.NewServer(cnt)
	t.Cleanup(srv.Close)
	drv, err := aws.New(t.Context(), aws.Options{Region: "us-east-1", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Unix(1000, 0)
	desired := map[capture.Key]string{}
	var acts []capture.Action
	var keys []capture.Key
	for i := range 230 {
		k := capture.Key{Pool: "web", Address: netip.AddrFrom4([4]byte{10, 0, byte(1 + i/200), byte(10 + i%200)}), Domain: "provider:aws:group:g"}
		keys = append(keys, k)
		desired[k] = "a"
	}
	if _, _, err := st.ReconcileEpochs(desired, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		acts = append(acts, capture.NewAction(capture.Assign, k, "aws", "eni-a", "a", 1, map[string]string{capture.ParamAllowReassignment: "true"}),
			capture.NewAction(capture.EnableForwarding, k, "aws", "eni-a", "a", 1, nil))
	}
	if _, err := st.Import(acts, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AutoApprove(policy.AllowAll(1<<20), now, 0); err != nil {
		t.Fatal(err)
	}
	// The line moves past the last address's rows before they run.
	last := keys[len(keys)-1]
	if _, err := st.ObserveEpochs(map[capture.Key]capture.EpochRecord{last: {Epoch: 2, Holder: "b"}}); err != nil {
		t.Fatal(err)
	}
	return &batchEnv{sim: sim, cnt: cnt, drv: drv, st: st, keys: keys, last: last, now: now}
}

func TestBatchedRun(t *testing.T) {
	e := newBatchEnv(t)
	sim, cnt, drv, st, keys, last, now := e.sim, e.cnt, e.drv, e.st, e.keys, e.last, e.now
	ex := &executor.Executor{Store: st, Providers: map[string]provider.Provider{"aws": drv}}
	res, err := ex.Run(context.Background(), now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed != 458 || res.Succeeded != 458 || res.Stale != 2 || res.Failed != 0 || len(res.Done) != 460 {
		t.Fatalf("result %+v (%d done)", res, len(res.Done))
	}
	if got := cnt.n["AssignPrivateIpAddresses"]; got != 3 {
		t.Errorf("%d assign calls for 229 addresses, want 3", got)
	}
	// The rows of a group are observed in one describe once all its
	// calls are made, not after each call: 8 describes here (11 when each
	// of the three assign calls was observed on its own).
	if got := cnt.n["DescribeNetworkInterfaces"]; got != 8 {
		t.Errorf("%d describes, want 8", got)
	}
	if got := cnt.n["ModifyNetworkInterfaceAttribute"]; got != 1 {
		t.Errorf("%d forwarding calls for one NIC, want 1", got)
	}
	for _, d := range res.Done {
		if d.Row.Key == last {
			if d.Fenced == "" {
				t.Errorf("the stale row %s was not fenced", d.Row.IdempotencyKey)
			}
			continue
		}
		// An acquire is observed right after its call, before the
		// forwarding rows run.
		want := "on eni-a, forwarding true"
		if d.Row.Kind == capture.Assign {
			want = "on eni-a, forwarding false"
		}
		if d.Err != nil || d.Row.Observed != want {
			t.Fatalf("%s: err %v, observed %q", d.Row.IdempotencyKey, d.Err, d.Row.Observed)
		}
	}
	rows, err := st.Rows(store.Filter{State: capture.Succeeded})
	if err != nil || len(rows) != 458 {
		t.Fatalf("%d succeeded rows in the journal (%v)", len(rows), err)
	}
	held, _ := st.Held()
	if len(held) != 229 || held[keys[0]].Target != "eni-a" || !held[keys[0]].Confirmed {
		t.Fatalf("held %d, first %+v", len(held), held[keys[0]])
	}
	assigned := 0
	for _, m := range sim.Mutations() {
		if m.Call == capture.Assign {
			assigned++
			if m.Epoch != 1 || m.IdempotencyKey != capture.IdempotencyKey("web", "aws", "eni-a", capture.Assign, m.Address, 1) {
				t.Fatalf("mutation %+v", m)
			}
			if m.Address == last.Address {
				t.Fatalf("the fenced address reached the provider: %+v", m)
			}
		}
	}
	if assigned != 229 {
		t.Fatalf("%d assign mutations, want 229", assigned)
	}
}

// TestBatchedRunStopsWhenNotReady: Ready is asked again before every
// batched call; once it refuses, the rows not yet called fail "not
// called" and never reach the provider.
func TestBatchedRunStopsWhenNotReady(t *testing.T) {
	e := newBatchEnv(t)
	ready := func() error {
		e.cnt.mu.Lock()
		defer e.cnt.mu.Unlock()
		if e.cnt.n["AssignPrivateIpAddresses"] >= 1 {
			return errors.New("paused")
		}
		return nil
	}
	ex := &executor.Executor{Store: e.st, Providers: map[string]provider.Provider{"aws": e.drv}, Ready: ready}
	res, err := ex.Run(context.Background(), e.now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 100 || res.Failed != 358 || res.Stale != 2 {
		t.Fatalf("result %+v", res)
	}
	if got := e.cnt.n["AssignPrivateIpAddresses"]; got != 1 {
		t.Fatalf("%d assign calls after Ready refused, want 1", got)
	}
	if got := e.cnt.n["ModifyNetworkInterfaceAttribute"]; got != 0 {
		t.Fatalf("%d forwarding calls after Ready refused", got)
	}
	for _, d := range res.Done {
		if d.Err != nil && !strings.Contains(d.Err.Error(), "not called: paused") {
			t.Fatalf("%s: %v", d.Row.IdempotencyKey, d.Err)
		}
	}
	// The rows never called are approved again, for the next run to
	// claim as soon as the node is ready, not failed rows waiting out the
	// retry delay of a call that failed.
	again, err := e.st.Rows(store.Filter{State: capture.Approved})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 358 {
		t.Fatalf("%d rows approved again after Ready refused, want the 358 not called", len(again))
	}
	for _, r := range again {
		if !strings.Contains(r.Reason, "not called: paused") {
			t.Fatalf("%s approved again with reason %q", r.IdempotencyKey, r.Reason)
		}
	}
	if failed, _ := e.st.Rows(store.Filter{State: capture.Failed}); len(failed) != 0 {
		t.Fatalf("%d rows failed, first %+v", len(failed), failed[0])
	}
}

// TestBatchedRunRechecksAtTheSend: the node stops inside the driver's
// look before the first batched assign (AssignMany describes the
// addresses first), after every check of the executor's own has passed,
// and the cluster moves past its epochs meanwhile. The driver asks Ready
// again right before it sends, finds it refusing, and sends nothing: no
// assign or forwarding call reaches the provider, every row fails as not
// sent, and the simulator records no mutation.
func TestBatchedRunRechecksAtTheSend(t *testing.T) {
	e := newBatchEnv(t)
	asked := 0
	ready := func() error {
		asked++
		e.cnt.mu.Lock()
		defer e.cnt.mu.Unlock()
		// The pause and the cluster's move both fall within the first
		// describe: once it was served, the pass is stale.
		if e.cnt.n["DescribeNetworkInterfaces"] >= 1 {
			return errors.New("epoch records moved on")
		}
		return nil
	}
	ex := &executor.Executor{Store: e.st, Providers: map[string]provider.Provider{"aws": e.drv}, Ready: ready}
	res, err := ex.Run(context.Background(), e.now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 0 || res.Failed != 458 || res.Stale != 2 {
		t.Fatalf("succeeded %d, failed %d, stale %d; want 0, 458, 2", res.Succeeded, res.Failed, res.Stale)
	}
	if got := e.cnt.n["AssignPrivateIpAddresses"]; got != 0 {
		t.Fatalf("%d assign calls sent after Ready refused at the send, want 0", got)
	}
	if got := e.cnt.n["ModifyNetworkInterfaceAttribute"]; got != 0 {
		t.Fatalf("%d forwarding calls after Ready refused", got)
	}
	if ms := e.sim.Mutations(); len(ms) != 0 {
		t.Fatalf("%d mutations reached the provider, first %+v", len(ms), ms[0])
	}
	sentinel := 0
	for _, d := range res.Done {
		if d.Fenced != "" {
			continue
		}
		if d.Err == nil || !strings.Contains(d.Err.Error(), "epoch records moved on") {
			t.Fatalf("%s: %v", d.Row.IdempotencyKey, d.Err)
		}
		if errors.Is(d.Err, gate.ErrNotReady) {
			sentinel++
		}
	}
	// The first batch (100 addresses) was refused by the driver; the
	// rest by the executor before their calls.
	if sentinel != 100 {
		t.Fatalf("%d rows refused at the driver's send, want 100", sentinel)
	}
	if asked < 4 {
		t.Fatalf("Ready asked %d times, want the claim's, the calls', the group's and the send's", asked)
	}
}
