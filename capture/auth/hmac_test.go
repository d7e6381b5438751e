package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSecret is exactly MinSecretLen bytes.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

var t0 = time.Unix(1_700_000_000, 0)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// sink is a handler that records what reached it.
type sink struct {
	mu    sync.Mutex
	calls int
	body  []byte
	node  string
	uri   string
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.body, s.node, s.uri = body, Node(r.Context()), r.URL.RequestURI()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "ok %s %d", Node(r.Context()), r.ContentLength)
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// newVerifier returns a Verifier on clock c with a one-minute window and a
// 64-byte body cap, and the sink behind its middleware.
func newVerifier(c *clock) (*Verifier, *sink, http.Handler) {
	v := &Verifier{Secret: testSecret, Window: time.Minute, MaxBody: 64, Now: c.now}
	s := &sink{}
	return v, s, v.Middleware(s)
}

// signedRequest builds a request and signs it at time at as node-a.
func signedRequest(method, target string, body []byte, at time.Time) *http.Request {
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	signer := &Signer{Secret: testSecret, Node: "node-a", Now: func() time.Time { return at }}
	signer.Sign(r, body)
	return r
}

// copyRequest returns a request with r's method, target and headers and the
// given body, as a replayer would send it.
func copyRequest(r *http.Request, body []byte) *http.Request {
	c := httptest.NewRequest(r.Method, r.URL.RequestURI(), bytes.NewReader(body))
	c.Header = r.Header.Clone()
	return c
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// zeroCounts is Verifier.Rejected before any rejection.
func zeroCounts() map[string]uint64 {
	return map[string]uint64{
		"missing": 0, "malformed": 0, "stale": 0, "future": 0, "bad-signature": 0,
		"replayed": 0, "too-large": 0, "replay-cache-full": 0, "misconfigured": 0, "replay-log": 0,
	}
}

func TestRoundTrip(t *testing.T) {
	v := &Verifier{Secret: testSecret}
	s := &sink{}
	srv := httptest.NewServer(v.Middleware(s))
	defer srv.Close()
	client := &http.Client{Transport: (&Signer{Secret: testSecret, Node: "node-a"}).Transport(nil)}

	body := []byte(`{"pool":"web","address":"10.0.0.1"}`)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/claims?pool=web&x=%2F", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "ok node-a 35" {
		t.Fatalf("POST: %d %q, want 200 %q", resp.StatusCode, got, "ok node-a 35")
	}
	if string(s.body) != string(body) || s.node != "node-a" || s.uri != "/v1/claims?pool=web&x=%2F" || s.calls != 1 {
		t.Fatalf("handler saw body %q node %q uri %q after %d calls", s.body, s.node, s.uri, s.calls)
	}
	if req.Header.Get(HeaderSignature) != "" {
		t.Errorf("Transport modified the caller's request: %v", req.Header)
	}

	// A request without a body, and one whose body was empty.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, srv.URL+"/v1/state", nil)
		if method == http.MethodDelete {
			req.Body = http.NoBody
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(s.body) != 0 || s.node != "node-a" {
			t.Fatalf("%s: %d, handler saw body %q node %q", method, resp.StatusCode, s.body, s.node)
		}
	}
	if s.calls != 3 || !maps.Equal(v.Rejected(), zeroCounts()) {
		t.Fatalf("%d calls, rejections %v", s.calls, v.Rejected())
	}

	// A plain client is turned away.
	resp, err = http.Post(srv.URL+"/v1/claims", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || string(got) != `{"error":"missing"}` ||
		resp.Header.Get("WWW-Authenticate") != "Ipfence-HMAC" || s.calls != 3 || v.Rejected()["missing"] != 1 {
		t.Fatalf("unsigned: %d %q %v, %d calls", resp.StatusCode, got, resp.Header, s.calls)
	}
}

func TestTransportShortSecret(t *testing.T) {
	s := &sink{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	client := &http.Client{Transport: (&Signer{Secret: testSecret[:31], Node: "node-a"}).Transport(nil)}
	_, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err == nil || !strings.Contains(err.Error(), "auth: shared secret is shorter than 32 bytes") || s.count() != 0 {
		t.Fatalf("err %v, %d calls", err, s.count())
	}
}

func TestRejections(t *testing.T) {
	body := []byte(`{"pool":"web"}`)
	sign := func() *http.Request { return signedRequest(http.MethodPost, "/v1/claims?pool=web", body, t0) }
	withHeader := func(key, val string) func() *http.Request {
		return func() *http.Request {
			r := sign()
			r.Header.Set(key, val)
			return r
		}
	}
	big := bytes.Repeat([]byte("x"), 65)
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		reason string
		answer string
	}{
		{"no headers", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/v1/claims?pool=web", bytes.NewReader(body))
		}, 401, "missing", `{"error":"missing"}`},
		{"no signature", func() *http.Request { r := sign(); r.Header.Del(HeaderSignature); return r }, 401, "missing", ""},
		{"no node", func() *http.Request { r := sign(); r.Header.Del(HeaderNode); return r }, 401, "missing", ""},
		{"empty timestamp", withHeader(HeaderTimestamp, ""), 401, "missing", ""},
		{"timestamp not a number", withHeader(HeaderTimestamp, "yesterday"), 401, "malformed", `{"error":"malformed"}`},
		{"timestamp with sign", func() *http.Request {
			r := sign()
			r.Header.Set(HeaderTimestamp, "+"+r.Header.Get(HeaderTimestamp))
			return r
		}, 401, "malformed", ""},
		{"timestamp with leading zero", func() *http.Request {
			r := sign()
			r.Header.Set(HeaderTimestamp, "0"+r.Header.Get(HeaderTimestamp))
			return r
		}, 401, "malformed", ""},
		{"timestamp negative", withHeader(HeaderTimestamp, "-1"), 401, "malformed", ""},
		{"timestamp overflows", withHeader(HeaderTimestamp, "99999999999999999999"), 401, "malformed", ""},
		{"timestamp twice", func() *http.Request {
			r := sign()
			r.Header.Add(HeaderTimestamp, r.Header.Get(HeaderTimestamp))
			return r
		}, 401, "malformed", ""},
		{"signature not hex", withHeader(HeaderSignature, strings.Repeat("zz", 32)), 401, "malformed", ""},
		{"signature short", func() *http.Request {
			r := sign()
			r.Header.Set(HeaderSignature, r.Header.Get(HeaderSignature)[:62])
			return r
		}, 401, "malformed", ""},
		{"node with space", withHeader(HeaderNode, "node a"), 401, "malformed", ""},
		{"wrong secret", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/v1/claims?pool=web", bytes.NewReader(body))
			other := &Signer{Secret: []byte("another secret of thirty-two byt"), Node: "node-a", Now: func() time.Time { return t0 }}
			other.Sign(r, body)
			return r
		}, 401, "bad-signature", `{"error":"bad-signature"}`},
		{"body changed after signing", func() *http.Request {
			return copyRequest(sign(), []byte(`{"pool":"db"}`))
		}, 401, "bad-signature", ""},
		{"body emptied", func() *http.Request { return copyRequest(sign(), nil) }, 401, "bad-signature", ""},
		{"path changed", func() *http.Request {
			r := sign()
			c := httptest.NewRequest(http.MethodPost, "/v1/release?pool=web", bytes.NewReader(body))
			c.Header = r.Header
			return c
		}, 401, "bad-signature", ""},
		{"query changed", func() *http.Request {
			r := sign()
			c := httptest.NewRequest(http.MethodPost, "/v1/claims?pool=db", bytes.NewReader(body))
			c.Header = r.Header
			return c
		}, 401, "bad-signature", ""},
		{"method changed", func() *http.Request {
			r := sign()
			c := httptest.NewRequest(http.MethodPut, "/v1/claims?pool=web", bytes.NewReader(body))
			c.Header = r.Header
			return c
		}, 401, "bad-signature", ""},
		{"node changed", withHeader(HeaderNode, "node-z"), 401, "bad-signature", ""},
		{"timestamp changed", withHeader(HeaderTimestamp, strconv.FormatInt(t0.UnixNano()+1, 10)), 401, "bad-signature", ""},
		{"signature flipped", func() *http.Request {
			r := sign()
			sig := []byte(r.Header.Get(HeaderSignature))
			if sig[0] == '0' {
				sig[0] = '1'
			} else {
				sig[0] = '0'
			}
			r.Header.Set(HeaderSignature, string(sig))
			return r
		}, 401, "bad-signature", ""},
		{"stale", func() *http.Request {
			return signedRequest(http.MethodPost, "/v1/claims", body, t0.Add(-time.Minute-time.Nanosecond))
		}, 401, "stale", `{"error":"stale"}`},
		{"future", func() *http.Request {
			return signedRequest(http.MethodPost, "/v1/claims", body, t0.Add(time.Minute+time.Nanosecond))
		}, 401, "future", `{"error":"future"}`},
		{"body over the cap, signed", func() *http.Request {
			return signedRequest(http.MethodPost, "/v1/claims", big, t0)
		}, 413, "too-large", `{"error":"request body over 64 bytes"}`},
		{"body over the cap, unsigned", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/v1/claims", bytes.NewReader(big))
		}, 413, "too-large", `{"error":"request body over 64 bytes"}`},
		{"body over the cap, length unknown", func() *http.Request {
			r := signedRequest(http.MethodPost, "/v1/claims", big, t0)
			r.ContentLength = -1
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(big), strings.NewReader("more")))
			return r
		}, 413, "too-large", `{"error":"request body over 64 bytes"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, s, h := newVerifier(&clock{t0})
			var hooked []string
			v.OnReject = func(reason string, r *http.Request) { hooked = append(hooked, reason) }
			w := serve(h, c.req())
			if w.Code != c.status {
				t.Errorf("status %d, want %d (%s)", w.Code, c.status, w.Body)
			}
			if c.answer != "" && w.Body.String() != c.answer {
				t.Errorf("answer %q, want %q", w.Body, c.answer)
			}
			if s.count() != 0 {
				t.Errorf("handler called %d times", s.count())
			}
			want := zeroCounts()
			want[c.reason] = 1
			if got := v.Rejected(); !maps.Equal(got, want) {
				t.Errorf("counts %v, want %v", got, want)
			}
			if len(hooked) != 1 || hooked[0] != c.reason {
				t.Errorf("OnReject saw %v, want [%s]", hooked, c.reason)
			}
			if n := v.replay.len(); n != 0 {
				t.Errorf("replay cache holds %d entries after a rejection", n)
			}
		})
	}
}

// TestAccepted pins the edges that must pass, so that the rejections above
// are not passing because everything is rejected.
func TestAccepted(t *testing.T) {
	body64 := bytes.Repeat([]byte("y"), 64)
	cases := []struct {
		name string
		req  *http.Request
		body string
	}{
		{"body exactly at the cap", signedRequest(http.MethodPost, "/v1/claims", body64, t0), string(body64)},
		{"oldest timestamp in the window", signedRequest(http.MethodPost, "/v1/claims", []byte("a"), t0.Add(-time.Minute)), "a"},
		{"newest timestamp in the window", signedRequest(http.MethodPost, "/v1/claims", []byte("b"), t0.Add(time.Minute)), "b"},
		{"empty method is GET", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/v1/state", nil)
			r.Method = ""
			(&Signer{Secret: testSecret, Node: "node-a", Now: func() time.Time { return t0 }}).Sign(r, nil)
			r.Method = http.MethodGet
			return r
		}(), ""},
	}
	for _, c := range cases {
		v, s, h := newVerifier(&clock{t0})
		w := serve(h, c.req)
		if w.Code != http.StatusOK || s.count() != 1 || string(s.body) != c.body || s.node != "node-a" {
			t.Errorf("%s: %d %q, handler called %d times with body %q node %q", c.name, w.Code, w.Body, s.count(), s.body, s.node)
		}
		if !maps.Equal(v.Rejected(), zeroCounts()) {
			t.Errorf("%s: counts %v", c.name, v.Rejected())
		}
	}
}

func TestReplay(t *testing.T) {
	v, s, h := newVerifier(&clock{t0})
	body := []byte(`{"release":"10.0.0.1"}`)
	first := signedRequest(http.MethodPost, "/v1/release", body, t0)
	captured := copyRequest(first, body)
	upper := copyRequest(first, body)
	upper.Header.Set(HeaderSignature, strings.ToUpper(first.Header.Get(HeaderSignature)))

	if w := serve(h, first); w.Code != http.StatusOK || s.count() != 1 {
		t.Fatalf("first: %d, %d calls", w.Code, s.count())
	}
	w := serve(h, captured)
	if w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"replayed"}` || s.count() != 1 {
		t.Fatalf("replay: %d %q, %d calls", w.Code, w.Body, s.count())
	}
	// The same signature spelled in upper-case hex is the same signature.
	if w := serve(h, upper); w.Code != http.StatusUnauthorized || s.count() != 1 {
		t.Fatalf("upper-case replay: %d, %d calls", w.Code, s.count())
	}
	want := zeroCounts()
	want["replayed"] = 2
	if got := v.Rejected(); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// TestReplayConcurrent sends one signed request from many goroutines at
