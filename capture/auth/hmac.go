package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers that carry a request's signature.
const (
	// HeaderTimestamp holds the signing time in unix nanoseconds, decimal.
	HeaderTimestamp = "X-Ipfence-Timestamp"
	// HeaderSignature holds the HMAC-SHA256 of the signed material, hex.
	HeaderSignature = "X-Ipfence-Signature"
	// HeaderNode holds the sender's node name. It is signed, so a holder of
	// the secret cannot be impersonated by someone who merely relabels its
	// requests; but every holder of the secret can claim any name, which is
	// why the name is informational and not an authorization boundary.
	HeaderNode = "X-Ipfence-Node"
)

// MinSecretLen is the shortest shared secret accepted: 32 bytes, the size
// of the HMAC-SHA256 output, below which the key is the weaker link.
const MinSecretLen = 32

// DefaultWindow is the replay window used when Verifier.Window is zero or
// negative: generous for NTP-synchronized nodes, short enough that the
// replay cache stays small.
const DefaultWindow = time.Minute

// DefaultMaxReplay is the replay cache capacity used when
// Verifier.MaxReplay is zero or negative. At about a hundred bytes an entry
// it bounds the cache near 13 MB, and at the default window it admits a
// sustained two thousand requests a second.
const DefaultMaxReplay = 1 << 17

// signedMaterialVersion starts the signed material. Bumping it retires every
// signature made under an older layout.
const signedMaterialVersion = "ipfence-hmac-v1\n"

// writeMaterial writes the signed material to h:
//
//	ipfence-hmac-v1\n
//	<len(timestamp)>:<timestamp>\n
//	<len(node)>:<node>\n
//	<len(method)>:<method>\n
//	<len(target)>:<target>\n
//	<body>
//
// where each len is the decimal byte length of the part that follows it and
// target is the request path with its raw query, as sent on the request
// line. Every part but the last is length-prefixed and the body runs to the
// end, so the material parses back into exactly one tuple: moving bytes from
// one part into another yields different material and so a different MAC.
//
// The Host is deliberately not signed: a proxy or port-forward in front of
// the daemon may rewrite it, and every node holding the secret can sign
// anything anyway, so binding the destination would only guard against an
// eavesdropper replaying a request once to another node within the window,
// which TLS on the connection already prevents.
func writeMaterial(h io.Writer, ts, node, method, target string, body []byte) {
	io.WriteString(h, signedMaterialVersion)
	for _, part := range [...]string{ts, node, method, target} {
		io.WriteString(h, strconv.Itoa(len(part)))
		io.WriteString(h, ":")
		io.WriteString(h, part)
		io.WriteString(h, "\n")
	}
	h.Write(body)
}

func mac(secret []byte, ts, node, method, target string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	writeMaterial(h, ts, node, method, target, body)
	return h.Sum(nil)
}

// requestMethod is r's method as it goes on the wire: the client sends GET
// for an empty one.
func requestMethod(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// requestTarget is r's path and raw query as they appear on the request
// line. The client writes r.URL.RequestURI() there, and the server parses
// the line back into r.URL, from which the same string is rebuilt. Because
// the server verifies r.URL as it finds it, Verifier.Middleware must wrap
// the handler before anything that rewrites the URL, such as
// http.StripPrefix.
func requestTarget(r *http.Request) string {
	if r.URL == nil {
		return ""
	}
	return r.URL.RequestURI()
}

// Signer signs outgoing requests with the shared secret. Its fields must
// not change while it is in use.
type Signer struct {
	// Secret is the shared secret, the same bytes as the Verifier's.
	Secret []byte
	// Node is this sender's name, sent in X-Ipfence-Node.
	Node string
	// Now returns the signing time; nil means time.Now.
	Now func() time.Time
}

// Sign sets the X-Ipfence-Timestamp, X-Ipfence-Node and X-Ipfence-Signature
// headers of r for the given body, which must be exactly the bytes r will
// send. It neither reads nor replaces r.Body. A Signer whose secret is
// shorter than MinSecretLen still signs, but no Verifier will accept it.
func (s *Signer) Sign(r *http.Request, body []byte) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ts := strconv.FormatInt(now().UnixNano(), 10)
	sum := mac(s.Secret, ts, s.Node, requestMethod(r), requestTarget(r), body)
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderNode, s.Node)
	r.Header.Set(HeaderSignature, hex.EncodeToString(sum))
}

// Transport returns a RoundTripper that signs every request and passes it
// to next (http.DefaultTransport when nil). It reads the body to sign it and
// forwards a copy of the request carrying the same bytes, leaving the
// caller's request untouched. Each attempt is signed afresh, so redirects
// are signed for their own target; a request whose first copy reached the
// server cannot be resent with the same signature, which is the point.
func (s *Signer) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &signingTransport{signer: s, next: next}
}

type signingTransport struct {
	signer *Signer
	next   http.RoundTripper
}

var errShortSecret = fmt.Errorf("auth: shared secret is shorter than %d bytes", MinSecretLen)

