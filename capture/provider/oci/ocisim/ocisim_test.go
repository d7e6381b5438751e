package ocisim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/core"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
)

const (
	tenancy     = "ocid1.tenancy.oc1..simtest"
	user        = "ocid1.user.oc1..simtest"
	fingerprint = "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"
	keyID       = tenancy + "/" + user + "/" + fingerprint
)

var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyPEM  string
)

// testKey is the test's API key, made once (1024 bits, for the speed of a
// loaded machine; the checks are the same for any size).
func testKey() (*rsa.PrivateKey, string) {
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

// sdk is the unmodified SDK's client on a simulator, with retries off so
// that every answer reaches the test.
type sdk struct {
	sim    *ocisim.Server
	srv    *httptest.Server
	client core.VirtualNetworkClient
	once   common.RetryPolicy
}

func newSDK(t *testing.T, c ocisim.Config) *sdk {
	t.Helper()
	k, pemKey := testKey()
	if c.Keys == nil {
		c.Keys = map[string]*rsa.PublicKey{keyID: &k.PublicKey}
	}
	sim, err := ocisim.New(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client, err := core.NewVirtualNetworkClientWithConfigurationProvider(common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fingerprint, pemKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	client.Host = srv.URL
	client.Configuration.CircuitBreaker = nil
	return &sdk{sim: sim, srv: srv, client: client, once: common.NoRetryPolicy()}
}

func (s *sdk) md() common.RequestMetadata { return common.RequestMetadata{RetryPolicy: &s.once} }

func (s *sdk) create(t *testing.T, vnic, addr, token string) (core.CreatePrivateIpResponse, error) {
	t.Helper()
	req := core.CreatePrivateIpRequest{
		CreatePrivateIpDetails: core.CreatePrivateIpDetails{VnicId: common.String(vnic), IpAddress: common.String(addr)},
		RequestMetadata:        s.md(),
	}
	if token != "" {
		req.OpcRetryToken = common.String(token)
	}
	return s.client.CreatePrivateIp(t.Context(), req)
}

func (s *sdk) move(t *testing.T, id, vnic, etag string) (core.UpdatePrivateIpResponse, error) {
	t.Helper()
	req := core.UpdatePrivateIpRequest{
		PrivateIpId: common.String(id), UpdatePrivateIpDetails: core.UpdatePrivateIpDetails{VnicId: common.String(vnic)},
		RequestMetadata: s.md(),
	}
	if etag != "" {
		req.IfMatch = common.String(etag)
	}
	return s.client.UpdatePrivateIp(t.Context(), req)
}

func (s *sdk) list(t *testing.T, addr string) []core.PrivateIp {
	t.Helper()
	out, err := s.client.ListPrivateIps(t.Context(), core.ListPrivateIpsRequest{
		SubnetId: common.String(s.sim.SubnetID()), IpAddress: common.String(addr), RequestMetadata: s.md(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// code is a service error's status and code, "" for success.
func code(err error) string {
	if err == nil {
		return ""
	}
	if se, ok := common.IsServiceError(err); ok {
		return fmt.Sprintf("%d %s", se.GetHTTPStatusCode(), se.GetCode())
	}
	return "not a service error: " + err.Error()
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// The SDK's create, get, list, move, and delete, each with what OCI
// answers, and the record they leave: a create and a move with their
// epochs and keys, and the move's origin.
func TestPrivateIPLifecycle(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}})
	created, err := s.create(t, "vnic-a", "10.0.0.7", "")
	if err != nil {
		t.Fatal(err)
	}
	id := str(created.Id)
	if !strings.HasPrefix(id, "ocid1.privateip.") || str(created.IpAddress) != "10.0.0.7" || str(created.VnicId) != "vnic-a" ||
		str(created.SubnetId) != s.sim.SubnetID() || created.IsPrimary == nil || *created.IsPrimary || str(created.Etag) == "" {
		t.Fatalf("created: %+v etag %q", created.PrivateIp, str(created.Etag))
	}
	got, err := s.client.GetPrivateIp(t.Context(), core.GetPrivateIpRequest{PrivateIpId: created.Id, RequestMetadata: s.md()})
	if err != nil || str(got.Etag) != str(created.Etag) || str(got.VnicId) != "vnic-a" {
		t.Fatalf("get: %+v %q %v", got.PrivateIp, str(got.Etag), err)
	}
	if items := s.list(t, "10.0.0.7"); len(items) != 1 || str(items[0].Id) != id {
		t.Fatalf("list by address: %+v", items)
	}
	if items := s.list(t, "10.0.0.8"); len(items) != 0 {
		t.Fatalf("list of a free address: %+v", items)
	}
	// The same address again: 409.
	if _, err := s.create(t, "vnic-b", "10.0.0.7", ""); code(err) != "409 Conflict" {
		t.Fatalf("create of an address in use: %v", err)
	}
	moved, err := s.move(t, id, "vnic-b", str(created.Etag))
	if err != nil {
		t.Fatal(err)
	}
	if str(moved.VnicId) != "vnic-b" || str(moved.Etag) == str(created.Etag) || str(moved.Id) != id {
		t.Fatalf("moved: %+v etag %q (was %q)", moved.PrivateIp, str(moved.Etag), str(created.Etag))
	}
	// By VNIC: the primary and nothing else on vnic-a; the moved address
	// with the primary on vnic-b.
	for vnic, want := range map[string]int{"vnic-a": 1, "vnic-b": 2} {
		out, err := s.client.ListPrivateIps(t.Context(), core.ListPrivateIpsRequest{VnicId: common.String(vnic), RequestMetadata: s.md()})
		if err != nil || len(out.Items) != want {
			t.Fatalf("list %s: %+v %v", vnic, out.Items, err)
		}
	}
	if _, err := s.client.DeletePrivateIp(t.Context(), core.DeletePrivateIpRequest{PrivateIpId: created.Id, IfMatch: moved.Etag, RequestMetadata: s.md()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.GetPrivateIp(t.Context(), core.GetPrivateIpRequest{PrivateIpId: created.Id, RequestMetadata: s.md()}); code(err) != "404 NotAuthorizedOrNotFound" {
		t.Fatalf("get after delete: %v", err)
	}
	ms := s.sim.Mutations()
	a := netip.MustParseAddr("10.0.0.7")
	want := []provider.Mutation{
		{Call: capture.Assign, NIC: "vnic-a", Address: a},
		{Call: capture.Assign, NIC: "vnic-b", Address: a, From: "vnic-a"},
		{Call: capture.Unassign, NIC: "vnic-b", Address: a},
	}
	if len(ms) != len(want) {
		t.Fatalf("record: %+v", ms)
	}
	for i := range ms {
		ms[i].Time = time.Time{}
		if ms[i] != want[i] {
			t.Fatalf("mutation %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
}

// A write with if-match on an ETag that is no longer the object's is 412
// and changes nothing: not the placement, not the record.
func TestIfMatch(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b", "vnic-c"}})
	created, err := s.create(t, "vnic-a", "10.0.0.7", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.move(t, str(created.Id), "vnic-b", str(created.Etag)); err != nil {
		t.Fatal(err)
	}
	n := len(s.sim.Mutations())
	if _, err := s.move(t, str(created.Id), "vnic-c", str(created.Etag)); code(err) != "412 NoEtagMatch" {
		t.Fatalf("move on a stale ETag: %v", err)
	}
	if _, err := s.client.DeletePrivateIp(t.Context(), core.DeletePrivateIpRequest{PrivateIpId: created.Id, IfMatch: created.Etag, RequestMetadata: s.md()}); code(err) != "412 NoEtagMatch" {
		t.Fatalf("delete on a stale ETag: %v", err)
	}
	if h := s.sim.Holder(netip.MustParseAddr("10.0.0.7")); h != "vnic-b" {
		t.Fatalf("after the refused writes the address is on %q, want vnic-b", h)
	}
	if got := len(s.sim.Mutations()); got != n {
		t.Fatalf("refused writes recorded %d mutations", got-n)
	}
	// Without if-match the write is unconditional.
	if _, err := s.move(t, str(created.Id), "vnic-c", ""); err != nil {
		t.Fatal(err)
	}
	// VNICs carry ETags too.
	v, err := s.client.GetVnic(t.Context(), core.GetVnicRequest{VnicId: common.String("vnic-c"), RequestMetadata: s.md()})
	if err != nil {
		t.Fatal(err)
	}
	upd := func(tag *string) error {
		_, err := s.client.UpdateVnic(t.Context(), core.UpdateVnicRequest{VnicId: common.String("vnic-c"), IfMatch: tag,
			UpdateVnicDetails: core.UpdateVnicDetails{SkipSourceDestCheck: common.Bool(true)}, RequestMetadata: s.md()})
		return err
	}
	if err := upd(v.Etag); err != nil {
		t.Fatal(err)
	}
	if err := upd(v.Etag); code(err) != "412 NoEtagMatch" {
		t.Fatalf("UpdateVnic on a stale ETag: %v", err)
	}
}

// A create with a retry token answered once is answered the same way
// again without doing anything; the token with another body is 409.
func TestRetryToken(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}})
	first, err := s.create(t, "vnic-a", "10.0.0.7", "token-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.create(t, "vnic-a", "10.0.0.7", "token-1")
	if err != nil {
		t.Fatalf("the same create with the same token: %v", err)
	}
	if str(again.Id) != str(first.Id) || str(again.Etag) != str(first.Etag) {
		t.Fatalf("replay: %s %s, first %s %s", str(again.Id), str(again.Etag), str(first.Id), str(first.Etag))
	}
	if n := len(s.sim.PrivateIPs()); n != 3 {
		t.Fatalf("%d private IPs after a replayed create, want 3 (two primaries and one)", n)
	}
	if _, err := s.create(t, "vnic-b", "10.0.0.8", "token-1"); code(err) != "409 Conflict" {
		t.Fatalf("the token with another body: %v", err)
	}
	if _, err := s.create(t, "vnic-b", "10.0.0.8", strings.Repeat("x", 65)); code(err) != "400 InvalidParameter" {
		t.Fatalf("a token of 65 characters: %v", err)
	}
	if ms := s.sim.Mutations(); len(ms) != 1 {
		t.Fatalf("record: %+v, want the one create", ms)
	}
}

// Primary private IPs never move and are never deleted; unknown objects
// and VNICs are 404; an address outside the subnet is 400.
func TestRefusals(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}})
	vnics := s.sim.VNICs()
	prim := vnics[0].PrimaryIPID
	if vnics[0].PrimaryIP != netip.MustParseAddr("10.0.0.254") || vnics[1].PrimaryIP != netip.MustParseAddr("10.0.0.253") {
		t.Fatalf("primaries: %+v", vnics)
	}
	if _, err := s.move(t, prim, "vnic-b", ""); code(err) != "400 InvalidParameter" {
		t.Fatalf("moving a primary: %v", err)
	}
	if _, err := s.client.DeletePrivateIp(t.Context(), core.DeletePrivateIpRequest{PrivateIpId: common.String(prim), RequestMetadata: s.md()}); code(err) != "400 InvalidParameter" {
		t.Fatalf("deleting a primary: %v", err)
	}
	if _, err := s.create(t, "vnic-a", "10.0.0.254", ""); code(err) != "409 Conflict" {
		t.Fatalf("creating another VNIC's primary: %v", err)
	}
	if _, err := s.create(t, "vnic-zz", "10.0.0.9", ""); code(err) != "404 NotAuthorizedOrNotFound" {
		t.Fatalf("create on an unknown VNIC: %v", err)
	}
	for _, a := range []string{"10.0.1.9", "10.0.0.0", "10.0.0.255", "fd00::1"} {
		if _, err := s.create(t, "vnic-a", a, ""); code(err) != "400 InvalidParameter" {
			t.Fatalf("create of %s: %v", a, err)
		}
	}
	created, err := s.create(t, "vnic-a", "10.0.0.9", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.move(t, str(created.Id), "vnic-zz", ""); code(err) != "404 NotAuthorizedOrNotFound" {
		t.Fatalf("move to an unknown VNIC: %v", err)
	}
	if _, err := s.client.ListPrivateIps(t.Context(), core.ListPrivateIpsRequest{VnicId: common.String("vnic-zz"), RequestMetadata: s.md()}); code(err) != "404 NotAuthorizedOrNotFound" {
		t.Fatalf("list of an unknown VNIC: %v", err)
	}
	if _, err := s.client.ListPrivateIps(t.Context(), core.ListPrivateIpsRequest{RequestMetadata: s.md()}); code(err) != "400 MissingParameter" {
		t.Fatalf("list with no filter: %v", err)
	}
	if h := s.sim.Holder(netip.MustParseAddr("10.0.0.9")); h != "vnic-a" {
		t.Fatalf("after the refusals 10.0.0.9 is on %q", h)
	}
}

// raw sends a request the SDK would never send.
func raw(t *testing.T, srv *httptest.Server, method, path string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Code + ": " + e.Message
}

// Unsigned requests, signatures of the wrong shape or date, and a body
// whose hash is not the signed one are 401; a signature by a key the
// server does not know, or that does not verify, too.
func TestSignature(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}})
	path := ocisim.BasePath + "/vnics/vnic-a"
	now := time.Now().UTC().Format(http.TimeFormat)
	good := `Signature version="1",keyId="` + keyID + `",algorithm="rsa-sha256",headers="date (request-target) host",signature="AAAA"`
	cases := []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"unsigned", map[string]string{"Date": now}, "no Authorization header"},
		{"not a signature", map[string]string{"Date": now, "Authorization": "Bearer x"}, `not "Signature …"`},
		{"version 2", map[string]string{"Date": now, "Authorization": strings.Replace(good, `version="1"`, `version="2"`, 1)}, "version"},
		{"hmac", map[string]string{"Date": now, "Authorization": strings.Replace(good, "rsa-sha256", "hmac-sha256", 1)}, "algorithm"},
		{"no keyId", map[string]string{"Date": now, "Authorization": strings.Replace(good, `keyId="`+keyID+`",`, "", 1)}, "no keyId"},
		{"bad keyId", map[string]string{"Date": now, "Authorization": strings.Replace(good, keyID, "just-a-name", 1)}, "keyId"},
		{"host not covered", map[string]string{"Date": now, "Authorization": strings.Replace(good, " host", "", 1)}, "does not cover host"},
		{"not base64", map[string]string{"Date": now, "Authorization": strings.Replace(good, "AAAA", "!!", 1)}, "base64"},
		{"old date", map[string]string{"Date": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), "Authorization": good}, "more than 5m0s"},
		{"bad signature", map[string]string{"Date": now, "Authorization": good}, "does not verify"},
		{"unknown key", map[string]string{"Date": now, "Authorization": strings.Replace(good, fingerprint, "ff:ff", 1)}, "not a key the server knows"},
	}
	for _, c := range cases {
		st, msg := raw(t, s.srv, http.MethodGet, path, c.hdr, "")
		if st != http.StatusUnauthorized || !strings.Contains(msg, "NotAuthenticated") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s, want 401 naming %q", c.name, st, msg, c.want)
		}
	}
	// A body whose hash is not the signed one.
	put := `Signature version="1",keyId="` + keyID + `",algorithm="rsa-sha256",headers="date (request-target) host content-length content-type x-content-sha256",signature="AAAA"`
	st, msg := raw(t, s.srv, http.MethodPut, path, map[string]string{"Date": now, "Authorization": put, "Content-Type": "application/json", "X-Content-Sha256": "wrong"}, `{"skipSourceDestCheck":true}`)
	if st != http.StatusUnauthorized || !strings.Contains(msg, "x-content-sha256") {
		t.Errorf("a body of another hash: %d %s", st, msg)
	}
	// Without keys only the shape is checked: the same well-formed
	// header passes.
	open := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}, Keys: map[string]*rsa.PublicKey{}})
	if st, msg := raw(t, open.srv, http.MethodGet, path, map[string]string{"Date": now, "Authorization": good}, ""); st != http.StatusOK {
		t.Errorf("a well-formed signature without keys to verify: %d %s", st, msg)
	}
	if ms := s.sim.Mutations(); len(ms) != 0 {
		t.Fatalf("refused requests changed %+v", ms)
	}
}

