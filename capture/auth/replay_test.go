package auth

import (
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"
)

func TestReplayCacheForgetsAfterWindow(t *testing.T) {
	c := &clock{t0}
	v, s, h := newVerifier(c)
	body := []byte("x")
	first := signedRequest(http.MethodPost, "/v1/claims", body, t0)
	if w := serve(h, copyRequest(first, body)); w.Code != http.StatusOK || v.replay.len() != 1 {
		t.Fatalf("first: %d, cache %d", w.Code, v.replay.len())
	}

	// At the last instant of the window the entry is still needed.
	c.t = t0.Add(time.Minute)
	if w := serve(h, copyRequest(first, body)); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"replayed"}` {
		t.Fatalf("replay at the edge of the window: %d %q", w.Code, w.Body)
	}
	// One nanosecond later the request is stale on its own, and the next
	// request clears the entry.
	c.t = t0.Add(time.Minute + time.Nanosecond)
	if w := serve(h, copyRequest(first, body)); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"stale"}` {
		t.Fatalf("replay after the window: %d %q", w.Code, w.Body)
	}
	if w := serve(h, signedRequest(http.MethodPost, "/v1/claims", body, c.t)); w.Code != http.StatusOK {
		t.Fatalf("fresh request: %d %q", w.Code, w.Body)
	}
	if n := v.replay.len(); n != 1 || s.count() != 2 {
		t.Fatalf("cache holds %d entries, want 1 (the fresh one); %d handler calls", n, s.count())
	}
}

// TestReplayCacheBounded runs a steady stream across a hundred windows: the
// cache holds only the signatures still inside the window.
func TestReplayCacheBounded(t *testing.T) {
	c := &clock{t0}
	v, s, h := newVerifier(c)
	step := time.Minute / 10
	largest := 0
	for i := range 1000 {
		c.t = t0.Add(time.Duration(i) * step)
		body := fmt.Appendf(nil, "%d", i)
		if w := serve(h, signedRequest(http.MethodPost, "/v1/claims", body, c.t)); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %q", i, w.Code, w.Body)
		}
		largest = max(largest, v.replay.len())
	}
	// Entries signed at now-60s through now: eleven of them.
	if n := v.replay.len(); n != 11 || largest != 11 || len(v.replay.expires) != 11 || s.count() != 1000 {
		t.Fatalf("cache holds %d (heap %d), at most %d; %d handler calls", n, len(v.replay.expires), largest, s.count())
	}
}

func TestReplayCacheFull(t *testing.T) {
	c := &clock{t0}
	v, s, h := newVerifier(c)
	v.MaxReplay = 3
	var reqs [][]byte
	for i := range 3 {
		body := fmt.Appendf(nil, "%d", i)
		reqs = append(reqs, body)
		if w := serve(h, signedRequest(http.MethodPost, "/v1/claims", body, t0)); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w := serve(h, signedRequest(http.MethodPost, "/v1/claims", []byte("3"), t0))
	if w.Code != http.StatusServiceUnavailable || w.Body.String() != `{"error":"replay-cache-full"}` || w.Header().Get("Retry-After") != "61" {
		t.Fatalf("fourth: %d %q Retry-After %q", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	// A replay is still recognized as one while the cache is full.
	if w := serve(h, signedRequest(http.MethodPost, "/v1/claims", reqs[0], t0)); w.Code != http.StatusUnauthorized || w.Body.String() != `{"error":"replayed"}` {
		t.Fatalf("replay while full: %d %q", w.Code, w.Body)
	}
	want := zeroCounts()
	want["replay-cache-full"], want["replayed"] = 1, 1
	if got := v.Rejected(); !maps.Equal(got, want) || s.count() != 3 || v.replay.len() != 3 {
		t.Fatalf("counts %v, %d calls, cache %d", got, s.count(), v.replay.len())
	}
	// Once the window has passed there is room again.
	c.t = t0.Add(time.Minute + time.Nanosecond)
	if w := serve(h, signedRequest(http.MethodPost, "/v1/claims", []byte("3"), c.t)); w.Code != http.StatusOK || v.replay.len() != 1 {
		t.Fatalf("after the window: %d, cache %d", w.Code, v.replay.len())
	}
}
