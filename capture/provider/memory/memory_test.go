package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

var (
	nics = []string{"eni-a", "eni-b", "eni-c"}
	ip1  = netip.MustParseAddr("10.0.0.1")
	ip2  = netip.MustParseAddr("10.0.0.2")
	t0   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

func newClock() *handclock.Clock { return handclock.New(t0) }

// holders returns every NIC that visibly holds a: more than one is the bug
// the provider exists to rule out, and Describe, reporting one NIC, could
// not show it.
func holders(p *Provider, a netip.Addr) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(p.clock())
	var hs []string
	for _, name := range p.names {
		if p.nics[name].addrs[a] {
			hs = append(hs, name)
		}
	}
	return hs
}

func req(nic string, a netip.Addr, epoch capture.Epoch) provider.Request {
	return provider.Request{NIC: nic, Address: a, Epoch: epoch, IdempotencyKey: fmt.Sprintf("k:%s:%s:%d", nic, a, epoch)}
}

func mustAssign(t *testing.T, p provider.Provider, r provider.Request, reassign bool) {
	t.Helper()
	if err := p.Assign(t.Context(), r, reassign); err != nil {
		t.Fatalf("Assign(%s, %s, %t) = %v", r.NIC, r.Address, reassign, err)
	}
}

// summary renders mutations without their requests' keys, for compact
// expectations: call nic address [from] @time-offset.
func summary(ms []provider.Mutation) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		s := fmt.Sprintf("%s %s %s", m.Call, m.NIC, m.Address)
		if m.From != "" {
			s += " from " + m.From
		}
		out[i] = s + " @" + m.Time.Sub(t0).String()
	}
	return out
}

func expectSummary(t *testing.T, p *Provider, want ...string) {
	t.Helper()
	if got := summary(p.Mutations()); !slices.Equal(got, want) {
		t.Fatalf("mutations:\n got %q\nwant %q", got, want)
	}
}

func TestDelayHidesMutationUntilApplyTime(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now, Delay: 5 * time.Second})
	r := req("eni-a", ip1, 3)
	mustAssign(t, p, r, false)
	c.Advance(4999 * time.Millisecond)
	if h := p.Holder(ip1); h != "" {
		t.Fatalf("holder before the apply time = %q, want none", h)
	}
	if obs, _ := p.Describe(t.Context(), ip1); obs.NIC != "" {
		t.Fatalf("Describe before the apply time = %+v, want no NIC", obs)
	}
	if ms := p.Mutations(); len(ms) != 0 {
		t.Fatalf("mutations before the apply time = %+v, want none", ms)
	}
	// The check of a later call sees the visible state too: eni-b may
	// still take the address without reassignment.
	if err := p.Assign(t.Context(), req("eni-b", ip1, 4), false); err != nil {
		t.Fatalf("Assign to eni-b while the assign to eni-a is pending = %v, want nil", err)
	}

	c.Advance(time.Millisecond)
	if h := p.Holder(ip1); h != "eni-a" {
		t.Fatalf("holder at the apply time = %q, want eni-a", h)
	}
	want := []provider.Mutation{{Time: t0.Add(5 * time.Second), Call: capture.Assign, NIC: "eni-a", Address: ip1, Epoch: 3, IdempotencyKey: r.IdempotencyKey}}
	if got := p.Mutations(); !slices.Equal(got, want) {
		t.Fatalf("mutations = %+v, want %+v", got, want)
	}
	// eni-b's assign was acknowledged, but by its apply time the address
	// was on eni-a and it did not allow reassignment: its effect is lost.
	c.Advance(time.Hour)
	if hs := holders(p, ip1); !slices.Equal(hs, []string{"eni-a"}) {
		t.Fatalf("holders = %v, want [eni-a]", hs)
	}
	expectSummary(t, p, "assign-secondary-ip eni-a 10.0.0.1 @5s")
}

