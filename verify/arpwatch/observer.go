package arpwatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"
)

// ObserveOptions configure Observe.
type ObserveOptions struct {
	// Interval is the length of a round (default 100ms): each round sends
	// one request per address at its start and counts the replies that
	// arrive before the next round starts.
	Interval time.Duration
}

// Observer probes addresses in rounds until closed, and tallies the
// responders. A reply counts for the round in which it arrives: ARP
// replies carry nothing that ties them to a request, so a responder slower
// than Interval (a kernel proxy with the default proxy_delay, up to
// 0.8 s) shows in the wrong round or in none. A lost request or reply
// shows as a round with a responder missing; the report records rounds as
// seen and leaves smoothing to its reader.
type Observer struct {
	c        *conn
	addrs    []netip.Addr
	interval time.Duration
	start    time.Time

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu    sync.Mutex
	tally Tally
	err   error
}

// Observe opens a packet socket on iface (in the calling thread's network
// namespace) and starts probing addrs in the background until ctx ends or
// Close is called.
func Observe(ctx context.Context, iface string, addrs []netip.Addr, opts ObserveOptions) (*Observer, error) {
	if len(addrs) == 0 {
		return nil, errors.New("arpwatch: observe: no addresses")
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("arpwatch: observe: interval %s is negative", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = 100 * time.Millisecond
	}
	for _, a := range addrs {
		if !a.Is4() {
			return nil, fmt.Errorf("arpwatch: %s is not an IPv4 address: ARP resolves IPv4 only", a)
		}
	}
	c, err := open(iface, addrs[0])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &Observer{
		c:        c,
		addrs:    slices.Clone(addrs),
		interval: opts.Interval,
		start:    time.Now(),
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	stop := context.AfterFunc(ctx, c.wake)
	go func() {
		defer close(o.done)
		defer stop()
		err := o.run(ctx)
		if ctx.Err() != nil {
			err = nil
		}
		o.mu.Lock()
		o.err = err
		o.mu.Unlock()
	}()
	return o, nil
}

// run probes round after round until ctx ends or the socket fails.
func (o *Observer) run(ctx context.Context) error {
	// Round k starts k intervals after the start, whenever the previous
	// one ended: an observer that falls behind skips rounds rather than
	// shortening them, and the tally sees the gap.
	for k := 0; ; k++ {
		start := o.start.Add(time.Duration(k) * o.interval)
		if now := time.Now(); now.Sub(start) >= o.interval {
			k = int(now.Sub(o.start) / o.interval)
			start = o.start.Add(time.Duration(k) * o.interval)
		}
		end := start.Add(o.interval)
		if err := o.round(ctx, start, end); err != nil {
			return err
		}
	}
}

// round sends one request per address, collects replies until end, and
// records the round.
func (o *Observer) round(ctx context.Context, start, end time.Time) error {
	if err := sleepUntil(ctx, start); err != nil {
		return err
	}
	for _, a := range o.addrs {
		if err := o.c.request(a); err != nil {
			return err
		}
	}
	seen := map[netip.Addr][]net.HardwareAddr{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := o.c.read(end)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return err
		}
		if slices.Contains(o.addrs, r.ip) {
			seen[r.ip] = append(seen[r.ip], r.mac)
		}
	}
	// The round's times are offsets on the monotonic clock.
	s, e := start.Sub(o.start), end.Sub(o.start)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range o.addrs {
		if err := o.tally.Add(Round{Address: a, Start: s, End: e, Responders: seen[a]}); err != nil {
			return err
		}
	}
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Report returns the tally so far. It may be called while the observer
// runs.
func (o *Observer) Report() Report {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tally.Report()
}

// Close stops probing, closes the socket and returns the error that had
// stopped the observer early, if any; again on later calls. The report
// stays readable.
func (o *Observer) Close() error {
	o.closeOnce.Do(func() {
		o.cancel()
		<-o.done
		cerr := o.c.close()
		o.mu.Lock()
		defer o.mu.Unlock()
		o.closeErr = errors.Join(o.err, cerr)
	})
	return o.closeErr
}
