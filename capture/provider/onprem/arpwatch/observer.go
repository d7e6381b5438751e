package arpwatch

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"
)

// ObserveOptions configure Observe.
type ObserveOptions struct {
	// Interval is the length of a round (default 100ms): each round sends
	// one request per address at its start, and the next round starts
	// an Interval later.
	Interval time.Duration
	// Senders, when set, tie replies to rounds: round after round the
	// requests carry the next of these as their sender protocol address,
	// in turn, which a responder copies into its reply's target protocol
	// address. A reply then counts for the round it answers, also when it
	// arrives up to one Interval after that round's end; replies that
	// answer no round still open are dropped (Round.Unmatched). Empty,
	// requests carry the interface's own address and a reply counts for
	// the round in whose Interval it arrives, whichever it answers.
	//
	// At least three distinct IPv4 addresses, none of them observed: two
	// would make a reply two rounds late look like one to the current
	// round. They must be addresses of the interface's subnet that nobody
	// uses: a responder answers a request only from a sender it can route
	// back to on that interface (rp_filter, arp_filter), and learns the
	// sender as being at this interface's hardware address, which a host
	// that really has one of them would contest. The requests' sender
	// hardware address stays the interface's, so that the replies come to
	// it.
	Senders []netip.Addr
}

// check validates the options and fills in the defaults.
func (o ObserveOptions) check(addrs []netip.Addr) (ObserveOptions, error) {
	if o.Interval < 0 {
		return o, fmt.Errorf("arpwatch: observe: interval %s is negative", o.Interval)
	}
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if n := len(o.Senders); n > 0 && n < minSenders {
		return o, fmt.Errorf("arpwatch: observe: %d senders %v: want none, or at least %d to tell a late reply from a current one", n, o.Senders, minSenders)
	}
	for i, s := range o.Senders {
		switch {
		case !s.Is4():
			return o, fmt.Errorf("arpwatch: observe: sender %s is not an IPv4 address", s)
		case s.IsUnspecified() || s.IsMulticast() || s == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return o, fmt.Errorf("arpwatch: observe: sender %s cannot be a host's address", s)
		case slices.Contains(o.Senders[:i], s):
			return o, fmt.Errorf("arpwatch: observe: sender %s listed twice: every round needs a sender of its own", s)
		case slices.Contains(addrs, s):
			// A request from the address it asks for is a gratuitous
			// ARP: it would announce the observer as the holder.
			return o, fmt.Errorf("arpwatch: observe: sender %s is an observed address", s)
		}
	}
	o.Senders = slices.Clone(o.Senders)
	return o, nil
}

// minSenders is the fewest senders that tie replies to rounds: the two open
// rounds have two of them, and a reply to an older round must name
// neither.
const minSenders = 3

// Observer probes addresses in rounds until closed, and tallies the
// responders.
//
// Without ObserveOptions.Senders a reply counts for the round in which it
// arrives: ARP replies carry nothing else that ties them to a request, so
// a responder slower than Interval (a loaded machine, or a kernel proxy
// with the default proxy_delay, up to 0.8 s) shows in the wrong round or in
// none, and a hand-over can show a round with the old and the new holder
// both that no moment had. With Senders each request names its round and
// each reply the request it answers: a reply up to one Interval late is
// credited to its own round, which therefore reaches the Tally (and
// Report) one Interval after its end, and older ones are dropped. Rounds
// still open when the observer stops are left out of the report, as an
// unfinished round always was: their late replies would be missing.
//
// A lost request or reply shows as a round with a responder missing; the
// report records rounds as seen and leaves smoothing to its reader.
type Observer struct {
	c        *conn
	addrs    []netip.Addr
	interval time.Duration
	start    time.Time
	// ledger is used by the probing goroutine only.
	ledger *ledger

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
	for _, a := range addrs {
		if !a.Is4() {
			return nil, fmt.Errorf("arpwatch: %s is not an IPv4 address: ARP resolves IPv4 only", a)
		}
	}
	opts, err := opts.check(addrs)
	if err != nil {
		return nil, err
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
		ledger:   newLedger(addrs, opts.Senders),
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
// records the rounds that can take no more replies.
func (o *Observer) round(ctx context.Context, start, end time.Time) error {
	if err := sleepUntil(ctx, start); err != nil {
		return err
	}
	// The round's times are offsets on the monotonic clock.
	sender := o.ledger.begin(start.Sub(o.start), end.Sub(o.start))
	if !sender.IsValid() {
		sender = o.c.ip
	}
	for _, a := range o.addrs {
		if err := o.c.request(a, sender); err != nil {
			return err
		}
	}
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
		o.ledger.credit(r.ip, r.target, r.mac)
	}
	// Closing ends the read early, as a deadline: the window was cut
	// short, and so would be the held round's.
	if err := ctx.Err(); err != nil {
		return err
	}
	rounds := o.ledger.endWindow()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range rounds {
		if err := o.tally.Add(r); err != nil {
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