// once: exactly one may get through.
func TestReplayConcurrent(t *testing.T) {
	v, s, h := newVerifier(&clock{t0})
	body := []byte("once")
	orig := signedRequest(http.MethodPost, "/v1/claims", body, t0)
	const n = 32
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		r := copyRequest(orig, body)
		wg.Go(func() { codes[i] = serve(h, r).Code })
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		}
	}
	if ok != 1 || s.count() != 1 || v.Rejected()["replayed"] != n-1 {
		t.Fatalf("%d accepted, %d handler calls, %d replays counted", ok, s.count(), v.Rejected()["replayed"])
	}
}

func TestMisconfigured(t *testing.T) {
	for _, secret := range [][]byte{nil, testSecret[:31]} {
		v := &Verifier{Secret: secret, Now: (&clock{t0}).now}
		s := &sink{}
		// Signed with the same short secret: it must still not pass.
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
		(&Signer{Secret: secret, Node: "node-a", Now: func() time.Time { return t0 }}).Sign(r, []byte("x"))
		w := serve(v.Middleware(s), r)
		want := zeroCounts()
		want["misconfigured"] = 1
		if w.Code != http.StatusInternalServerError || s.count() != 0 || !maps.Equal(v.Rejected(), want) {
			t.Errorf("secret of %d bytes: %d %q, %d calls, counts %v", len(secret), w.Code, w.Body, s.count(), v.Rejected())
		}
	}
}