func TestDelayQueuedMovesApplyInOrder(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now, Delay: 3 * time.Second})
	mustAssign(t, p, req("eni-a", ip1, 1), false) // visible at 3s
	c.Advance(time.Second)
	mustAssign(t, p, req("eni-b", ip1, 2), true) // at 4s
	c.Advance(time.Second)
	mustAssign(t, p, req("eni-c", ip1, 3), true) // at 5s

	var seen []string
	for range 8 {
		hs := holders(p, ip1)
		if len(hs) > 1 {
			t.Fatalf("at %v %s is on %v", c.Now().Sub(t0), ip1, hs)
		}
		seen = append(seen, strings.Join(hs, ""))
		c.Advance(time.Second)
	}
	// Sampled at 2s … 9s.
	want := []string{"", "eni-a", "eni-b", "eni-c", "eni-c", "eni-c", "eni-c", "eni-c"}
	if !slices.Equal(seen, want) {
		t.Fatalf("holders over time = %q, want %q", seen, want)
	}
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @3s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @4s",
		"assign-secondary-ip eni-c 10.0.0.1 from eni-b @5s",
	)
}

func TestDelayStampsApplyTime(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now, Delay: 5 * time.Second})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	c.Advance(time.Second)
	mustAssign(t, p, req("eni-b", ip1, 2), true)
	// Nobody looks until long after both apply times: the record still
	// says when each became visible, not when the provider noticed.
	c.Advance(time.Hour)
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @5s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @6s",
	)
}

func TestDelayLateUnassignDoesNotStripNewHolder(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	p.SetDelay(time.Second)
	// The seize is queued before eni-a's release: by the time the
	// release applies, eni-a no longer holds the address.
	mustAssign(t, p, req("eni-b", ip1, 2), true)
	if err := p.Unassign(t.Context(), req("eni-a", ip1, 2)); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if h := p.Holder(ip1); h != "eni-b" {
		t.Fatalf("holder = %q, want eni-b", h)
	}
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @0s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @1s",
	)

	// The other way round the release applies first and the assign
	// finds the address free.
	if err := p.Unassign(t.Context(), req("eni-b", ip1, 3)); err != nil {
		t.Fatal(err)
	}
	mustAssign(t, p, req("eni-c", ip1, 3), true)
	c.Advance(time.Second)
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @0s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @1s",
		"unassign-secondary-ip eni-b 10.0.0.1 @2s",
		"assign-secondary-ip eni-c 10.0.0.1 @2s",
	)
}

func TestSetDelayNeverReorders(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now, Delay: 10 * time.Second})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	p.SetDelay(0)
	// Without FIFO order this would apply now, before the assign to
	// eni-a, and the address would end on eni-a.
	mustAssign(t, p, req("eni-b", ip1, 2), true)
	if h := p.Holder(ip1); h != "" {
		t.Fatalf("holder = %q, want none while the first assign is queued", h)
	}
	c.Advance(10 * time.Second)
	if h := p.Holder(ip1); h != "eni-b" {
		t.Fatalf("holder = %q, want eni-b", h)
	}
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @10s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @10s",
	)
	// The queue is empty again: with no delay, effects are immediate.
	if err := p.SetForwarding(t.Context(), req("eni-b", ip1, 3), true); err != nil {
		t.Fatal(err)
	}
	if !p.Forwarding("eni-b") {
		t.Fatal("Forwarding(eni-b) = false right after enabling it with no delay")
	}
}

func TestFlush(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now, Delay: time.Minute})
	mustAssign(t, p, req("eni-a", ip1, 1), false) // due at 1m
	c.Advance(time.Minute)
	mustAssign(t, p, req("eni-b", ip1, 2), true) // due at 2m
	if err := p.SetForwarding(t.Context(), req("eni-b", ip1, 2), true); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Second)
	p.Flush()
	if h := p.Holder(ip1); h != "eni-b" {
		t.Fatalf("holder after Flush = %q, want eni-b", h)
	}
	if !p.Forwarding("eni-b") {
		t.Fatal("Forwarding(eni-b) = false after Flush")
	}
	// The due assign keeps its apply time; the others apply at Flush.
	expectSummary(t, p,
		"assign-secondary-ip eni-a 10.0.0.1 @1m0s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @1m10s",
		"ensure-forwarding-enabled eni-b 10.0.0.1 @1m10s",
	)
}

