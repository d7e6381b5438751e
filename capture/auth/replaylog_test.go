package auth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readTracker is a body that records whether anyone read it.
type readTracker struct {
	r    io.Reader
	read bool
}

func (b *readTracker) Read(p []byte) (int, error) {
	b.read = true
	return b.r.Read(p)
}

func (b *readTracker) Close() error { return nil }

// Issue 14: with a large max_body an unauthenticated POST was read whole
// before the 401. The signature covers the body's digest and is checked
// from the headers: a request that is not correctly signed is refused with
// its body unread, and a correctly signed one whose body is not the one
// signed is refused after.
func TestSignatureCheckedBeforeBody(t *testing.T) {
	c := &clock{t0}
	v := &Verifier{Secret: testSecret, MaxBody: 1 << 30, Now: c.now}
	s := &sink{}
	h := v.Middleware(s)
	for name, hdr := range map[string]func(*http.Request){
		"unsigned": func(r *http.Request) {},
		"wrong secret": func(r *http.Request) {
			(&Signer{Secret: bytes.Repeat([]byte("w"), 32), Node: "node-a", Now: c.now}).Sign(r, []byte("big"))
		},
	} {
		body := &readTracker{r: strings.NewReader(strings.Repeat("x", 1<<20))}
		r, _ := http.NewRequest(http.MethodPost, "http://node/v1/federation/events", body)
		r.ContentLength = 1 << 20
		hdr(r)
		w := serve(h, r)
		if w.Code != http.StatusUnauthorized || body.read || s.count() != 0 {
			t.Errorf("%s: %d, body read %v, handler calls %d", name, w.Code, body.read, s.count())
		}
	}
	// Signed for one body, sent with another.
	r := signedRequest(http.MethodPost, "/v1/x", []byte("signed"), t0)
	r2 := copyRequest(r, []byte("swaped"))
	if w := serve(h, r2); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"bad-signature"}` || s.count() != 0 {
		t.Fatalf("swapped body: %d %q", w.Code, w.Body)
	}
	// The right body is then accepted: the failed try burnt nothing.
	if w := serve(h, copyRequest(r, []byte("signed"))); w.Code != http.StatusOK || s.count() != 1 {
		t.Fatalf("signed body: %d %q", w.Code, w.Body)
	}
}

// Issue 14: the replay cache lived in memory only, so a signed drain
// captured before a restart was accepted again after it. Accepted
// signatures go to a log first, and a new process preloads them; a process
// whose log is new refuses whatever was signed before it started.
func TestReplayLogSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replay.db")
	c := &clock{t0}
	start := func() (*Verifier, *sink, http.Handler, *ReplayLog) {
		t.Helper()
		log, live, fresh, err := OpenReplayLog(path, c.now())
		if err != nil {
			t.Fatal(err)
		}
		v := &Verifier{Secret: testSecret, Now: c.now, Log: log}
		if fresh {
			v.NotBefore = c.now()
		}
		v.Preload(live)
		s := &sink{}
		return v, s, v.Middleware(s), log
	}
	_, s, h, log := start()
	body := []byte(`{"from":"n2"}`)
	captured := signedRequest(http.MethodPost, "/v1/members/n1/drain", body, t0.Add(time.Second))
	c.t = t0.Add(2 * time.Second)
	if w := serve(h, copyRequest(captured, body)); w.Code != http.StatusOK || s.count() != 1 {
		t.Fatalf("first: %d %q", w.Code, w.Body)
	}
	if log.Len() != 1 {
		t.Fatalf("log holds %d", log.Len())
	}
	log.Close()
	// Restarted 10 s later, within the window.
	c.t = t0.Add(12 * time.Second)
	v, s, h, log := start()
	defer log.Close()
	if w := serve(h, copyRequest(captured, body)); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"replayed"}` || s.count() != 0 {
		t.Fatalf("replay after a restart: %d %q", w.Code, w.Body)
	}
	if v.Rejected()[ReasonReplayed] != 1 {
		t.Fatalf("counts %v", v.Rejected())
	}
	// A new request is accepted.
	if w := serve(h, signedRequest(http.MethodPost, "/v1/members/n1/drain", body, c.t)); w.Code != http.StatusOK {
		t.Fatalf("fresh request: %d %q", w.Code, w.Body)
	}
	log.Close()

	// The log lost (a wiped data dir): the replay is refused as signed
	// before the start.
	path = filepath.Join(dir, "new.db")
	_, s, h, log = start()
	defer log.Close()
	if w := serve(h, copyRequest(captured, body)); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"stale"}` || s.count() != 0 {
		t.Fatalf("replay after the log was lost: %d %q", w.Code, w.Body)
	}
	// Expired entries are dropped when the log is opened.
	log.Close()
	c.t = t0.Add(5 * time.Minute)
	_, live, fresh, err := OpenReplayLog(filepath.Join(dir, "replay.db"), c.now())
	if err != nil || fresh || len(live) != 0 {
		t.Fatalf("after the window: %d live, fresh %v, %v", len(live), fresh, err)
	}
}

type failingLog struct{}

func (failingLog) Record([sha256.Size]byte, time.Time) error { return errors.New("disk full") }

// A signature that cannot be persisted is not accepted.
func TestReplayLogFailureRefuses(t *testing.T) {
	c := &clock{t0}
	v := &Verifier{Secret: testSecret, Now: c.now, Log: failingLog{}}
	s := &sink{}
	w := serve(v.Middleware(s), signedRequest(http.MethodPost, "/v1/x", []byte("b"), t0))
	if w.Code != http.StatusServiceUnavailable || s.count() != 0 || v.Rejected()[ReasonReplayLog] != 1 {
		t.Fatalf("%d %q, %d calls, %v", w.Code, w.Body, s.count(), v.Rejected())
	}
}
