package etcdline_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

func startEtcd(t *testing.T) (string, func(syscall.Signal)) { return testenv.Etcd(t) }

var key = capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.1.10"), Domain: "provider:aws:group:g"}

// The line in a real etcd: a bump is a compare-and-swap on the key's
// revision under the node's session; of two nodes bumping from the same
// record exactly one wins; a check of an old revision fails; an epoch that
// does not rise is refused; a node whose session is gone changes nothing.
func TestLineInEtcd(t *testing.T) {
	url, _ := startEtcd(t)
	ctx := context.Background()
	n1 := &etcdline.Client{Endpoints: []string{"http://127.0.0.1:1", url}, Prefix: "/ipfence/", Node: "n1"}
	n2 := &etcdline.Client{Endpoints: []string{url}, Prefix: "/ipfence/", Node: "n2"}
	s1, err := n1.Open(ctx, 5*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := n2.Open(ctx, 5*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s1.TTL != 5*time.Second || !s1.Live(time.Now()) || s1.Live(time.Now().Add(6*time.Second)) {
		t.Fatalf("session: TTL %v, live now %v", s1.TTL, s1.Live(time.Now()))
	}
	r0, err := n1.Get(ctx, key)
	if err != nil || r0 != (etcdline.Record{}) {
		t.Fatalf("an absent key: %+v %v", r0, err)
	}
	r1, err := n1.Bump(ctx, s1.Lease, key, r0, capture.EpochRecord{Epoch: 1, Holder: "n1"})
	if err != nil || r1.Epoch != 1 || r1.Rev <= 0 {
		t.Fatalf("first bump: %+v %v", r1, err)
	}
	if got, err := n2.Get(ctx, key); err != nil || got != r1 {
		t.Fatalf("n2 reads %+v (%v), want %+v", got, err, r1)
	}
	// Both bump from r1 at once: one wins, the other is told what won.
	var wg sync.WaitGroup
	results := make([]error, 2)
	recs := make([]etcdline.Record, 2)
	for i, c := range []*etcdline.Client{n1, n2} {
		lease := []etcdline.Lease{s1.Lease, s2.Lease}[i]
		wg.Go(func() {
			recs[i], results[i] = c.Bump(ctx, lease, key, r1, capture.EpochRecord{Epoch: 2, Holder: c.Node})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range results {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatal("both bumps from one revision won")
			}
			won = i
		case !errors.Is(err, etcdline.ErrConflict) || !strings.Contains(err.Error(), "epoch 2"):
			t.Fatalf("the losing bump: %v", err)
		}
	}
	if won < 0 {
		t.Fatalf("no bump won: %v", results)
	}
	cur, err := n1.Get(ctx, key)
	if err != nil || cur != recs[won] {
		t.Fatalf("after the race etcd holds %+v (%v), the winner %+v", cur, err, recs[won])
	}
	// The loser's old revision no longer checks; the winner's does.
	if err := n1.Check(ctx, s1.Lease, key, r1); !errors.Is(err, etcdline.ErrConflict) {
		t.Fatalf("a check of an old revision: %v", err)
	}
	winner, wl := []*etcdline.Client{n1, n2}[won], []etcdline.Lease{s1.Lease, s2.Lease}[won]
	if err := winner.Check(ctx, wl, key, cur); err != nil {
		t.Fatalf("the winner's check: %v", err)
	}
	// Never down, never level.
	for _, e := range []capture.Epoch{2, 1} {
		if _, err := winner.Bump(ctx, wl, key, cur, capture.EpochRecord{Epoch: e, Holder: "n1"}); err == nil || !strings.Contains(err.Error(), "does not rise") {
			t.Fatalf("a bump to epoch %d from 2: %v", e, err)
		}
	}
	// Another node's lease does not open this node's session.
	if _, err := n1.Bump(ctx, s2.Lease, key, cur, capture.EpochRecord{Epoch: 3, Holder: "n1"}); !errors.Is(err, etcdline.ErrConflict) || !strings.Contains(err.Error(), "session") {
		t.Fatalf("a bump under another node's lease: %v", err)
	}
	// A session kept alive stays; one revoked changes nothing any more.
	if err := n1.KeepAlive(ctx, s1, time.Now()); err != nil || !s1.Live(time.Now()) {
		t.Fatalf("keepalive: %v", err)
	}
	if err := n1.Close(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Bump(ctx, s1.Lease, key, cur, capture.EpochRecord{Epoch: 3, Holder: "n1"}); !errors.Is(err, etcdline.ErrConflict) || !strings.Contains(err.Error(), "session") {
		t.Fatalf("a bump after the session closed: %v", err)
	}
	if err := n1.KeepAlive(ctx, s1, time.Now()); !errors.Is(err, etcdline.ErrConflict) || s1.Live(time.Now()) {
		t.Fatalf("keepalive of a revoked lease: %v", err)
	}
	if got, _ := n1.Get(ctx, key); got != cur {
		t.Fatalf("a refused bump changed the line: %+v", got)
	}
	// A snapshot: every record at one revision, and whose session is live.
	snap, err := n2.Snapshot(ctx)
	if err != nil || len(snap.Records) != 1 || snap.Records[key] != cur || snap.Session != s2.Lease {
		t.Fatalf("n2's snapshot: %+v %v, want %+v under lease %d", snap, err, cur, s2.Lease)
	}
	if snap, err := n1.Snapshot(ctx); err != nil || snap.Session != 0 {
		t.Fatalf("n1's snapshot after its session closed: %+v %v", snap, err)
	}
	// The past, by revision: at r1's revision etcd held r1, at the one
	// before it nothing, and now the winner's record.
	for _, c := range []struct {
		rev  int64
		want etcdline.Record
	}{{r1.Rev, r1}, {r1.Rev - 1, etcdline.Record{}}, {cur.Rev, cur}, {0, cur}} {
		if got, err := n2.GetAt(ctx, key, c.rev); err != nil || got != c.want {
			t.Fatalf("at revision %d: %+v (%v), want %+v", c.rev, got, err, c.want)
		}
	}
	if got, err := n2.GetAt(ctx, key, cur.Rev+1000); !errors.Is(err, etcdline.ErrFutureRevision) {
		t.Fatalf("at a revision etcd has not reached: %+v (%v)", got, err)
	}
}

// etcd unreachable, or stopped: an error that says so, within the
// caller's deadline, never a hang.
func TestLineUnreachable(t *testing.T) {
	url, signal := startEtcd(t)
	c := &etcdline.Client{Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x/", Node: "n1"}
	if _, err := c.Get(context.Background(), key); !errors.Is(err, etcdline.ErrUnreachable) {
		t.Fatalf("no endpoint: %v", err)
	}
	signal(syscall.SIGSTOP)
	defer signal(syscall.SIGCONT)
	c.Endpoints = []string{url}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Get(ctx, key); !errors.Is(err, etcdline.ErrUnreachable) {
		t.Fatalf("a stopped member: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the read of a stopped member took %v", d)
	}
}

// A member that accepts connections and never answers (a paused process)
// must not use up the caller's deadline: the next member is asked within
// it, and later requests start with the member that answered.
func TestPausedMemberIsPassedOver(t *testing.T) {
	url, _ := startEtcd(t)
	release := make(chan struct{})
	var hung atomic.Int32
	paused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer paused.Close()
	defer close(release)
	c := &etcdline.Client{Endpoints: []string{paused.URL, paused.URL, url}, Prefix: "/paused/", Node: "n1",
		HTTP: &http.Client{Timeout: time.Minute}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, err := c.Get(ctx, key)
	if err != nil {
		t.Fatalf("two paused members before a live one: %v", err)
	}
	if rec.Epoch != 0 || rec.Rev != 0 {
		t.Fatalf("an empty line read %+v", rec)
	}
	if n := hung.Load(); n != 2 {
		t.Fatalf("the paused members were asked %d times, want 2", n)
	}
	for range 3 {
		if _, err := c.Get(ctx, key); err != nil {
			t.Fatalf("a read after the live member answered: %v", err)
		}
	}
	if n := hung.Load(); n != 2 {
		t.Fatalf("later reads went to the paused members again: asked %d times, want 2", n)
	}
}

// Take moves the line only from a holder whose session is gone: another
// node's Take while the holder's session lives fails with ErrHeld and
// changes nothing; the holder itself moves it on; once the holder's
// session is revoked, the other's Take succeeds.
func TestTakeWaitsForTheHoldersSession(t *testing.T) {
	url, _ := startEtcd(t)
	ctx := context.Background()
	h1 := &etcdline.Client{Endpoints: []string{url}, Prefix: "/ipfence/", Node: "h1"}
	h2 := &etcdline.Client{Endpoints: []string{url}, Prefix: "/ipfence/", Node: "h2"}
	s1, err := h1.Open(ctx, 5*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := h2.Open(ctx, 5*time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Nobody holds yet: h2 takes it.
	r1, err := h2.Take(ctx, s2.Lease, key, etcdline.Record{}, capture.EpochRecord{Epoch: 1, Holder: "h2"})
	if err != nil || r1.Holder != "h2" {
		t.Fatalf("take of a free line: %+v %v", r1, err)
	}
	// h2 lives: h1 cannot take it, and the key does not move.
	_, err = h1.Take(ctx, s1.Lease, key, r1, capture.EpochRecord{Epoch: 2, Holder: "h1"})
	if !errors.Is(err, etcdline.ErrHeld) || !strings.Contains(err.Error(), "h2 holds it under a live session") {
		t.Fatalf("take from a live holder: %v, want ErrHeld naming h2", err)
	}
	if got, err := h1.Get(ctx, key); err != nil || got != r1 {
		t.Fatalf("after the refused take: %+v %v, want %+v", got, err, r1)
	}
	// Bump (the cloud's) takes it regardless: the difference is Take's.
	if _, err := h1.Bump(ctx, s1.Lease, key, r1, capture.EpochRecord{Epoch: 2, Holder: "h1"}); err != nil {
		t.Fatalf("bump from a live holder: %v", err)
	}
	r2, err := h1.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The holder (now h1) moves the line on to h2 itself.
	r3, err := h1.Take(ctx, s1.Lease, key, r2, capture.EpochRecord{Epoch: 3, Holder: "h2"})
	if err != nil || r3.Holder != "h2" || r3.Epoch != 3 {
		t.Fatalf("the holder's own take: %+v %v", r3, err)
	}
	// h2 is the holder and its session goes: h1 takes it.
	if err := h2.Close(ctx, s2); err != nil {
		t.Fatal(err)
	}
	r4, err := h1.Take(ctx, s1.Lease, key, r3, capture.EpochRecord{Epoch: 4, Holder: "h1"})
	if err != nil || r4.Holder != "h1" || r4.Epoch != 4 {
		t.Fatalf("take once the holder's session is gone: %+v %v", r4, err)
	}
	// A take from a stale revision is a plain conflict, not ErrHeld.
	if _, err := h1.Take(ctx, s1.Lease, key, r3, capture.EpochRecord{Epoch: 5, Holder: "h1"}); !errors.Is(err, etcdline.ErrConflict) || errors.Is(err, etcdline.ErrHeld) {
		t.Fatalf("take from an old revision: %v, want ErrConflict", err)
	}
}