func TestFail(t *testing.T) {
	type call struct {
		kind capture.Kind
		req  provider.Request
	}
	var calls []call
	p := New(Options{NICs: nics, Clock: newClock().Now, Fail: func(k capture.Kind, r provider.Request) error {
		calls = append(calls, call{k, r})
		if r.NIC == "eni-b" {
			return fmt.Errorf("injected: %w", provider.ErrThrottled)
		}
		return nil
	}})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	rb := req("eni-b", ip1, 2)
	if err := p.Assign(t.Context(), rb, true); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("Assign to eni-b = %v, want ErrThrottled", err)
	}
	if err := p.SetForwarding(t.Context(), rb, true); !errors.Is(err, provider.ErrThrottled) {
		t.Fatalf("SetForwarding on eni-b = %v, want ErrThrottled", err)
	}
	if h, fwd := p.Holder(ip1), p.Forwarding("eni-b"); h != "eni-a" || fwd {
		t.Fatalf("after failed calls: holder %q, eni-b forwarding %t; want eni-a, false", h, fwd)
	}
	expectSummary(t, p, "assign-secondary-ip eni-a 10.0.0.1 @0s")
	// Fail sees each call's kind and request, Describe included.
	if _, err := p.Describe(t.Context(), ip2); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{capture.Assign, req("eni-a", ip1, 1)},
		{capture.Assign, rb},
		{capture.EnableForwarding, rb},
		{DescribeCall, provider.Request{Address: ip2}},
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("Fail saw %+v, want %+v", calls, want)
	}

	// Faults change at run time; a Describe fault leaves state alone.
	p.SetFail(func(k capture.Kind, _ provider.Request) error {
		if k == DescribeCall {
			return provider.ErrUnavailable
		}
		return nil
	})
	if _, err := p.Describe(t.Context(), ip1); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Describe = %v, want ErrUnavailable", err)
	}
	mustAssign(t, p, rb, true)
	p.SetFail(nil)
	if obs, err := p.Describe(t.Context(), ip1); err != nil || obs.NIC != "eni-b" {
		t.Fatalf("Describe = %+v, %v; want eni-b, nil", obs, err)
	}
}

func TestFailMayCallProvider(t *testing.T) {
	// The injector runs outside the lock, so it may look at the provider:
	// here, refuse to take an address from a NIC that holds it.
	var p *Provider
	p = New(Options{NICs: nics, Fail: func(k capture.Kind, r provider.Request) error {
		if k == capture.Assign && p.Holder(r.Address) != "" {
			return provider.ErrUnavailable
		}
		return nil
	}})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	if err := p.Assign(t.Context(), req("eni-b", ip1, 2), true); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Assign = %v, want ErrUnavailable", err)
	}
}

func TestErrorMessages(t *testing.T) {
	p := New(Options{NICs: nics})
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	err := p.Assign(t.Context(), req("eni-b", ip1, 2), false)
	if !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("Assign = %v, want ErrAssignedElsewhere", err)
	}
	for _, s := range []string{"10.0.0.1", "eni-a", "eni-b"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	err = p.Unassign(t.Context(), req("eni-zz", ip1, 2))
	if !errors.Is(err, provider.ErrUnknownNIC) || !strings.Contains(err.Error(), `"eni-zz"`) {
		t.Errorf("Unassign on eni-zz = %v, want ErrUnknownNIC naming it", err)
	}
	if p.Forwarding("eni-zz") {
		t.Error("Forwarding of an unknown NIC = true")
	}
	if err := p.Assign(t.Context(), req("eni-a", netip.Addr{}, 1), false); err == nil || !strings.Contains(err.Error(), "invalid address") {
		t.Errorf("Assign of the zero address = %v, want an invalid address error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Unassign(ctx, req("eni-a", ip1, 3)); !errors.Is(err, context.Canceled) {
		t.Errorf("Unassign with a cancelled context = %v, want context.Canceled", err)
	}
	if h := p.Holder(ip1); h != "eni-a" {
		t.Errorf("holder = %q, want eni-a: refused calls changed state", h)
	}
}

func TestNewRejectsEmptyNIC(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("New with an empty NIC name did not panic")
		}
	}()
	New(Options{NICs: []string{"eni-a", ""}})
}

