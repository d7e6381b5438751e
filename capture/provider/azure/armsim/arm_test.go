package armsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/internal/monotime"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

type env struct {
	t   *testing.T
	sim *armsim.Server
	srv *httptest.Server
	clk *handclock.Clock
}

func newEnv(t *testing.T, limits armsim.Limits) *env {
	t.Helper()
	clk := handclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Clock: clk.Now, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOf(t, sim, clk)
}

// newEnvOf serves sim, whose clock is clk.
func newEnvOf(t *testing.T, sim *armsim.Server, clk *handclock.Clock) *env {
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &env{t: t, sim: sim, srv: srv, clk: clk}
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (e *env) do(method, path string, body any, header map[string]string) answer {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	url := e.srv.URL + path
	if !strings.Contains(path, "api-version") {
		url += "?api-version=" + armsim.APIVersion
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-1")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := answer{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out.body); err != nil {
		e.t.Fatalf("%s %s: answer %d is not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return out
}

func (e *env) nicPath(name string) string {
	return "/subscriptions/" + armsim.DefaultSubscription + "/resourceGroups/" + armsim.DefaultResourceGroup +
		"/providers/Microsoft.Network/networkInterfaces/" + name
}

// nicBody is a PUT body: the primary and the given secondaries.
func nicBody(primary string, forwarding bool, secondary ...string) map[string]any {
	cfgs := []any{map[string]any{"name": "ipconfig1", "properties": map[string]any{"privateIPAddress": primary, "primary": true, "privateIPAllocationMethod": "Dynamic"}}}
	for _, a := range secondary {
		cfgs = append(cfgs, map[string]any{"name": "cfg-" + a, "properties": map[string]any{"privateIPAddress": a, "privateIPAllocationMethod": "Static"}})
	}
	return map[string]any{"location": "eastus", "properties": map[string]any{"enableIPForwarding": forwarding, "ipConfigurations": cfgs}}
}

func addrsOf(a answer) []string {
	props, _ := a.body["properties"].(map[string]any)
	cfgs, _ := props["ipConfigurations"].([]any)
	var out []string
	for _, c := range cfgs {
		p := c.(map[string]any)["properties"].(map[string]any)
		out = append(out, p["privateIPAddress"].(string))
	}
	return out
}

func etag(a answer) string { s, _ := a.body["etag"].(string); return s }

func provisioning(a answer) string {
	props, _ := a.body["properties"].(map[string]any)
	s, _ := props["provisioningState"].(string)
	return s
}

// The NICs' primaries are the subnet's first usable addresses, in name
// order; a GET shows the primary ipConfiguration and the etag.
func TestGet(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	a := e.do("GET", e.nicPath("nic-a"), nil, nil)
	if a.status != 200 || etag(a) == "" || a.header.Get("ETag") != etag(a) || provisioning(a) != "Succeeded" {
		t.Fatalf("GET nic-a: %d %v", a.status, a.body)
	}
	if got := addrsOf(a); len(got) != 1 || got[0] != "10.0.0.4" {
		t.Fatalf("nic-a's addresses %v, want its primary 10.0.0.4", got)
	}
	if got := addrsOf(e.do("GET", e.nicPath("nic-b"), nil, nil)); len(got) != 1 || got[0] != "10.0.0.5" {
		t.Fatalf("nic-b's addresses %v", got)
	}
	if a.body["id"] != e.sim.NICID("nic-a") {
		t.Fatalf("id %v, want %s", a.body["id"], e.sim.NICID("nic-a"))
	}
	list := e.do("GET", strings.TrimSuffix(e.nicPath("x"), "/x"), nil, nil)
	if vs, _ := list.body["value"].([]any); list.status != 200 || len(vs) != 2 {
		t.Fatalf("list: %d %v", list.status, list.body)
	}
	for _, c := range []struct {
		name   string
		path   string
		header map[string]string
		status int
		code   string
	}{
		{"unknown NIC", e.nicPath("nic-zz"), nil, 404, "ResourceNotFound"},
		{"other subscription", strings.Replace(e.nicPath("nic-a"), armsim.DefaultSubscription, "other", 1), nil, 404, "SubscriptionNotFound"},
		{"other resource group", strings.Replace(e.nicPath("nic-a"), "/"+armsim.DefaultResourceGroup+"/", "/other/", 1), nil, 404, "ResourceGroupNotFound"},
		{"no token", e.nicPath("nic-a"), map[string]string{"Authorization": ""}, 401, "AuthenticationFailed"},
		{"no api-version", e.nicPath("nic-a") + "?x=api-version", nil, 400, "MissingApiVersionParameter"},
		{"old api-version", e.nicPath("nic-a") + "?api-version=2018-10-01", nil, 400, "InvalidApiVersionParameter"},
	} {
		got := e.do("GET", c.path, nil, c.header)
		if got.status != c.status || got.code() != c.code || got.header.Get("x-ms-error-code") != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, got.status, got.code(), c.status, c.code)
		}
	}
	if got := e.do("DELETE", e.nicPath("nic-a"), nil, nil); got.status != 405 {
		t.Errorf("DELETE: %d, want 405", got.status)
	}
}

// poll reads an operation's status from the Azure-AsyncOperation URL.
func (e *env) poll(a answer) string {
	e.t.Helper()
	u := a.header.Get("Azure-AsyncOperation")
	if !strings.HasPrefix(u, e.srv.URL+"/subscriptions/") {
		e.t.Fatalf("Azure-AsyncOperation %q", u)
	}
	st := e.do("GET", strings.TrimPrefix(u, e.srv.URL), nil, nil)
	s, _ := st.body["status"].(string)
	return s
}

// A PUT is a long-running operation: accepted with the NIC Updating, its
// status InProgress until its changes are visible (a delay of 5 s on the
// simulator's clock), then Succeeded; the etag changes at once and the
// record gets the mutation, with the epoch and key the headers carried,
// when it becomes visible.
func TestPutIsALongRunningOperation(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	if err := e.sim.SetFaults(armsim.Faults{Delay: ec2sim.Duration(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	before := etag(e.do("GET", e.nicPath("nic-a"), nil, nil))
	put := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), map[string]string{
		"If-Match": before, armsim.HeaderEpoch: "7", armsim.HeaderIdempotencyKey: "k7",
	})
	if put.status != 200 || provisioning(put) != "Updating" || etag(put) == before || etag(put) == "" {
		t.Fatalf("PUT: %d %v", put.status, put.body)
	}
	if s := e.poll(put); s != "InProgress" {
		t.Fatalf("status before the delay: %s", s)
	}
	if got := e.do("GET", e.nicPath("nic-a"), nil, nil); provisioning(got) != "Updating" || len(addrsOf(got)) != 2 {
		t.Fatalf("GET while updating: %v", got.body)
	}
	if ms := e.sim.Mutations(); len(ms) != 0 {
		t.Fatalf("recorded before visible: %+v", ms)
	}
	e.clk.Advance(5 * time.Second)
	if s := e.poll(put); s != "Succeeded" {
		t.Fatalf("status after the delay: %s", s)
	}
	if got := e.do("GET", e.nicPath("nic-a"), nil, nil); provisioning(got) != "Succeeded" || etag(got) != etag(put) {
		t.Fatalf("GET after: %v", got.body)
	}
	want := provider.Mutation{Time: e.clk.Now(), Call: capture.Assign, NIC: "nic-a", Address: netip.MustParseAddr("10.0.0.50"), Epoch: 7, IdempotencyKey: "k7"}
	if ms := e.sim.Mutations(); len(ms) != 1 || ms[0] != want {
		t.Fatalf("record %+v, want %+v", ms, want)
	}
	// The record's time is the visibility's; ARM accepted the change,
	// and GETs showed it, 5 s before.
	if at := e.sim.AcceptedTimes(e.sim.Mutations()); len(at) != 1 || !at[0].Equal(e.clk.Now().Add(-5*time.Second)) {
		t.Fatalf("accepted at %v, want %v", at, e.clk.Now().Add(-5*time.Second))
	}
	// The same PUT again changes nothing: no mutation, the etag kept.
	again := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), map[string]string{"If-Match": etag(put)})
	if again.status != 200 || etag(again) != etag(put) || len(e.sim.Mutations()) != 1 {
		t.Fatalf("repeated PUT: %d etag %s (was %s), %d mutations", again.status, etag(again), etag(put), len(e.sim.Mutations()))
	}
	// Removing it and turning forwarding on: an unassign and a
	// forwarding change, with the informational address.
	off := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", true), map[string]string{armsim.HeaderEpoch: "8", armsim.HeaderAddress: "10.0.0.50"})
	if off.status != 200 {
		t.Fatalf("PUT: %d %v", off.status, off.body)
	}
	e.sim.Flush()
	ms := e.sim.Mutations()
	if len(ms) != 3 || ms[1].Call != capture.Unassign || ms[1].Epoch != 8 || ms[2].Call != capture.EnableForwarding || !ms[2].Enabled || ms[2].Address != netip.MustParseAddr("10.0.0.50") {
		t.Fatalf("record %+v", ms)
	}
}