// Throttling: the token bucket answers 429 past its burst; injected error
// rates fail calls with their codes and change nothing; a pause holds
// calls until resumed.
func TestFaults(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}})
	get := func() error {
		_, err := s.client.GetVnic(t.Context(), core.GetVnicRequest{VnicId: common.String("vnic-a"), RequestMetadata: s.md()})
		return err
	}
	// A bucket of 3 that refills once an hour: the 4th call is throttled.
	if err := s.sim.SetFaults(ocisim.Faults{Throttle: ocisim.Throttle{Burst: 3, Rate: 1.0 / 3600}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := get(); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	if err := get(); code(err) != "429 TooManyRequests" {
		t.Fatalf("past the burst: %v", err)
	}
	rates := []ocisim.ErrorRate{{Code: ocisim.CodeServiceUnavailable, Rate: 1}}
	if err := s.sim.SetFaults(ocisim.Faults{Errors: map[string][]ocisim.ErrorRate{ocisim.OpCreatePrivateIp: rates}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.create(t, "vnic-a", "10.0.0.7", ""); code(err) != "503 ServiceUnavailable" {
		t.Fatalf("injected 503: %v", err)
	}
	if err := get(); err != nil {
		t.Fatalf("an operation without rates: %v", err)
	}
	if len(s.sim.PrivateIPs()) != 1 || len(s.sim.Mutations()) != 0 {
		t.Fatalf("a failed create changed something: %+v", s.sim.PrivateIPs())
	}
	for _, bad := range []ocisim.Faults{
		{Errors: map[string][]ocisim.ErrorRate{"AssignPrivateIpAddresses": rates}},
		{Errors: map[string][]ocisim.ErrorRate{ocisim.AnyOperation: {{Code: "RequestLimitExceeded", Rate: 1}}}},
		{Latency: ocisim.Duration(-time.Second)},
		{Throttle: ocisim.Throttle{Rate: 5}},
	} {
		if err := s.sim.SetFaults(bad); err == nil {
			t.Errorf("SetFaults(%+v) accepted", bad)
		}
	}
	s.sim.Reset()
	s.sim.Pause()
	done := make(chan error, 1)
	go func() { done <- get() }()
	for s.sim.Waiting() == 0 {
		select {
		case err := <-done:
			t.Fatalf("a call went through a pause: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.sim.Resume()
	if err := <-done; err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

// Late visibility: with a remap delay, the control plane has the move at
// once (the ETag changed, a second move on the old ETag is 412) while
// reads show the old VNIC until the delay passes; the record holds the
// move only once it is visible.
func TestLateVisibility(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b", "vnic-c"}, Clock: clock})
	created, err := s.create(t, "vnic-a", "10.0.0.7", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.sim.SetFaults(ocisim.Faults{RemapDelay: ocisim.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.move(t, str(created.Id), "vnic-b", str(created.Etag)); err != nil {
		t.Fatal(err)
	}
	if items := s.list(t, "10.0.0.7"); len(items) != 1 || str(items[0].VnicId) != "vnic-a" {
		t.Fatalf("before the delay passed: %+v", items)
	}
	if _, err := s.move(t, str(created.Id), "vnic-c", str(created.Etag)); code(err) != "412 NoEtagMatch" {
		t.Fatalf("a second move on the old ETag while the first is not visible: %v", err)
	}
	if n := len(s.sim.Mutations()); n != 1 {
		t.Fatalf("%d mutations recorded before the move is visible, want the create only", n)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if items := s.list(t, "10.0.0.7"); len(items) != 1 || str(items[0].VnicId) != "vnic-b" {
		t.Fatalf("after the delay: %+v", items)
	}
	if ms := s.sim.Mutations(); len(ms) != 2 || ms[1].From != "vnic-a" || ms[1].NIC != "vnic-b" {
		t.Fatalf("record: %+v", ms)
	}
}

// The ipfence headers are recorded with the mutation they come with, and
// a malformed one is refused before anything changes.
func TestStampHeaders(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}})
	s.client.Interceptor = func(r *http.Request) error {
		r.Header.Set(ocisim.HeaderEpoch, "42")
		r.Header.Set(ocisim.HeaderIdempotencyKey, "k-42")
		r.Header.Set(ocisim.HeaderAddress, "10.0.0.7")
		return nil
	}
	if _, err := s.create(t, "vnic-a", "10.0.0.7", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.UpdateVnic(t.Context(), core.UpdateVnicRequest{VnicId: common.String("vnic-a"),
		UpdateVnicDetails: core.UpdateVnicDetails{SkipSourceDestCheck: common.Bool(true)}, RequestMetadata: s.md()}); err != nil {
		t.Fatal(err)
	}
	ms := s.sim.Mutations()
	if len(ms) != 2 || ms[0].Epoch != 42 || ms[0].IdempotencyKey != "k-42" || ms[1].Call != capture.EnableForwarding ||
		ms[1].Address != netip.MustParseAddr("10.0.0.7") || ms[1].Epoch != 42 {
		t.Fatalf("record: %+v", ms)
	}
	s.client.Interceptor = func(r *http.Request) error { r.Header.Set(ocisim.HeaderEpoch, "-1"); return nil }
	if _, err := s.create(t, "vnic-a", "10.0.0.8", ""); code(err) != "400 InvalidParameter" {
		t.Fatalf("a negative epoch: %v", err)
	}
	if len(s.sim.Mutations()) != 2 {
		t.Fatal("a refused stamp changed something")
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []ocisim.Config{
		{},
		{VNICs: []string{"a", "a"}},
		{VNICs: []string{"a b"}},
		{VNICs: []string{"a/b"}},
		{VNICs: []string{"a"}, Subnet: netip.MustParsePrefix("10.0.0.1/24")},
		{VNICs: []string{"a"}, Subnet: netip.MustParsePrefix("fd00::/64")},
		{VNICs: []string{"a", "b", "c"}, Subnet: netip.MustParsePrefix("10.0.0.0/30")},
	} {
		if _, err := ocisim.New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// The admin API: faults in and out as JSON (unknown fields refused), the
// record with its epochs, flush and reset; an operation's latency holds a
// call, and a caller that gives up during it changes nothing.
func TestAdminAndLatency(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}, Keys: map[string]*rsa.PublicKey{}})
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, s.srv.URL+path, strings.NewReader(body))
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do(http.MethodPut, "/admin/faults", `{"latency":"1ms","bogus":1}`); st != http.StatusBadRequest || !strings.Contains(body, "bogus") {
		t.Fatalf("unknown field: %d %s", st, body)
	}
	if st, body := do(http.MethodPut, "/admin/faults", `{"operationLatency":{"CreatePrivateIp":"1h"}}`); st != http.StatusOK || !strings.Contains(body, `"CreatePrivateIp":"1h0m0s"`) {
		t.Fatalf("faults: %d %s", st, body)
	}
	// A server in front that says when the create has arrived.
	arrived := make(chan struct{}, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			arrived <- struct{}{}
		}
		s.sim.ServeHTTP(w, r)
	}))
	defer front.Close()
	// The abandoned call is sent by hand: the SDK's retry loop races
	// with itself when its context ends mid-call (see the driver), and
	// the simulator here checks the signature's shape only.
	body := `{"vnicId":"vnic-a","ipAddress":"10.0.0.7"}`
	sum := sha256.Sum256([]byte(body))
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+ocisim.BasePath+"/privateIps", strings.NewReader(body))
	req.Header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Content-Sha256", base64.StdEncoding.EncodeToString(sum[:]))
	req.Header.Set("Authorization", `Signature version="1",keyId="`+keyID+`",algorithm="rsa-sha256",headers="date (request-target) host content-length content-type x-content-sha256",signature="AAAA"`)
	done := make(chan error, 1)
	go func() {
		resp, err := front.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		done <- err
	}()
	// The call has reached the simulator, which holds it for an hour;
	// give up on it.
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("the create returned before it arrived: %v", err)
	}
	// Cancel only once the simulator itself holds the call (the front
	// saw it arrive before the simulator read the latency), and reset
	// only once it has let go: a reset that came first cleared the
	// latency, and the call then went through (CI saw its 409 later).
	waitHeld := func(want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for s.sim.Waiting() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the simulator holds %d calls, want %d", s.sim.Waiting(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitHeld(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a create held by an hour of latency: %v, want the caller's cancellation", err)
	}
	waitHeld(0)
	if st, _ := do(http.MethodPost, "/admin/reset", ""); st != http.StatusOK {
		t.Fatalf("reset: %d", st)
	}
	if n := len(s.sim.PrivateIPs()); n != 1 {
		t.Fatalf("%d private IPs after the abandoned create, want the primary only", n)
	}
	s.client.Interceptor = func(r *http.Request) error { r.Header.Set(ocisim.HeaderEpoch, "9"); return nil }
	if _, err := s.create(t, "vnic-a", "10.0.0.7", ""); err != nil {
		t.Fatal(err)
	}
	st, body := do(http.MethodGet, "/admin/mutations", "")
	var ms []struct {
		Call    string `json:"call"`
		NIC     string `json:"nic"`
		Address string `json:"address"`
		Epoch   uint64 `json:"epoch"`
		Mono    int64  `json:"mono"`
	}
	if err := json.Unmarshal([]byte(body), &ms); err != nil || st != http.StatusOK {
		t.Fatalf("mutations: %d %s %v", st, body, err)
	}
	if len(ms) != 1 || ms[0].Call != "assign-secondary-ip" || ms[0].NIC != "vnic-a" || ms[0].Address != "10.0.0.7" || ms[0].Epoch != 9 || ms[0].Mono <= 0 {
		t.Fatalf("mutations: %+v", ms)
	}
	if st, body := do(http.MethodGet, "/admin/state", ""); st != http.StatusOK || !strings.Contains(body, s.sim.SubnetID()) || !strings.Contains(body, `"10.0.0.7"`) {
		t.Fatalf("state: %d %s", st, body)
	}
}

// Calls counts every call by operation, the answered, the refused and the
// unsigned alike, and nothing for the admin API.
func TestCalls(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a", "vnic-b"}})
	ip, err := s.create(t, "vnic-a", "10.0.0.10", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.move(t, str(ip.Id), "vnic-b", str(ip.Etag)); err != nil {
		t.Fatal(err)
	}
	// A stale ETag: refused with 412, counted all the same.
	if _, err := s.move(t, str(ip.Id), "vnic-a", str(ip.Etag)); code(err) != "412 NoEtagMatch" {
		t.Fatalf("a move at a stale ETag: %v", err)
	}
	s.list(t, "10.0.0.10")
	s.list(t, "10.0.0.11")
	if st, _ := raw(t, s.srv, http.MethodGet, ocisim.BasePath+"/vnics/vnic-a", nil, ""); st != http.StatusUnauthorized {
		t.Fatalf("an unsigned GetVnic: %d", st)
	}
	if st, _ := raw(t, s.srv, http.MethodGet, "/admin/state", nil, ""); st != http.StatusOK {
		t.Fatalf("admin state: %d", st)
	}
	want := map[string]uint64{
		ocisim.OpCreatePrivateIp: 1, ocisim.OpUpdatePrivateIp: 2, ocisim.OpListPrivateIps: 2, ocisim.OpGetVnic: 1,
		ocisim.OpGetPrivateIp: 0, ocisim.OpDeletePrivateIp: 0, ocisim.OpUpdateVnic: 0,
	}
	got := s.sim.Calls()
	if len(got) != len(want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d calls, want %d (all: %v)", op, got[op], n, got)
		}
	}
	// By signer: the SDK's key, and the unsigned call apart; the admin
	// API shows the same.
	by := map[string]map[string]uint64{
		keyID:                 {ocisim.OpCreatePrivateIp: 1, ocisim.OpUpdatePrivateIp: 2, ocisim.OpListPrivateIps: 2},
		ocisim.UnsignedCaller: {ocisim.OpGetVnic: 1},
	}
	if got := s.sim.CallsBy(); !reflect.DeepEqual(got, by) {
		t.Fatalf("calls by signer %v, want %v", got, by)
	}
	resp, err := s.srv.Client().Get(s.srv.URL + "/admin/calls")
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]map[string]uint64
	err = json.NewDecoder(resp.Body).Decode(&shown)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || !reflect.DeepEqual(shown, by) {
		t.Fatalf("GET /admin/calls: %d %v %v, want %v", resp.StatusCode, shown, err, by)
	}
}