// TestConcurrentSeize races seizes of one address by many goroutines,
// with and without delay, while observers inspect every NIC: never two
// holders, never none once captured, and the end state is the record's
// last move.
func TestConcurrentSeize(t *testing.T) {
	for _, delay := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run(fmt.Sprint("delay=", delay), func(t *testing.T) {
			p := New(Options{NICs: nics, Delay: delay})
			mustAssign(t, p, req("eni-a", ip1, 0), false)
			p.Flush()
			var movers, observers sync.WaitGroup
			var epoch atomic.Uint64
			stop := make(chan struct{})
			var bad atomic.Value
			for g := range 16 {
				movers.Go(func() {
					nic := nics[g%len(nics)]
					for range 100 {
						if err := p.Assign(context.Background(), req(nic, ip1, capture.Epoch(epoch.Add(1))), true); err != nil {
							bad.CompareAndSwap(nil, err.Error())
						}
					}
				})
			}
			var looks atomic.Int64
			for range 4 {
				observers.Go(func() {
					for {
						if hs := holders(p, ip1); len(hs) != 1 {
							bad.CompareAndSwap(nil, fmt.Sprintf("observed holders %v", hs))
						}
						if obs, err := p.Describe(context.Background(), ip1); err != nil || obs.NIC == "" {
							bad.CompareAndSwap(nil, fmt.Sprintf("Describe = %+v, %v", obs, err))
						}
						looks.Add(1)
						select {
						case <-stop:
							return
						default:
						}
					}
				})
			}
			movers.Wait()
			p.Flush()
			close(stop)
			observers.Wait()
			if b := bad.Load(); b != nil {
				t.Fatal(b)
			}
			ms := p.Mutations()
			if len(ms) < 2 {
				t.Fatalf("%d mutations, want the first assign and at least one move", len(ms))
			}
			holder := ""
			for i, m := range ms {
				if m.From != holder || m.NIC == holder {
					t.Fatalf("mutation %d %+v does not follow holder %q", i, m, holder)
				}
				holder = m.NIC
			}
			if hs := holders(p, ip1); !slices.Equal(hs, []string{holder}) {
				t.Fatalf("final holders %v, want [%s] from the last mutation", hs, holder)
			}
			if looks.Load() < 4 {
				t.Fatalf("%d observations, want at least 4", looks.Load())
			}
		})
	}
}

func newServer(t *testing.T, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Client{BaseURL: srv.URL, HTTP: srv.Client()}
}