// If-Match on a superseded etag is 412 and changes nothing.
func TestIfMatch(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	old := etag(e.do("GET", e.nicPath("nic-a"), nil, nil))
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), map[string]string{"If-Match": old}); a.status != 200 {
		t.Fatalf("first PUT: %d %v", a.status, a.body)
	}
	cur := e.sim.ETag("nic-a")
	stale := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.51"), map[string]string{"If-Match": old, armsim.HeaderEpoch: "1"})
	if stale.status != 412 || stale.code() != "PreconditionFailed" {
		t.Fatalf("stale PUT: %d %v", stale.status, stale.body)
	}
	if e.sim.ETag("nic-a") != cur || len(e.sim.Mutations()) != 1 {
		t.Fatalf("a refused PUT changed something: etag %s (was %s), %+v", e.sim.ETag("nic-a"), cur, e.sim.Mutations())
	}
	if got := addrsOf(e.do("GET", e.nicPath("nic-a"), nil, nil)); len(got) != 2 || got[1] != "10.0.0.50" {
		t.Fatalf("after the stale PUT: %v", got)
	}
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.51"), map[string]string{"If-Match": "*"}); a.status != 200 {
		t.Fatalf("If-Match *: %d", a.status)
	}
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false), map[string]string{"If-None-Match": "*"}); a.status != 412 {
		t.Fatalf("If-None-Match * on an existing NIC: %d", a.status)
	}
}

