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
	// HeaderContentSHA256 holds the SHA-256 of the body, hex. The
	// signature covers it instead of the body, so that the signature is
	// checked before a byte of the body is read: a stranger's body is
	// never read, however large the cap.
	HeaderContentSHA256 = "X-Ipfence-Content-Sha256"
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
const signedMaterialVersion = "ipfence-hmac-v2\n"

// writeMaterial writes the signed material to h:
//
//	ipfence-hmac-v2\n
//	<len(timestamp)>:<timestamp>\n
//	<len(node)>:<node>\n
//	<len(method)>:<method>\n
//	<len(target)>:<target>\n
//	<digest>
//
// where each len is the decimal byte length of the part that follows it,
// target is the request path with its raw query, as sent on the request
// line, and digest is the body's SHA-256 in lower-case hex (the
// X-Ipfence-Content-Sha256 header). Every part but the last is
// length-prefixed and the digest runs to the end, so the material parses
// back into exactly one tuple: moving bytes from one part into another
// yields different material and so a different MAC. Version 2 signs the
// digest rather than the body (version 1), so that the signature can be
// checked from the headers alone.
//
// The Host is deliberately not signed: a proxy or port-forward in front of
// the daemon may rewrite it, and every node holding the secret can sign
// anything anyway, so binding the destination would only guard against an
// eavesdropper replaying a request once to another node within the window,
// which TLS on the connection already prevents.
func writeMaterial(h io.Writer, ts, node, method, target string, digest []byte) {
	io.WriteString(h, signedMaterialVersion)
	for _, part := range [...]string{ts, node, method, target} {
		io.WriteString(h, strconv.Itoa(len(part)))
		io.WriteString(h, ":")
		io.WriteString(h, part)
		io.WriteString(h, "\n")
	}
	h.Write(digest)
}

func mac(secret []byte, ts, node, method, target string, digest []byte) []byte {
	h := hmac.New(sha256.New, secret)
	writeMaterial(h, ts, node, method, target, digest)
	return h.Sum(nil)
}

// bodyDigest is the hex SHA-256 of body, as HeaderContentSHA256 carries it.
func bodyDigest(body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(hex.EncodeToString(sum[:]))
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
	digest := bodyDigest(body)
	sum := mac(s.Secret, ts, s.Node, requestMethod(r), requestTarget(r), digest)
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(HeaderContentSHA256, string(digest))
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
	// NotBefore, when set, refuses (as stale) every request signed before
	// it: a node whose replay log is new sets it to its start, so that a
	// request captured before a restart that lost the log cannot be
	// replayed after it.
	NotBefore time.Time
	// Log, when set, persists every accepted signature before the request
	// is passed on, so that the replay cache survives a restart (see
	// OpenReplayLog and Preload). A signature it cannot persist is not
	// accepted (answered 503).
	Log interface {
		Record(sig [sha256.Size]byte, expires time.Time) error
	}

	counts rejections
	replay replayCache
}

// Preload fills the replay cache with signatures accepted before (by an
// earlier process, from its replay log), each until its expiry. Call it
// before Middleware serves.
func (v *Verifier) Preload(entries map[[sha256.Size]byte]time.Time) {
	for sig, exp := range entries {
		v.replay.add(sig, exp, time.Time{}, int(^uint(0)>>1))
	}
}

// Rejected returns how many requests were rejected, by reason: missing,
// malformed, stale, future, bad-signature, replayed, too-large,
// replay-cache-full and misconfigured, each present even at zero.
func (v *Verifier) Rejected() map[string]uint64 {
	return v.counts.snapshot(ReasonMissing, ReasonMalformed, ReasonStale, ReasonFuture,
		ReasonBadSignature, ReasonReplayed, ReasonTooLarge, ReasonReplayCacheFull, ReasonMisconfigured, ReasonReplayLog)
}

