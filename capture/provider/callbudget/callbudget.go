// Package callbudget paces a driver's calls to a cloud API so that it
// stays below the provider's own throttle, and stops calling for a while
// when the provider says it is throttling anyway.
//
// A Bucket is the arithmetic alone: a token bucket whose time is passed
// in, with no goroutine and no clock. A Budget holds one bucket for reads
// and one for writes (ARM, EC2 and OCI all limit the two apart), takes
// its time from a Clock, and counts what it did for the metrics.
//
// A throttled answer (429, RequestLimitExceeded) pauses the bucket of its
// class, not only the call that met it: every call of the account waits
// until Retry-After (or, without one, an exponential backoff that grows
// while the throttling goes on), plus a jitter of up to a quarter more so
// that nodes throttled together do not come back together; after the
// pause the calls resume at the bucket's refill rate, not all at once.
// The budget never retries a call itself: the drivers' own read retries
// pass through it again, one token per attempt, and a write a driver
// never retries stays unretried.
package callbudget

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limit is a token bucket: Burst calls at once, refilled at Rate a second.
type Limit struct {
	Burst int
	Rate  float64
}

// Bucket is a token bucket over time passed in by the caller.
type Bucket struct {
	limit Limit
	// tokens is the content at last; it goes below zero as calls reserve
	// tokens not refilled yet, which is what spaces them out.
	tokens float64
	// last is when tokens was true; it runs ahead of the clock while the
	// bucket is paused (nothing refills before the pause ends).
	last time.Time
}

// NewBucket returns a full bucket at now.
func NewBucket(l Limit, now time.Time) *Bucket {
	return &Bucket{limit: l, tokens: float64(l.Burst), last: now}
}

// refill adds the tokens earned since last. A clock that went back earns
// nothing, and last stays where it was, so that going forward again does
// not earn the same time twice.
func (b *Bucket) refill(now time.Time) {
	if !now.After(b.last) {
		return
	}
	b.tokens = min(float64(b.limit.Burst), b.tokens+b.limit.Rate*now.Sub(b.last).Seconds())
	b.last = now
}

// Take reserves a token at now and says how long the call must wait
// before it goes: 0 when a token is there.
func (b *Bucket) Take(now time.Time) time.Duration {
	b.refill(now)
	b.tokens--
	return b.ready(now)
}

// ready is how long from now until the bucket's content is no longer
// negative and any pause has ended.
func (b *Bucket) ready(now time.Time) time.Duration {
	var d time.Duration
	if b.last.After(now) {
		d = b.last.Sub(now)
	}
	if b.tokens < 0 {
		d += time.Duration(-b.tokens / b.limit.Rate * float64(time.Second))
	}
	return d
}

// Give returns a token reserved by a call that was not sent.
func (b *Bucket) Give(now time.Time) {
	b.refill(now)
	b.tokens = min(float64(b.limit.Burst), b.tokens+1)
}

// Pause stops the bucket until now+d: nothing refills before then, and
// what it held is gone (the provider says the account has nothing left).
// A pause that ends sooner than one already in force changes nothing.
func (b *Bucket) Pause(now time.Time, d time.Duration) {
	b.refill(now)
	until := now.Add(d)
	if until.After(b.last) {
		b.last = until
	}
	b.tokens = min(b.tokens, 0)
}

// PausedUntil is when the current pause ends; not after now when there
// is none.
func (b *Bucket) PausedUntil() time.Time { return b.last }

// Class says which bucket a call takes its token from.
type Class int

// The classes.
const (
	Read Class = iota
	Write
)

func (c Class) String() string {
	if c == Write {
		return "write"
	}
	return "read"
}

// Limits are a budget's two buckets.
type Limits struct {
	Read, Write Limit
}

// Check says what is wrong with the limits, or nil.
func (l Limits) Check() error {
	for _, x := range []struct {
		c Class
		l Limit
	}{{Read, l.Read}, {Write, l.Write}} {
		if x.l.Burst < 1 || !(x.l.Rate > 0) {
			return fmt.Errorf("callbudget: %s bucket of %d at %v a second: both must be positive", x.c, x.l.Burst, x.l.Rate)
		}
	}
	return nil
}

// Defaults, below each provider's documented throttle: a node's budget is
// its own, while the provider's limit is the account's (AWS: per account
// and region; ARM: per subscription and principal), so a cluster of many
// nodes sharing one account lowers these.
var (
	// EC2 documents token buckets per API action: non-mutating (Describe*)
	// actions 100 at a refill of 20 a second, mutating actions 200 at 5
	// a second ("Request throttling for the Amazon EC2 API"). These are
	// 80 % of both.
	EC2 = Limits{Read: Limit{Burst: 80, Rate: 16}, Write: Limit{Burst: 160, Rate: 4}}
	// ARM documents per subscription and principal a write bucket of 200
	// refilled at 10 a second and a read bucket of 250 at 25 a second.
	// These are 80 % of both.
	ARM = Limits{Read: Limit{Burst: 200, Rate: 20}, Write: Limit{Burst: 160, Rate: 8}}
	// OCI publishes no per-operation limits for the Networking API (it
	// answers 429 when a tenancy calls too fast); these are conservative
	// guesses, to be lowered if 429s show in ipfence_api_throttled_total.
	OCI = Limits{Read: Limit{Burst: 50, Rate: 10}, Write: Limit{Burst: 25, Rate: 5}}
)