// RoundTrip signs a copy of req and sends it with the wrapped transport.
func (t *signingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		// A RoundTripper must close the body, even when it fails.
		defer req.Body.Close()
	}
	if len(t.signer.Secret) < MinSecretLen {
		return nil, errShortSecret
	}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("auth: read body of %s %s to sign it: %w", requestMethod(req), requestTarget(req), err)
		}
		body = b
	}
	out := req.Clone(req.Context())
	if req.Body != nil {
		out.ContentLength = int64(len(body))
		out.Body = http.NoBody
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		if len(body) > 0 {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	t.signer.Sign(out, body)
	return t.next.RoundTrip(out)
}

// Verifier authenticates requests signed by a Signer with the same secret.
// Its fields must be set before Middleware is called and not changed after;
// a Verifier must not be copied after first use.
type Verifier struct {
	// Secret is the shared secret. A secret shorter than MinSecretLen fails
	// closed: every request is answered 500 and counted as misconfigured.
	Secret []byte
	// Window is how far a request's timestamp may lie from Now, either way;
	// zero or negative means DefaultWindow.
	Window time.Duration
	// MaxBody caps the request body in bytes; zero or negative means
	// DefaultMaxBody.
	MaxBody int64
	// MaxReplay caps how many accepted signatures the replay cache holds;
	// zero or negative means DefaultMaxReplay. When it is full of unexpired
	// signatures, a new request is answered 503 with Retry-After rather than
	// accepted: only a holder of the secret can fill the cache, and the
	// alternative, forgetting a signature before its window closes, would let
	// that request be replayed.
	MaxReplay int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// OnReject, when set, is called with the reason for each rejected
	// request, before the answer is written, so that the daemon can export
	// metrics and log. It must not read the request body.
	OnReject func(reason string, r *http.Request)

	counts rejections
	replay replayCache
}

// Rejected returns how many requests were rejected, by reason: missing,
// malformed, stale, future, bad-signature, replayed, too-large,
// replay-cache-full and misconfigured, each present even at zero.
func (v *Verifier) Rejected() map[string]uint64 {
	return v.counts.snapshot(ReasonMissing, ReasonMalformed, ReasonStale, ReasonFuture,
		ReasonBadSignature, ReasonReplayed, ReasonTooLarge, ReasonReplayCacheFull, ReasonMisconfigured)
}

// Middleware returns a handler that calls next only for a request that is
// correctly signed, fresh, not seen before, and within the body cap. In
// that order of answers: a body over MaxBody is answered 413 before the
// signature is looked at; absent or ill-formed headers, a timestamp outside
// the window, a wrong signature, and a replay are answered 401. next sees
// the whole body again in r.Body and the sender's name through Node.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(v.Secret) < MinSecretLen {
			v.reject(w, r, rejection{http.StatusInternalServerError, ReasonMisconfigured, "server has no usable shared secret"})
			return
		}
		max := capBody(v.MaxBody)
		body, err := readBody(w, r, max)
		if err != nil {
			v.reject(w, r, bodyRejection(err, max))
			return
		}
		node, rej, retry := v.verify(r, body)
		if rej != "" {
			status := http.StatusUnauthorized
			if rej == ReasonReplayCacheFull {
				status = http.StatusServiceUnavailable
				w.Header().Set("Retry-After", strconv.FormatInt(int64(retry/time.Second)+1, 10))
			}
			v.reject(w, r, rejection{status, rej, rej})
			return
		}
		next.ServeHTTP(w, accepted(r, body, node))
	})
}

func (v *Verifier) reject(w http.ResponseWriter, r *http.Request, rej rejection) {
	reject(w, r, &v.counts, v.OnReject, "Ipfence-HMAC", rej)
}

// verify checks r's signature headers against body and records an accepted
// signature in the replay cache. It returns the sender's node name, or the
// reason for rejection and, for a full replay cache, how long until room is
// made.
func (v *Verifier) verify(r *http.Request, body []byte) (node, reason string, retry time.Duration) {
	tsv, ok1 := single(r.Header, HeaderTimestamp)
	node, ok2 := single(r.Header, HeaderNode)
	sigv, ok3 := single(r.Header, HeaderSignature)
	switch {
	case tsv == "" || node == "" || sigv == "":
		return "", ReasonMissing, 0
	case !ok1 || !ok2 || !ok3:
		return "", ReasonMalformed, 0
	}
	ts, err := parseTimestamp(tsv)
	if err != nil || !validNode(node) || len(sigv) != hex.EncodedLen(sha256.Size) {
		return "", ReasonMalformed, 0
	}
	sig, err := hex.DecodeString(sigv)
	if err != nil {
		return "", ReasonMalformed, 0
	}

	window := v.Window
	if window <= 0 {
		window = DefaultWindow
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	switch {
	case ts.Before(now.Add(-window)):
		return "", ReasonStale, 0
	case ts.After(now.Add(window)):
		return "", ReasonFuture, 0
	}

	want := mac(v.Secret, tsv, node, requestMethod(r), requestTarget(r), body)
	if !hmac.Equal(want, sig) {
		return "", ReasonBadSignature, 0
	}

	max := v.MaxReplay
	if max <= 0 {
		max = DefaultMaxReplay
	}
	// The signature stays replayable until its timestamp leaves the window,
	// so that is when the cache may forget it.
	switch res, wait := v.replay.add([sha256.Size]byte(sig), ts.Add(window), now, max); res {
	case replaySeen:
		return "", ReasonReplayed, 0
	case replayFull:
		return "", ReasonReplayCacheFull, wait
	}
	return node, "", 0
}

// single returns the value of header key in h and whether it is the only
// one. A signature header sent twice is malformed rather than resolved by
// picking one, so that no two readers of the request can disagree.
func single(h http.Header, key string) (string, bool) {
	vs := h.Values(key)
	if len(vs) == 0 {
		return "", true
	}
	return vs[0], len(vs) == 1
}

var errTimestamp = errors.New("timestamp is not a canonical decimal count of unix nanoseconds")

// parseTimestamp accepts only the canonical form Signer writes: decimal
// digits without sign or leading zeros.
func parseTimestamp(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return time.Time{}, errTimestamp
	}
	return time.Unix(0, n), nil
}