// The rules of a NIC's ipConfigurations, each refused whole.
func TestPutRules(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), nil); a.status != 200 {
		t.Fatal(a.body)
	}
	noCfg := map[string]any{"properties": map[string]any{"ipConfigurations": []any{}}}
	dropPrimary := nicBody("10.0.0.50", false)
	cases := []struct {
		name string
		nic  string
		body any
		code string
	}{
		{"address on another NIC", "nic-b", nicBody("10.0.0.5", false, "10.0.0.50"), "PrivateIPAddressInUse"},
		{"another NIC's primary", "nic-b", nicBody("10.0.0.5", false, "10.0.0.4"), "PrivateIPAddressInUse"},
		{"outside the subnet", "nic-b", nicBody("10.0.0.5", false, "10.0.1.9"), "PrivateIPAddressNotInSubnet"},
		{"broadcast", "nic-b", nicBody("10.0.0.5", false, "10.0.0.255"), "PrivateIPAddressNotInSubnet"},
		{"no ipConfigurations", "nic-b", noCfg, "NicMustHaveIpConfiguration"},
		{"primary dropped", "nic-a", dropPrimary, "PrimaryIpConfigurationRequired"},
		{"primary changed", "nic-b", nicBody("10.0.0.60", false), "PrimaryIpConfigurationRequired"},
		{"repeated address", "nic-b", nicBody("10.0.0.5", false, "10.0.0.70", "10.0.0.70"), "InvalidRequestFormat"},
		{"IPv6", "nic-b", nicBody("10.0.0.5", false, "fd00::1"), "InvalidRequestFormat"},
		{"no properties", "nic-b", map[string]any{"location": "eastus"}, "InvalidRequestFormat"},
		{"not JSON", "nic-b", "][", "InvalidRequestFormat"},
	}
	for _, c := range cases {
		a := e.do("PUT", e.nicPath(c.nic), c.body, nil)
		if a.status != 400 || a.code() != c.code {
			t.Errorf("%s: %d %s, want 400 %s (%v)", c.name, a.status, a.code(), c.code, a.body)
		}
	}
	if n := len(e.sim.Mutations()); n != 1 {
		t.Fatalf("%d mutations after refused PUTs, want the first one only", n)
	}
	if a := e.do("PUT", e.nicPath("nic-zz"), nicBody("10.0.0.9", false), nil); a.status != 404 {
		t.Fatalf("PUT of a NIC that does not exist: %d (the simulator never creates one)", a.status)
	}
}