func TestMaterialLayout(t *testing.T) {
	var b bytes.Buffer
	writeMaterial(&b, "1700000000000000000", "node-a", "POST", "/v1/claims?pool=web", bodyDigest([]byte("{}\n")))
	// sha256("{}\n") = ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356
	want := "ipfence-hmac-v2\n19:1700000000000000000\n6:node-a\n4:POST\n19:/v1/claims?pool=web\nca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356"
	if b.String() != want {
		t.Fatalf("material %q, want %q", b.String(), want)
	}
}

// TestMaterialUnambiguous moves bytes across part boundaries: each variant
// must give a different MAC.
func TestMaterialUnambiguous(t *testing.T) {
	type parts struct{ ts, node, method, target, body string }
	variants := []parts{
		{"1", "n", "POST", "/a", "b"},
		{"1", "n", "POST", "/ab", ""},
		{"1", "n", "POST/", "a", "b"},
		{"1", "nPOST", "", "/a", "b"},
		{"1n", "", "POST", "/a", "b"},
		{"1", "n", "POST", "/a\n1:b", ""},
		{"1", "n", "POST", "/a", "\n1:b"},
		{"1", "n\n4:POST", "", "/a", "b"},
	}
	seen := map[string]parts{}
	for _, p := range variants {
		sum := hex.EncodeToString(mac(testSecret, p.ts, p.node, p.method, p.target, bodyDigest([]byte(p.body))))
		if q, dup := seen[sum]; dup {
			t.Errorf("%+v and %+v share a MAC", p, q)
		}
		seen[sum] = p
	}
}