func TestClientMapsProviderErrors(t *testing.T) {
	p := New(Options{NICs: nics})
	c := newServer(t, Handler(p))
	mustAssign(t, c, req("eni-a", ip1, 1), false)

	err := c.Assign(t.Context(), req("eni-b", ip1, 2), false)
	if !errors.Is(err, provider.ErrAssignedElsewhere) {
		t.Fatalf("Assign = %v, want ErrAssignedElsewhere", err)
	}
	// The server's message comes through: address and both NICs.
	for _, s := range []string{"10.0.0.1", "eni-a", "eni-b", "409"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if err := c.Unassign(t.Context(), req("eni-zz", ip1, 2)); !errors.Is(err, provider.ErrUnknownNIC) || !strings.Contains(err.Error(), "eni-zz") {
		t.Errorf("Unassign on eni-zz = %v, want ErrUnknownNIC naming it", err)
	}

	for _, tc := range []struct {
		inject error
		want   error
	}{
		{provider.ErrThrottled, provider.ErrThrottled},
		{provider.ErrUnavailable, provider.ErrUnavailable},
		// A failure the wire has no code for is the provider failing
		// internally: the call may or may not have happened.
		{errors.New("disk on fire"), provider.ErrUnavailable},
	} {
		p.SetFail(func(capture.Kind, provider.Request) error { return tc.inject })
		if err := c.Assign(t.Context(), req("eni-b", ip1, 3), true); !errors.Is(err, tc.want) {
			t.Errorf("Assign with %v injected = %v, want %v", tc.inject, err, tc.want)
		}
		if _, err := c.Describe(t.Context(), ip1); !errors.Is(err, tc.want) {
			t.Errorf("Describe with %v injected = %v, want %v", tc.inject, err, tc.want)
		}
	}
	p.SetFail(nil)
	if h := p.Holder(ip1); h != "eni-a" {
		t.Fatalf("holder = %q, want eni-a after failed calls", h)
	}
}

func TestClientServerError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"plain 500", http.StatusInternalServerError, "boom", provider.ErrUnavailable},
		{"html 502", http.StatusBadGateway, "<html>bad gateway</html>", provider.ErrUnavailable},
		{"json 500 unknown code", http.StatusInternalServerError, `{"error":"weird","message":"x"}`, provider.ErrUnavailable},
		{"429 with code", http.StatusTooManyRequests, `{"error":"throttled","message":"slow down"}`, provider.ErrThrottled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			err := c.Unassign(t.Context(), req("eni-a", ip1, 1))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Unassign = %v, want %v", err, tc.want)
			}
			if _, err := c.Mutations(t.Context()); !errors.Is(err, tc.want) {
				t.Fatalf("Mutations = %v, want %v", err, tc.want)
			}
		})
	}
	// A 404 from something that is not our handler is no ErrUnknownNIC:
	// the status alone does not make a provider error.
	c := newServer(t, http.NotFoundHandler())
	err := c.Assign(t.Context(), req("eni-a", ip1, 1), false)
	if err == nil || errors.Is(err, provider.ErrUnknownNIC) || errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Assign against a 404 server = %v, want a plain error", err)
	}
}

func TestClientServerDown(t *testing.T) {
	srv := httptest.NewServer(Handler(New(Options{NICs: nics})))
	c := &Client{BaseURL: srv.URL}
	srv.Close()
	if err := c.Assign(t.Context(), req("eni-a", ip1, 1), true); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Assign to a closed server = %v, want ErrUnavailable", err)
	}
	if _, err := c.Describe(t.Context(), ip1); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Describe on a closed server = %v, want ErrUnavailable", err)
	}
	if _, err := c.Mutations(t.Context()); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Mutations on a closed server = %v, want ErrUnavailable", err)
	}
}

func TestClientMutationsRoundTrip(t *testing.T) {
	c0 := newClock()
	p := New(Options{NICs: nics, Clock: c0.Now})
	c := newServer(t, Handler(p))
	mustAssign(t, c, req("eni-a", ip1, 1), false)
	c0.Advance(1500 * time.Microsecond)
	mustAssign(t, c, req("eni-b", ip1, 2), true)
	if err := c.SetForwarding(t.Context(), req("eni-b", netip.Addr{}, 2), true); err != nil {
		t.Fatal(err)
	}
	got, err := c.Mutations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := p.Mutations()
	if len(want) != 3 || len(got) != len(want) {
		t.Fatalf("got %d mutations over HTTP, %d locally; want 3 each", len(got), len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) {
			t.Errorf("mutation %d time %v, want %v", i, got[i].Time, want[i].Time)
		}
		got[i].Time = want[i].Time
	}
	if !slices.Equal(got, want) {
		t.Fatalf("over HTTP:\n got %+v\nwant %+v", got, want)
	}
	if got[1].From != "eni-a" || !got[2].Enabled || got[2].Address.IsValid() {
		t.Fatalf("From/Enabled/Address lost on the wire: %+v", got)
	}
}

