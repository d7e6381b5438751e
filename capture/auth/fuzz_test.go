package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// FuzzVerify sends arbitrary headers, methods, targets and bodies through
// the middleware, either as given or correctly signed at an arbitrary clock
// skew. The handler must be reached exactly when an independent restatement
// of the rules says so, never twice for one signature, and nothing panics.
func FuzzVerify(f *testing.F) {
	f.Add(true, int64(0), "", "node-a", "", "POST", "/v1/claims?pool=web", []byte(`{"pool":"web"}`))
	f.Add(true, int64(time.Minute), "", "node-a", "", "GET", "/", []byte{})
	f.Add(true, int64(-time.Minute-1), "", "node-a", "", "PUT", "/x", []byte("y"))
	f.Add(true, int64(0), "", "node a", "", "POST", "/", []byte("y"))
	f.Add(true, int64(0), "", "node-a", "", "POST", "/", bytes.Repeat([]byte("y"), 65))
	f.Add(false, int64(0), "1700000000000000000", "node-a", "00", "POST", "/", []byte("y"))
	f.Add(false, int64(0), "+1700000000000000000", "n", "zz", "", "*", []byte(nil))
	f.Add(false, int64(0), "1700000000000000000", "node-a", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "POST", "/", []byte("y"))
	f.Fuzz(func(t *testing.T, sign bool, skew int64, ts, node, sig, method, target string, body []byte) {
		v, s, h := newVerifier(&clock{t0})
		u, err := url.ParseRequestURI(target)
		if err != nil {
			u = &url.URL{Path: "/"}
		}
		build := func() *http.Request {
			return &http.Request{Method: method, URL: u, Header: make(http.Header),
				Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		}
		r := build()
		if sign {
			(&Signer{Secret: testSecret, Node: node, Now: func() time.Time { return t0.Add(time.Duration(skew)) }}).Sign(r, body)
		} else {
			r.Header.Set(HeaderTimestamp, ts)
			r.Header.Set(HeaderNode, node)
			r.Header.Set(HeaderSignature, sig)
		}
		headers := r.Header.Clone()
		want := shouldAccept(headers, method, u, body)

		w := serve(h, r)
		if got := s.count() == 1; got != want {
			t.Fatalf("handler reached: %v, want %v (%d %q) for headers %q method %q target %q body %q",
				got, want, w.Code, w.Body, headers, method, u.RequestURI(), body)
		}
		rejected := uint64(0)
		for _, n := range v.Rejected() {
			rejected += n
		}
		switch {
		case want && (w.Code != http.StatusOK || rejected != 0 || !bytes.Equal(s.body, body) || s.node != headers.Get(HeaderNode)):
			t.Fatalf("accepted: %d, %d rejections, handler saw body %q node %q", w.Code, rejected, s.body, s.node)
		case !want && (rejected != 1 || (w.Code != http.StatusUnauthorized && w.Code != http.StatusRequestEntityTooLarge)):
			t.Fatalf("rejected: %d with %d rejections counted", w.Code, rejected)
		}

		// The same request again never reaches the handler a second time.
		again := build()
		again.Header = headers
		serve(h, again)
		if s.count() > 1 {
			t.Fatalf("handler reached twice for one signature")
		}
	})
}

// shouldAccept restates the acceptance rules for a Verifier from
// newVerifier at time t0: body within 64 bytes, each header present once,
// a canonical timestamp within a minute, a visible-ASCII node name, and a
// signature equal to the MAC of the documented layout, over a digest
// header that matches the body.
func shouldAccept(h http.Header, method string, u *url.URL, body []byte) bool {
	if len(body) > 64 || len(h.Values(HeaderTimestamp)) != 1 || len(h.Values(HeaderNode)) != 1 || len(h.Values(HeaderSignature)) != 1 || len(h.Values(HeaderContentSHA256)) != 1 {
		return false
	}
	if d := sha256.Sum256(body); h.Get(HeaderContentSHA256) != hex.EncodeToString(d[:]) {
		return false
	}
	ts, node := h.Get(HeaderTimestamp), h.Get(HeaderNode)
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != ts || n < t0.Add(-time.Minute).UnixNano() || n > t0.Add(time.Minute).UnixNano() {
		return false
	}
	if len(node) == 0 || len(node) > 255 {
		return false
	}
	for _, b := range []byte(node) {
		if b <= ' ' || b > '~' {
			return false
		}
	}
	sig, err := hex.DecodeString(h.Get(HeaderSignature))
	if method == "" {
		method = http.MethodGet
	}
	return err == nil && hmac.Equal(sig, referenceMAC(testSecret, ts, node, method, u.RequestURI(), body))
}