// referenceMAC restates the documented layout independently of
// writeMaterial, from the body itself.
func referenceMAC(secret []byte, ts, node, method, target string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "ipfence-hmac-v2\n%d:%s\n%d:%s\n%d:%s\n%d:%s\n%x", len(ts), ts, len(node), node, len(method), method, len(target), target, sha256.Sum256(body))
	return h.Sum(nil)
}

// parseMaterial reads material back into its parts, proving the layout is
// injective: it fails unless the bytes parse as exactly one tuple.
func parseMaterial(m []byte) (parts [4]string, body []byte, ok bool) {
	rest, found := bytes.CutPrefix(m, []byte(signedMaterialVersion))
	if !found {
		return parts, nil, false
	}
	for i := range parts {
		num, after, found := bytes.Cut(rest, []byte(":"))
		if !found {
			return parts, nil, false
		}
		n, err := strconv.Atoi(string(num))
		if err != nil || n < 0 || n+1 > len(after) || after[n] != '\n' {
			return parts, nil, false
		}
		parts[i], rest = string(after[:n]), after[n+1:]
	}
	return parts, rest, true
}

func FuzzMaterial(f *testing.F) {
	f.Add("1700000000000000000", "node-a", "POST", "/v1/claims?pool=web", []byte("{}"))
	f.Add("1", "5:abc\n", ":", "\n", []byte("\n1:x\n"))
	f.Fuzz(func(t *testing.T, ts, node, method, target string, body []byte) {
		var b bytes.Buffer
		writeMaterial(&b, ts, node, method, target, body)
		parts, gotBody, ok := parseMaterial(b.Bytes())
		if !ok || parts != [4]string{ts, node, method, target} || !bytes.Equal(gotBody, body) {
			t.Fatalf("material %q parsed as %q %q %v", b.Bytes(), parts, gotBody, ok)
		}
		if !hmac.Equal(mac(testSecret, ts, node, method, target, bodyDigest(body)), referenceMAC(testSecret, ts, node, method, target, body)) {
			t.Fatalf("mac disagrees with the documented layout")
		}
	})
}