// Middleware returns a handler that calls next only for a request that is
// correctly signed, fresh, not seen before, and within the body cap. The
// signature is checked from the headers alone (it covers the body's
// digest), before a byte of the body is read: a declared body over MaxBody
// is answered 413 first; absent or ill-formed headers, a timestamp outside
// the window (or before NotBefore), a wrong signature, and a replay are
// answered 401 without reading the body; then the body is read, within the
// cap, and a body that does not match the signed digest is answered 401
// too. next sees the whole body again in r.Body and the sender's name
// through Node.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(v.Secret) < MinSecretLen {
			v.reject(w, r, rejection{http.StatusInternalServerError, ReasonMisconfigured, "server has no usable shared secret"})
			return
		}
		max := capBody(v.MaxBody)
		if r.ContentLength > max {
			v.reject(w, r, tooLarge(max))
			return
		}
		node, digest, rej, _ := v.verify(r)
		if rej != "" {
			v.reject(w, r, rejection{http.StatusUnauthorized, rej, rej})
			return
		}
		body, err := readBody(w, r, max)
		if err != nil {
			v.reject(w, r, bodyRejection(err, max))
			return
		}
		if !hmac.Equal(bodyDigest(body), digest) {
			v.reject(w, r, rejection{http.StatusUnauthorized, ReasonBadSignature, ReasonBadSignature})
			return
		}
		// Remembered only once the whole request checked out, so that a
		// rejected one leaves nothing behind.
		if rej, retry := v.remember(r); rej != "" {
			status := http.StatusUnauthorized
			switch rej {
			case ReasonReplayCacheFull:
				status = http.StatusServiceUnavailable
				w.Header().Set("Retry-After", strconv.FormatInt(int64(retry/time.Second)+1, 10))
			case ReasonReplayLog:
				status = http.StatusServiceUnavailable
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

// verify checks r's signature headers, which cover the body's digest. It
// returns the sender's node name and the signed digest, or the reason for
// rejection.
func (v *Verifier) verify(r *http.Request) (node string, digest []byte, reason string, retry time.Duration) {
	tsv, ok1 := single(r.Header, HeaderTimestamp)
	node, ok2 := single(r.Header, HeaderNode)
	sigv, ok3 := single(r.Header, HeaderSignature)
	dv, ok4 := single(r.Header, HeaderContentSHA256)
	switch {
	case tsv == "" || node == "" || sigv == "" || dv == "":
		return "", nil, ReasonMissing, 0
	case !ok1 || !ok2 || !ok3 || !ok4:
		return "", nil, ReasonMalformed, 0
	}
	ts, err := parseTimestamp(tsv)
	if err != nil || !validNode(node) || len(sigv) != hex.EncodedLen(sha256.Size) || !lowerHex(dv, sha256.Size) {
		return "", nil, ReasonMalformed, 0
	}
	sig, err := hex.DecodeString(sigv)
	if err != nil {
		return "", nil, ReasonMalformed, 0
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
	case ts.Before(now.Add(-window)) || ts.Before(v.NotBefore):
		return "", nil, ReasonStale, 0
	case ts.After(now.Add(window)):
		return "", nil, ReasonFuture, 0
	}

	want := mac(v.Secret, tsv, node, requestMethod(r), requestTarget(r), []byte(dv))
	if !hmac.Equal(want, sig) {
		return "", nil, ReasonBadSignature, 0
	}

	return node, []byte(dv), "", 0
}

// remember records an accepted signature in the replay cache, and then in
// the log. It returns the reason for rejection (a replay, a full cache, a
// log that cannot be written) and, for a full cache, how long until room is
// made.
func (v *Verifier) remember(r *http.Request) (reason string, retry time.Duration) {
	sig, _ := hex.DecodeString(r.Header.Get(HeaderSignature)) // verify checked it
	ts, _ := parseTimestamp(r.Header.Get(HeaderTimestamp))
	window := v.Window
	if window <= 0 {
		window = DefaultWindow
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	max := v.MaxReplay
	if max <= 0 {
		max = DefaultMaxReplay
	}
	// The signature stays replayable until its timestamp leaves the window,
	// so that is when the cache may forget it.
	key := [sha256.Size]byte(sig)
	switch res, wait := v.replay.add(key, ts.Add(window), now, max); res {
	case replaySeen:
		return ReasonReplayed, 0
	case replayFull:
		return ReasonReplayCacheFull, wait
	}
	if v.Log != nil {
		if err := v.Log.Record(key, ts.Add(window)); err != nil {
			// Not persisted, so not accepted: after a restart it could be
			// replayed. It stays in the cache, so it is not accepted
			// later in this process either.
			return ReasonReplayLog, 0
		}
	}
	return "", 0
}

// lowerHex reports whether s is the lower-case hex form of n bytes.
func lowerHex(s string, n int) bool {
	if len(s) != 2*n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