func TestHandlerRejectsMalformed(t *testing.T) {
	h := Handler(New(Options{NICs: nics}))
	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string // the error message must name it
	}{
		{"POST", "/assign", `{"address":"10.0.0.1"}`, 400, `"nic"`},
		{"POST", "/assign", `{"nic":"eni-a"}`, 400, `"address"`},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.300"}`, 400, `"address"`},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.1","epoch":"3"}`, 400, `"epoch"`},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.1","epoch":-1}`, 400, `"epoch"`},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.1","reassign":"yes"}`, 400, `"reassign"`},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.1","allowReassignment":true}`, 400, `"allowReassignment"`},
		{"POST", "/unassign", `{"nic":"eni-a","address":"10.0.0.1","reassign":true}`, 400, `"reassign"`},
		{"POST", "/forwarding", `{"nic":"eni-a"}`, 400, `"enabled"`},
		{"POST", "/forwarding", `{"nic":7,"enabled":true}`, 400, `"nic"`},
		{"POST", "/assign", `{"nic":"eni-a",`, 400, "body"},
		{"POST", "/assign", ``, 400, "body"},
		{"POST", "/assign", `{"nic":"eni-a","address":"10.0.0.1"} {}`, 400, "body"},
		{"GET", "/describe", ``, 400, `"address"`},
		{"GET", "/describe?address=nope", ``, 400, `"address"`},
		{"GET", "/assign", ``, 405, ""},
		{"POST", "/describe", ``, 405, ""},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s %s %s: status %d, want %d (%s)", tc.method, tc.path, tc.body, w.Code, tc.status, w.Body)
			continue
		}
		if tc.field == "" {
			continue
		}
		msg := w.Body.String()
		if !strings.Contains(msg, `"error":"bad-request"`) || !strings.Contains(msg, strings.ReplaceAll(tc.field, `"`, `\"`)) {
			t.Errorf("%s %s %s: body %s, want bad-request naming %s", tc.method, tc.path, tc.body, msg, tc.field)
		}
	}
}

func TestHandlerMutationsNeedRecorder(t *testing.T) {
	// A Client is a Provider but keeps no record.
	c := newServer(t, Handler(&Client{BaseURL: "http://127.0.0.1:1"}))
	_, err := c.Mutations(t.Context())
	if err == nil || errors.Is(err, provider.ErrUnavailable) || !strings.Contains(err.Error(), "no record") {
		t.Fatalf("Mutations = %v, want a plain error saying there is no record", err)
	}
}

// FuzzHandler feeds arbitrary bodies to the mutation endpoints: the
// handler must answer a client error or a provider answer, never an
// internal error, and never leave an address on two NICs.
func FuzzHandler(f *testing.F) {
	f.Add("/assign", `{"nic":"eni-a","address":"10.0.0.1","reassign":true}`)
	f.Add("/unassign", `{"nic":"eni-b","address":"10.0.0.1","epoch":4,"idempotencyKey":"k"}`)
	f.Add("/forwarding", `{"nic":"eni-c","enabled":false}`)
	f.Add("/assign", `{"nic":"eni-a","address":"::ffff:10.0.0.1%eth0"}`)
	f.Add("/assign", `{"nic":"","address":""}`)
	f.Add("/forwarding", `[1,2]`)
	f.Fuzz(func(t *testing.T, path, body string) {
		p := New(Options{NICs: nics})
		if err := p.Assign(context.Background(), req("eni-a", ip1, 1), false); err != nil {
			t.Fatal(err)
		}
		h := Handler(p)
		for _, ep := range []string{"/assign", "/unassign", "/forwarding"} {
			if !strings.HasPrefix(path, ep) {
				continue
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", ep, strings.NewReader(body)))
			switch w.Code {
			case http.StatusNoContent, http.StatusBadRequest, http.StatusConflict, http.StatusNotFound:
			default:
				t.Fatalf("POST %s %q: status %d: %s", ep, body, w.Code, w.Body)
			}
		}
		if hs := holders(p, ip1); len(hs) > 1 {
			t.Fatalf("%s on %v", ip1, hs)
		}
	})
}

func BenchmarkReassign(b *testing.B) {
	p := New(Options{NICs: nics})
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := p.Assign(ctx, req(nics[i%len(nics)], ip1, capture.Epoch(i)), true); err != nil {
			b.Fatal(err)
		}
	}
}