// The token buckets: a write bucket of 2 refilled at 1 a second and a
// read bucket of 3 at 1 a second, on the simulator's clock; an empty
// bucket answers 429 with Retry-After and changes nothing; each principal
// has its own.
func TestThrottle(t *testing.T) {
	e := newEnv(t, armsim.Limits{WriteBurst: 2, WriteRate: 1, ReadBurst: 3, ReadRate: 1})
	for i := range 2 {
		if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), nil); a.status != 200 {
			t.Fatalf("write %d: %d", i, a.status)
		}
	}
	a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false), nil)
	if a.status != 429 || a.code() != "SubscriptionRequestsThrottled" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("third write: %d %s Retry-After %q", a.status, a.code(), a.header.Get("Retry-After"))
	}
	if got := addrsOf(e.do("GET", e.nicPath("nic-a"), nil, nil)); len(got) != 2 {
		t.Fatalf("a throttled write took effect: %v", got)
	}
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false), map[string]string{"Authorization": "Bearer token-2"}); a.status != 200 {
		t.Fatalf("another principal's write: %d", a.status)
	}
	// Reads: one GET above, two more, then throttled.
	for range 2 {
		if a := e.do("GET", e.nicPath("nic-a"), nil, nil); a.status != 200 {
			t.Fatalf("read: %d", a.status)
		}
	}
	if a := e.do("GET", e.nicPath("nic-a"), nil, nil); a.status != 429 || a.header.Get("x-ms-ratelimit-remaining-subscription-reads") != "0" {
		t.Fatalf("fourth read: %d %v", a.status, a.header)
	}
	e.clk.Advance(time.Second)
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false), nil); a.status != 200 {
		t.Fatalf("write after the refill: %d %v", a.status, a.body)
	}
	if a := e.do("GET", e.nicPath("nic-a"), nil, nil); a.status != 200 {
		t.Fatalf("read after the refill: %d", a.status)
	}
}

