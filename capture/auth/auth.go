// Package auth authenticates requests to the node daemon's HTTP APIs: the
// federation API between nodes and the operator API used by ipfence ctl.
//
// Two schemes are offered. With a shared secret, the client signs every
// request with HMAC-SHA256 (Signer) and the server checks the signature,
// its age and that it was not seen before (Verifier). With mutual TLS, the
// connection itself is authenticated (ServerTLS, ClientTLS) and ClientCerts
// takes the caller's name from its verified certificate. Either way the
// handler behind the middleware learns the caller's node name from Node, and
// a rejected request never reaches the handler: it is answered with a JSON
// error, counted by reason, and changes nothing.
package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
)

// Reasons a request is rejected, as counted by Verifier.Rejected and
// ClientCerts.Rejected and passed to the OnReject hooks.
const (
	// ReasonMissing: a required header or the client certificate is absent.
	ReasonMissing = "missing"
	// ReasonMalformed: a header or a certificate name is not in the
	// expected form, or the body could not be read (answered 400).
	ReasonMalformed = "malformed"
	// ReasonStale: the timestamp is older than the window.
	ReasonStale = "stale"
	// ReasonFuture: the timestamp is further ahead than the window. It is
	// kept apart from stale because it points at the other clock: a stale
	// request has a slow sender (or a replayer), a future one a fast sender.
	ReasonFuture = "future"
	// ReasonBadSignature: the signature does not match the request.
	ReasonBadSignature = "bad-signature"
	// ReasonReplayed: this exact signed request was already accepted.
	ReasonReplayed = "replayed"
	// ReasonTooLarge: the body is over the cap (answered 413).
	ReasonTooLarge = "too-large"
	// ReasonReplayCacheFull: a correctly signed, fresh request arrived while
	// the replay cache was full (answered 503); see Verifier.MaxReplay.
	ReasonReplayCacheFull = "replay-cache-full"
	// ReasonMisconfigured: the Verifier's secret is shorter than
	// MinSecretLen, so no request can be trusted (answered 500).
	ReasonMisconfigured = "misconfigured"
	// ReasonReplayLog: a correctly signed, fresh request whose signature
	// could not be written to the replay log (answered 503): accepting it
	// would let it be replayed after a restart.
	ReasonReplayLog = "replay-log"
)

// DefaultMaxBody is the body cap used when MaxBody is zero or negative.
// The daemon's APIs exchange small JSON documents; a megabyte is generous.
const DefaultMaxBody = 1 << 20

type nodeKey struct{}

// Node returns the authenticated name of the node that sent the request
// whose context is ctx, or "" when the request did not pass through
// Verifier.Middleware or ClientCerts.Middleware.
func Node(ctx context.Context) string {
	s, _ := ctx.Value(nodeKey{}).(string)
	return s
}

// validNode reports whether name may be used as a node name. Names end up
// in logs and metric labels, so they are limited to visible ASCII.
func validNode(name string) bool {
	if len(name) == 0 || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

// capBody returns max, or DefaultMaxBody when max is not positive. It also
// keeps max+1 from overflowing in http.MaxBytesReader.
func capBody(max int64) int64 {
	switch {
	case max <= 0:
		return DefaultMaxBody
	case max == math.MaxInt64:
		return math.MaxInt64 - 1
	}
	return max
}

var errTooLarge = errors.New("request body over the cap")

// readBody reads the whole body of r if it holds at most max bytes, and
// returns errTooLarge otherwise. A declared Content-Length over the cap is
// refused without reading a byte. Going through http.MaxBytesReader also
// tells the server to close the connection after an oversized request, so
// the rest of the body is not read either.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errTooLarge
	}
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errTooLarge
	}
	return body, err
}

// accepted returns r as the next handler should see it: the body that was
// read is readable again from the start, and the context carries node.
func accepted(r *http.Request, body []byte, node string) *http.Request {
	out := r.WithContext(context.WithValue(r.Context(), nodeKey{}, node))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	return out
}

// rejections counts rejected requests by reason.
type rejections struct {
	mu     sync.Mutex
	counts map[string]uint64
}

func (c *rejections) add(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[string]uint64)
	}
	c.counts[reason]++
}

// snapshot returns a copy of the counts with every one of reasons present,
// so that a metrics exporter sees each series from the start, at zero.
func (c *rejections) snapshot(reasons ...string) map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(reasons))
	for _, r := range reasons {
		out[r] = c.counts[r]
	}
	return out
}

// rejection describes how one rejected request is answered.
type rejection struct {
	status int
	reason string
	msg    string // the "error" field of the JSON body
}

// tooLarge is the rejection of a body over max bytes.
func tooLarge(max int64) rejection {
	return rejection{http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body over " + strconv.FormatInt(max, 10) + " bytes"}
}

// bodyRejection is the rejection for an error from readBody.
func bodyRejection(err error, max int64) rejection {
	if errors.Is(err, errTooLarge) {
		return tooLarge(max)
	}
	return rejection{http.StatusBadRequest, ReasonMalformed, "request body could not be read"}
}

// reject counts rej, calls the hook, and writes the JSON answer. The hook
// runs before the answer is written so that a log line it emits is not
// reordered after the client has already seen the response.
func reject(w http.ResponseWriter, r *http.Request, counts *rejections, hook func(string, *http.Request), scheme string, rej rejection) {
	counts.add(rej.reason)
	if hook != nil {
		hook(rej.reason, r)
	}
	if rej.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", scheme)
	}
	writeError(w, rej.status, rej.msg)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}
