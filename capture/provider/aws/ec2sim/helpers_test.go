package ec2sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var (
	nicIDs = []string{"eni-a", "eni-b", "eni-c"}
	t0     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Primary IPs of nicIDs in DefaultSubnet: the first addresses after
	// the four AWS reserves.
	primaryA = netip.MustParseAddr("10.0.0.4")
	primaryB = netip.MustParseAddr("10.0.0.5")
	ip7      = netip.MustParseAddr("10.0.0.7")
	ip8      = netip.MustParseAddr("10.0.0.8")
	ip9      = netip.MustParseAddr("10.0.0.9")
)

// latencyWait is one wait of an injected latency on a hand timer: its
// length, the channel that ends it, and a channel closed when the server
// stops it (its caller gave up).
type latencyWait struct {
	d       time.Duration
	fire    chan time.Time
	stopped chan struct{}
}

// handTimers makes s wait out its injected latencies on timers the test
// fires, and returns where each wait arrives as it begins.
func handTimers(s *Server) <-chan latencyWait {
	waits := make(chan latencyWait, 16)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
		w := latencyWait{d: d, fire: make(chan time.Time, 1), stopped: make(chan struct{})}
		waits <- w
		var once sync.Once
		return w.fire, func() bool {
			once.Do(func() { close(w.stopped) })
			return true
		}
	}
	return waits
}

// nextWait returns the next latency wait the server begins.
func nextWait(t *testing.T, waits <-chan latencyWait) latencyWait {
	t.Helper()
	select {
	case w := <-waits:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("no call began to wait out an injected latency")
	}
	return latencyWait{}
}

// env is a simulator behind an httptest server and an SDK client for it.
type env struct {
	t     *testing.T
	s     *Server
	srv   *httptest.Server
	ec2   *ec2.Client
	clock *handclock.Clock
}

// newEnv starts a simulator with nicIDs and a fake clock at t0, unless c
// says otherwise.
func newEnv(t *testing.T, c Config) *env {
	t.Helper()
	e := &env{t: t, clock: handclock.New(t0)}
	if c.NICs == nil && c.StateDir == "" {
		c.NICs = nicIDs
	}
	if c.Clock == nil {
		c.Clock = e.clock.Now
	}
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v) = %v", c, err)
	}
	e.s = s
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	e.ec2 = sdkClient(e.srv.URL, &http.Client{Transport: bufferedBodies{e.srv.Client().Transport}})
	return e
}

// bufferedBodies sends each request with its body read into memory first,
// for the reason the AWS driver wraps its bodies (plainBodies in
// capture/provider/aws): net/http's write loop, making its last check of
// the SDK's body after the simulator had answered 200, took a closed body
// for a failed write and closed the connection under the response being
// read — "use of closed network connection" on a Describe, 8 runs in 300
// of TestErrorRates under -race on a loaded machine, and with one attempt
// per call (sdkClient) nothing retried it. 0 in 1000 runs buffered.
type bufferedBodies struct{ next http.RoundTripper }

func (b bufferedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	}
	return b.next.RoundTrip(r)
}

// sdkClient is the unmodified SDK, as the AWS driver builds it, with one
// attempt per call so that error tests see the first answer.
func sdkClient(url string, hc *http.Client) *ec2.Client {
	cfg := aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       hc,
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(url) })
}

// headers makes an SDK call send the fencing token headers.
func headers(epoch, key string) func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions,
			smithyhttp.AddHeaderValue(HeaderEpoch, epoch),
			smithyhttp.AddHeaderValue(HeaderIdempotencyKey, key))
	}
}

// expectAPIError checks an SDK call's error: HTTP status, EC2 code, and a
// message starting with msg.
func expectAPIError(t *testing.T, err error, status int, code, msg string) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("error = %v, want an EC2 API error %s", err, code)
	}
	if api.ErrorCode() != code || !strings.HasPrefix(api.ErrorMessage(), msg) {
		t.Fatalf("error = %s: %q, want %s: %q…", api.ErrorCode(), api.ErrorMessage(), code, msg)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != status {
		t.Fatalf("error %v: want HTTP status %d", err, status)
	}
}

// assign calls AssignPrivateIpAddresses.
func (e *env) assign(nic string, reassign bool, addrs ...netip.Addr) error {
	_, err := e.ec2.AssignPrivateIpAddresses(e.t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(nic), PrivateIpAddresses: strs(addrs), AllowReassignment: aws.Bool(reassign),
	})
	return err
}

func (e *env) mustAssign(nic string, reassign bool, addrs ...netip.Addr) {
	e.t.Helper()
	if err := e.assign(nic, reassign, addrs...); err != nil {
		e.t.Fatalf("assign %v to %s (reassign %t) = %v", addrs, nic, reassign, err)
	}
}

func (e *env) unassign(nic string, addrs ...netip.Addr) error {
	_, err := e.ec2.UnassignPrivateIpAddresses(e.t.Context(), &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(nic), PrivateIpAddresses: strs(addrs),
	})
	return err
}

func strs(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

// placement renders the visible secondaries of every NIC and its source/dest
// check, such as "eni-a:10.0.0.7,10.0.0.8 check=true".
func placement(s *Server) []string {
	var out []string
	for _, n := range s.State().NICs {
		out = append(out, n.ID+":"+strings.Join(strs(n.SecondaryIPs), ",")+" check="+map[bool]string{true: "true", false: "false"}[n.SourceDestCheck])
	}
	return out
}

// fingerprint is everything a call could change: the visible model, the
// pending mutations, the record and the faults.
func fingerprint(t testing.TB, s *Server) string {
	t.Helper()
	b, err := json.Marshal(struct {
		State     State
		Mutations any
	}{s.State(), s.Mutations()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawCall sends a form with an Authorization header, as a hand-written
// client would, and returns the status and body.
func rawCall(t *testing.T, url, method, form string, header map[string]string) (int, string) {
	t.Helper()
	var req *http.Request
	var err error
	if method == http.MethodGet {
		req, err = http.NewRequestWithContext(t.Context(), method, url+"/?"+form, nil)
	} else {
		req, err = http.NewRequestWithContext(t.Context(), method, url+"/", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260102/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// adminDo calls the admin API and decodes a 200 answer into out.
func adminDo(t *testing.T, url, method, path string, body any, out any) {
	t.Helper()
	status, raw := adminRaw(t, url, method, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s = %d %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

func adminRaw(t *testing.T, url, method, path string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