// Injected errors fail calls before they change anything.
func TestInjectedErrors(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.OpPut: {{Code: armsim.CodeTooManyRequests, Rate: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), nil)
	if a.status != 429 || a.code() != armsim.CodeTooManyRequests || a.header.Get("Retry-After") != "1" {
		t.Fatalf("injected 429: %d %v", a.status, a.body)
	}
	if a := e.do("GET", e.nicPath("nic-a"), nil, nil); a.status != 200 || len(addrsOf(a)) != 1 {
		t.Fatalf("GET is not injected, and nothing changed: %d %v", a.status, addrsOf(a))
	}
	if err := e.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.AnyOperation: {{Code: armsim.CodeInternal, Rate: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if a := e.do("GET", e.nicPath("nic-a"), nil, nil); a.status != 500 {
		t.Fatalf("injected 500: %d", a.status)
	}
	for _, bad := range []armsim.Faults{
		{Errors: map[string][]armsim.ErrorRate{"Nope": {{Code: armsim.CodeInternal, Rate: 1}}}},
		{Errors: map[string][]armsim.ErrorRate{armsim.OpGet: {{Code: "Teapot", Rate: 1}}}},
		{Errors: map[string][]armsim.ErrorRate{armsim.OpGet: {{Code: armsim.CodeInternal, Rate: 0.7}, {Code: armsim.CodeTooManyRequests, Rate: 0.7}}}},
		{Latency: ec2sim.Duration(-time.Second)},
	} {
		if err := e.sim.SetFaults(bad); err == nil {
			t.Errorf("faults %+v accepted", bad)
		}
	}
	if f := e.sim.Faults(); len(f.Errors[armsim.AnyOperation]) != 1 {
		t.Fatalf("a refused SetFaults changed the faults: %+v", f)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []armsim.Config{
		{},
		{NICs: []string{"a", "a"}},
		{NICs: []string{"a/b"}},
		{NICs: []string{"a"}, Subnet: netip.MustParsePrefix("10.0.0.1/24")},
		{NICs: []string{"a"}, Limits: armsim.Limits{WriteRate: -1}},
	} {
		if _, err := armsim.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// The admin API shows the state and the record and takes faults.
func TestAdmin(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"), nil); a.status != 200 {
		t.Fatal(a.body)
	}
	resp, err := http.Get(e.srv.URL + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	var st []armsim.NICState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(st) != 2 || st[0].Name != "nic-a" || len(st[0].Secondary) != 1 || len(st[0].Visible) != 1 || st[0].Visible[0] != netip.MustParseAddr("10.0.0.50") {
		t.Fatalf("state %+v", st)
	}
	req, _ := http.NewRequest("PUT", e.srv.URL+"/admin/faults", strings.NewReader(`{"delay":"2s","bogus":1}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("faults with an unknown field: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("PUT", e.srv.URL+"/admin/faults", strings.NewReader(`{"delay":"2s"}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || time.Duration(e.sim.Faults().Delay) != 2*time.Second {
		t.Fatalf("faults: %d %+v", resp.StatusCode, e.sim.Faults())
	}
	if _, err := http.Get(e.srv.URL + "/admin/nope"); err != nil {
		t.Fatal(err)
	}
}

// A PUT carrying several actions names its addresses, and as many epochs
// and keys; each mutation is recorded with its own, and lists that do not
// match are refused.
func TestStampLists(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	h := map[string]string{armsim.HeaderAddresses: "10.0.0.51,10.0.0.50", armsim.HeaderEpoch: "5,4", armsim.HeaderIdempotencyKey: "k51,k50"}
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50", "10.0.0.51"), h); a.status != 200 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	ms := e.sim.Mutations()
	if len(ms) != 2 || ms[0].Address != netip.MustParseAddr("10.0.0.50") || ms[0].Epoch != 4 || ms[0].IdempotencyKey != "k50" || ms[1].Epoch != 5 || ms[1].IdempotencyKey != "k51" {
		t.Fatalf("record %+v", ms)
	}
	for _, bad := range []map[string]string{
		{armsim.HeaderAddresses: "10.0.0.52,10.0.0.53", armsim.HeaderEpoch: "6", armsim.HeaderIdempotencyKey: "a,b"},
		{armsim.HeaderAddresses: "10.0.0.52,10.0.0.52", armsim.HeaderEpoch: "6,7", armsim.HeaderIdempotencyKey: "a,b"},
		{armsim.HeaderAddresses: "10.0.0.52,x", armsim.HeaderEpoch: "6,7", armsim.HeaderIdempotencyKey: "a,b"},
		{armsim.HeaderAddresses: "10.0.0.52,10.0.0.53", armsim.HeaderEpoch: "6,-7", armsim.HeaderIdempotencyKey: "a,b"},
	} {
		if a := e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.52", "10.0.0.53"), bad); a.status != 400 || a.code() != "InvalidRequestFormat" {
			t.Errorf("%v: %d %s", bad, a.status, a.code())
		}
	}
	if n := len(e.sim.Mutations()); n != 2 {
		t.Fatalf("refused PUTs recorded mutations: %d", n)
	}
}

// GET /admin/mutations shows the record in the EC2 dialect's shape, which
// the capture test reads from every dialect: lower-case names, the epoch
// and key the PUT's headers carried, and mono, the moment on the machine's
// monotonic clock (inside the call's span as the test reads that clock).
// The same answer still decodes as []provider.Mutation.
func TestAdminMutationsShape(t *testing.T) {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Limits: armsim.Limits{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	e := &env{t: t, sim: sim, srv: srv}
	// A delay no test waits out: the change becomes visible at the flush.
	if err := sim.SetFaults(armsim.Faults{Delay: ec2sim.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cur := etag(e.do("GET", e.nicPath("nic-b"), nil, nil))
	before := monotime.Now()
	put := e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.60"), map[string]string{
		"If-Match": cur, armsim.HeaderEpoch: "9", armsim.HeaderIdempotencyKey: "k9"})
	after := monotime.Now()
	if put.status != 200 {
		t.Fatalf("PUT: %d %v", put.status, put.body)
	}
	time.Sleep(20 * time.Millisecond)
	flushed := monotime.Now()
	sim.Flush()
	resp, err := http.Get(srv.URL + "/admin/mutations")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil || len(rows) != 1 {
		t.Fatalf("record %s: %v", raw, err)
	}
	r := rows[0]
	mono, _ := r["mono"].(float64)
	accepted, _ := r["acceptedMono"].(float64)
	if r["call"] != "assign-secondary-ip" || r["nic"] != "nic-b" || r["address"] != "10.0.0.60" || r["epoch"] != 9.0 ||
		r["idempotencyKey"] != "k9" || int64(accepted) < before || int64(accepted) > after || int64(mono) < flushed {
		t.Fatalf("record entry %v, want the assign of 10.0.0.60 to nic-b at epoch 9, accepted in [%d, %d] and visible after %d", r, before, after, flushed)
	}
	if _, err := time.Parse(time.RFC3339Nano, r["time"].(string)); err != nil {
		t.Fatalf("time %v: %v", r["time"], err)
	}
	var ms []provider.Mutation
	if err := json.Unmarshal(raw, &ms); err != nil || len(ms) != 1 || ms[0].Address != netip.MustParseAddr("10.0.0.60") || ms[0].Epoch != 9 || ms[0].Call != capture.Assign {
		t.Fatalf("as provider.Mutation: %+v %v", ms, err)
	}
	// Without a delay a change is visible when accepted: the two times
	// are one moment and come out equal, not microseconds apart.
	if err := sim.SetFaults(armsim.Faults{}); err != nil {
		t.Fatal(err)
	}
	cur = etag(e.do("GET", e.nicPath("nic-b"), nil, nil))
	if put := e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", true), map[string]string{"If-Match": cur, armsim.HeaderEpoch: "10", armsim.HeaderAddress: "10.0.0.60"}); put.status != 200 {
		t.Fatalf("PUT: %d %v", put.status, put.body)
	}
	var again []struct {
		Call     string `json:"call"`
		Mono     int64  `json:"mono"`
		Accepted int64  `json:"acceptedMono"`
	}
	resp, err = http.Get(srv.URL + "/admin/mutations")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if err != nil || len(again) != 3 {
		t.Fatalf("record %+v %v, want the assign, the unassign and the forwarding change", again, err)
	}
	for _, m := range again[1:] {
		if m.Mono != m.Accepted || m.Mono < after {
			t.Fatalf("%s: visible at %d, accepted at %d: want one moment, after %d", m.Call, m.Mono, m.Accepted, after)
		}
	}
}

// Calls counts ARM calls by the client their token was issued to and by
// operation, refused ones too (a 412 here); a token the simulator did not
// issue counts under OtherCaller. GET /admin/calls shows the same.
func TestCallsByClient(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	resp, err := http.PostForm(e.srv.URL+"/tenant-1"+armsim.TokenPath, map[string][]string{
		"grant_type": {"client_credentials"}, "client_id": {"node-1"}, "client_secret": {"s"}, "scope": {"https://management.core.windows.net//.default"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %v", err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + tok.AccessToken}
	e.do("GET", e.nicPath("nic-a"), nil, bearer)
	e.do("GET", e.nicPath("nic-b"), nil, bearer)
	if put := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.70"), map[string]string{"Authorization": "Bearer " + tok.AccessToken, "If-Match": `W/"stale"`}); put.status != http.StatusPreconditionFailed {
		t.Fatalf("PUT with a stale etag: %d", put.status)
	}
	e.do("GET", e.nicPath("nic-a"), nil, nil) // the env's own token, not issued
	want := map[string]map[string]uint64{
		"node-1":           {armsim.OpGet: 2, armsim.OpPut: 1},
		armsim.OtherCaller: {armsim.OpGet: 1},
	}
	if got := e.sim.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	resp, err = http.Get(e.srv.URL + "/admin/calls")
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]map[string]uint64
	err = json.NewDecoder(resp.Body).Decode(&shown)
	resp.Body.Close()
	if err != nil || !reflect.DeepEqual(shown, want) {
		t.Fatalf("GET /admin/calls: %v %v, want %v", shown, err, want)
	}
}
