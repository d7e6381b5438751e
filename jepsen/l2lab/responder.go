//go:build linux

package l2lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// spareFirst and spareLast bound the LAN addresses no node has: above the
// mobile address, below the root namespace's (.254).
const (
	spareFirst = mobileHost + 1
	spareLast  = 253
)

// SpareAddresses returns n addresses of the LAN /24 that no host, observer,
// workload or the root namespace has, nor anything the lab builds: for an
// ARP observer to send its requests from (arpwatch.ObserveOptions.Senders).
// They are on-link for every host, so the hosts' kernels answer requests
// from them whatever rp_filter and arp_filter say. n is 1 to 53.
func (l *Lab) SpareAddresses(n int) ([]netip.Addr, error) {
	if n < 1 || n > spareLast-spareFirst+1 {
		return nil, fmt.Errorf("l2lab: %d spare addresses: the LAN has 1 to %d", n, spareLast-spareFirst+1)
	}
	out := make([]netip.Addr, n)
	a := l.address.As4()
	for i := range out {
		a[3] = byte(spareFirst + i)
		out[i] = netip.AddrFrom4(a)
	}
	return out, nil
}

// LateResponder answers ARP requests for the mobile address from one host's
// LAN interface, with the host's MAC, a fixed delay after each request
// arrives: a holder slower than an observer's round, as a loaded machine
// makes one, which the lab cannot make with a queueing discipline (no
// netem). The host's kernel takes no part: the host must not hold the
// address through a driver meanwhile, or it answers twice.
type LateResponder struct {
	host  string
	c     *packet.Conn
	mac   net.HardwareAddr
	addr  netip.Addr
	delay time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// closing is set before Close closes the socket: the goroutines'
	// errors from then on are the closing's (the socket package's error
	// for a closed descriptor is not one errors.Is can name).
	closing atomic.Bool
	// queue carries the replies due, in the order they fall due (the
	// delay is fixed).
	queue chan due

	mu sync.Mutex
	// answering is false while stopped; stopAt, when set, is signalled
	// with the arrival of the last request answered before stopping.
	answering bool
	stopAt    chan time.Time
	answered  int
	err       error
	closeOnce sync.Once
}

type due struct {
	at    time.Time
	frame []byte
}

// StartLateResponder starts answering for Address() from host, delay after
// each request. Close it.
func (l *Lab) StartLateResponder(host string, delay time.Duration) (*LateResponder, error) {
	if !slices.Contains(l.hosts, host) {
		return nil, fmt.Errorf("l2lab: late responder: no host %q", host)
	}
	if delay < 0 {
		return nil, fmt.Errorf("l2lab: late responder: delay %s is negative", delay)
	}
	r := &LateResponder{host: host, mac: l.MAC(host), addr: l.address, delay: delay,
		queue: make(chan due, 1024), answering: true}
	err := l.Do(host, func() error {
		ifi, err := net.InterfaceByName(lanDev)
		if err != nil {
			return err
		}
		r.c, err = packet.Listen(ifi, packet.Raw, int(ethernet.EtherTypeARP), nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("l2lab: late responder on %s (a packet socket): %w", host, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(2)
	go r.listen()
	go r.send(ctx)
	return r, nil
}

// listen reads the requests and queues their replies until the socket is
// closed.
func (r *LateResponder) listen() {
	defer r.wg.Done()
	defer close(r.queue)
	buf := make([]byte, 1514)
	for {
		n, _, err := r.c.ReadFrom(buf)
		if err != nil {
			if !r.closing.Load() {
				r.fail(err)
			}
			return
		}
		arrived := time.Now()
		frame, ok := r.replyTo(buf[:n])
		if !ok {
			continue
		}
		r.mu.Lock()
		on := r.answering
		if on && r.stopAt != nil {
			r.answering = false
			r.stopAt <- arrived
			r.stopAt = nil
		}
		if on {
			r.answered++
		}
		r.mu.Unlock()
		if !on {
			continue
		}
		select {
		case r.queue <- due{at: arrived.Add(r.delay), frame: frame}:
		default:
			r.fail(errors.New("more than 1024 replies due at once"))
		}
	}
}

// send writes each queued reply when it falls due.
func (r *LateResponder) send(ctx context.Context) {
	defer r.wg.Done()
	for d := range r.queue {
		t := time.NewTimer(time.Until(d.at))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		dst := net.HardwareAddr(d.frame[:6])
		if _, err := r.c.WriteTo(d.frame, &packet.Addr{HardwareAddr: dst}); err != nil {
			if !r.closing.Load() {
				r.fail(err)
			}
			return
		}
	}
}

// replyTo returns the reply frame to an ARP request for the address, as
// the kernel builds one: to the requester's hardware address, its sender
// protocol address as the target.
func (r *LateResponder) replyTo(frame []byte) ([]byte, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return nil, false
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil || p.Operation != arp.OperationRequest || p.TargetIP != r.addr {
		return nil, false
	}
	// A gratuitous ARP (sender = target) announces; it asks nobody.
	if p.SenderIP == r.addr || !p.SenderIP.Is4() || p.SenderIP.IsUnspecified() {
		return nil, false
	}
	rep, err := arp.NewPacket(arp.OperationReply, r.mac, r.addr, p.SenderHardwareAddr, p.SenderIP)
	if err != nil {
		return nil, false
	}
	pb, err := rep.MarshalBinary()
	if err != nil {
		return nil, false
	}
	out, err := (&ethernet.Frame{Destination: p.SenderHardwareAddr, Source: r.mac, EtherType: ethernet.EtherTypeARP, Payload: pb}).MarshalBinary()
	if err != nil {
		return nil, false
	}
	return out, true
}

func (r *LateResponder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = fmt.Errorf("l2lab: late responder on %s: %w", r.host, err)
	}
}

// StopAfterNext answers the next request, then no more until Resume, and
// returns when that request arrived (its reply leaves a delay later):
// a test that hands the address over at once makes the new holder answer
// the round after it, while the late reply is still on its way.
func (r *LateResponder) StopAfterNext(ctx context.Context) (time.Time, error) {
	ch := make(chan time.Time, 1)
	r.mu.Lock()
	if !r.answering {
		r.mu.Unlock()
		return time.Time{}, fmt.Errorf("l2lab: late responder on %s: stopped already", r.host)
	}
	r.stopAt = ch
	r.mu.Unlock()
	select {
	case t := <-ch:
		return t, nil
	case <-ctx.Done():
		r.mu.Lock()
		defer r.mu.Unlock()
		// It may have stopped meanwhile; either way it is stopped now.
		r.answering, r.stopAt = false, nil
		return time.Time{}, ctx.Err()
	}
}

// Resume answers requests again, from the next one.
func (r *LateResponder) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answering, r.stopAt = true, nil
}

// Answered returns how many requests it has answered or has a reply due
// for.
func (r *LateResponder) Answered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

// Close stops answering, drops the replies not yet sent, closes the socket
// and returns the first error the responder met, if any.
func (r *LateResponder) Close() error {
	r.closeOnce.Do(func() {
		r.closing.Store(true)
		r.cancel()
		if err := r.c.Close(); err != nil {
			r.fail(err)
		}
		r.wg.Wait()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