// Clock is where a budget takes its time and waits; the real one is
// System, tests use one they advance by hand.
type Clock interface {
	Now() time.Time
	// Sleep returns after d, or with the context's error when it ends
	// first.
	Sleep(ctx context.Context, d time.Duration) error
}

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// System is the wall clock.
var System Clock = system{}

// Options configure a budget.
type Options struct {
	Limits Limits
	// Clock is System when nil.
	Clock Clock
	// Jitter draws a duration from 0 to max inclusive; random when nil.
	Jitter func(max time.Duration) time.Duration
	// Backoff is the first pause after a throttled answer without a
	// Retry-After, doubled for each further one while the throttling
	// goes on, up to MaxBackoff; 0 means 500 ms and 20 s.
	Backoff, MaxBackoff time.Duration
}

// Stats count what a budget did for one class of calls.
type Stats struct {
	// Waited is how many calls waited for a token or a pause, and Wait
	// the total of those waits.
	Waited uint64
	Wait   time.Duration
	// Throttled is how many answers said the provider throttled.
	Throttled uint64
	// Retries is how many calls were retries of a call already sent
	// once (the drivers' read retries, seen by Call's counter).
	Retries uint64
}

// Budget paces one driver's calls; safe for concurrent use.
type Budget struct {
	o Options

	mu      sync.Mutex
	buckets [2]*Bucket
	streak  [2]int
	stats   [2]Stats
}

// New builds a budget with full buckets; it panics on limits Check
// refuses (configuration checks them first).
func New(o Options) *Budget {
	if err := o.Limits.Check(); err != nil {
		panic(err)
	}
	if o.Clock == nil {
		o.Clock = System
	}
	if o.Jitter == nil {
		o.Jitter = func(max time.Duration) time.Duration { return rand.N(max + 1) }
	}
	if o.Backoff == 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 20 * time.Second
	}
	now := o.Clock.Now()
	return &Budget{o: o, buckets: [2]*Bucket{NewBucket(o.Limits.Read, now), NewBucket(o.Limits.Write, now)}}
}

// Limits are the budget's buckets.
func (b *Budget) Limits() Limits { return b.o.Limits }

type attemptsKey struct{}

// Call marks ctx as one call, whose attempts Wait counts: every Wait
// after the first under the same mark is a retry.
func Call(ctx context.Context) context.Context {
	return context.WithValue(ctx, attemptsKey{}, new(atomic.Int32))
}

// Wait takes a token of the class, waiting for one (or for a pause to
// end) as long as it must. When the context ends first, the call must not
// be sent: Wait gives the token back and fails with the context's error.
func (b *Budget) Wait(ctx context.Context, c Class) error {
	retry := false
	if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
		retry = n.Add(1) > 1
	}
	b.mu.Lock()
	if retry {
		b.stats[c].Retries++
	}
	d := b.buckets[c].Take(b.o.Clock.Now())
	if d > 0 {
		b.stats[c].Waited++
	}
	b.mu.Unlock()
	for d > 0 {
		b.mu.Lock()
		b.stats[c].Wait += d
		b.mu.Unlock()
		if err := b.o.Clock.Sleep(ctx, d); err != nil {
			b.mu.Lock()
			b.buckets[c].Give(b.o.Clock.Now())
			b.mu.Unlock()
			return fmt.Errorf("not sent: waiting for the %s budget: %w", c, err)
		}
		// A pause that began while this call waited holds it too.
		b.mu.Lock()
		now := b.o.Clock.Now()
		d = 0
		if until := b.buckets[c].PausedUntil(); until.After(now) {
			d = until.Sub(now)
		}
		b.mu.Unlock()
	}
	return nil
}

// Throttled records that the provider throttled a call of the class and
// pauses the class's calls: for retryAfter when the answer said (0 when it
// did not), else for the backoff; plus a jitter of up to a quarter of
// that. A throttled answer to a call sent before the pause began does not
// lengthen the backoff: it is the same episode.
func (b *Budget) Throttled(c Class, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats[c].Throttled++
	now := b.o.Clock.Now()
	bk := b.buckets[c]
	if !bk.PausedUntil().After(now) {
		b.streak[c]++
	}
	d := retryAfter
	if d <= 0 {
		d = b.o.Backoff << min(b.streak[c]-1, 30)
		if d <= 0 || d > b.o.MaxBackoff {
			d = b.o.MaxBackoff
		}
	}
	bk.Pause(now, d+b.o.Jitter(d/4))
}

// Answered records that the provider answered a call of the class without
// throttling it: the backoff starts afresh at the next throttling.
func (b *Budget) Answered(c Class) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streak[c] = 0
}

// Stats reports what the budget did for the class.
func (b *Budget) Stats(c Class) Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats[c]
}

// RetryAfter reads a throttled answer's pause: Retry-After in seconds or
// as an HTTP date, or ARM's x-ms-retry-after-ms; 0 when none is there.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseInt(h.Get("x-ms-retry-after-ms"), 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), time.Hour)
	}
	return 0
}
