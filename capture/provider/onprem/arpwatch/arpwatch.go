// Package arpwatch counts the hosts that answer ARP for an address on a LAN.
// On premises a mobile address is captured by proxy-ARP, which nothing in
// the network keeps exclusive: two hosts that both believe they hold it
// both answer, and the neighbours split between them. Asking, and counting
// the distinct hardware addresses in the replies, is how that split brain
// is seen from outside.
//
// Probe asks a few times and returns who answered. Observe keeps asking, in
// rounds, for a set of addresses and records, through a Tally, how the set
// of responders of each address evolved: the time with more than one
// responder, and every change. With ObserveOptions.Senders each round's
// requests come from an address of their own, which the replies name, so
// that a reply is counted for the round it answers rather than the one it
// arrives in. Tally is the pure part (rounds in, a Report out, no sockets
// and no clock) and can be fed from elsewhere.
//
// Both use a packet socket on the interface, which needs CAP_NET_RAW, and
// send requests from the interface's hardware address and, unless
// ObserveOptions.Senders names others, its first IPv4 address, as the
// host's own ARP would.
package arpwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// ProbeOptions configure Probe. Zero fields take the defaults.
type ProbeOptions struct {
	// Count is the number of requests (default 3): several, because a
	// single request or reply can be lost.
	Count int
	// Interval spaces the requests (default 100ms).
	Interval time.Duration
	// Timeout is how long replies are awaited after the last request
	// (default 1s).
	Timeout time.Duration
}

func (o ProbeOptions) withDefaults() (ProbeOptions, error) {
	if o.Count < 0 || o.Interval < 0 || o.Timeout < 0 {
		return o, fmt.Errorf("arpwatch: probe options %+v: negative values", o)
	}
	if o.Count == 0 {
		o.Count = 3
	}
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	return o, nil
}

// Probe sends ARP requests for addr out of iface and returns the distinct
// hardware addresses of the replies that arrived by Timeout after the last
// request, sorted. None is not an error: nobody answers for addr.
func Probe(ctx context.Context, iface string, addr netip.Addr, opts ProbeOptions) ([]net.HardwareAddr, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := open(iface, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	stop := context.AfterFunc(ctx, c.wake)
	defer stop()

	seen := map[string]net.HardwareAddr{}
	start := time.Now()
	end := start.Add(time.Duration(opts.Count-1)*opts.Interval + opts.Timeout)
	sent := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		if sent < opts.Count && !now.Before(start.Add(time.Duration(sent)*opts.Interval)) {
			if err := c.request(addr, c.ip); err != nil {
				return nil, err
			}
			sent++
			continue
		}
		if !now.Before(end) {
			break
		}
		wait := end
		if sent < opts.Count {
			wait = start.Add(time.Duration(sent) * opts.Interval)
		}
		r, err := c.read(wait)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.ip == addr {
			seen[r.mac.String()] = r.mac
		}
	}
	out := make([]net.HardwareAddr, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	sortMACs(out)
	return out, nil
}

// sortMACs sorts hardware addresses bytewise, which is also their order as
// text.
func sortMACs(ms []net.HardwareAddr) {
	slices.SortFunc(ms, func(a, b net.HardwareAddr) int { return bytes.Compare(a, b) })
}

// conn is a packet socket for ARP on one interface.
type conn struct {
	iface string
	p     *packet.Conn
	mac   net.HardwareAddr
	ip    netip.Addr
	buf   []byte
}

// open checks what a probe needs, in the order a user fixes it (an IPv4
// target, an interface that exists, an IPv4 address on it), then opens the
// socket.
func open(iface string, target netip.Addr) (*conn, error) {
	if !target.Is4() {
		return nil, fmt.Errorf("arpwatch: %s is not an IPv4 address: ARP resolves IPv4 only", target)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("arpwatch: interface %q: %w", iface, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("arpwatch: interface %s has no Ethernet hardware address (it has %q)", iface, ifi.HardwareAddr)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("arpwatch: addresses of interface %s: %w", iface, err)
	}
	var ip netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if v, ok := netip.AddrFromSlice(n.IP); ok && v.Unmap().Is4() {
				ip = v.Unmap()
				break
			}
		}
	}
	if !ip.IsValid() {
		return nil, fmt.Errorf("arpwatch: interface %s has no IPv4 address to send ARP requests from", iface)
	}
	p, err := packet.Listen(ifi, packet.Raw, 0x0806, nil)
	if err != nil {
		return nil, fmt.Errorf("arpwatch: packet socket on %s (needs CAP_NET_RAW): %w", iface, err)
	}
	return &conn{iface: iface, p: p, mac: ifi.HardwareAddr, ip: ip, buf: make([]byte, 1514)}, nil
}

func (c *conn) close() error { return c.p.Close() }

// wake makes a blocked read return, so that a cancelled context is seen.
func (c *conn) wake() { _ = c.p.SetReadDeadline(time.Unix(1, 0)) }

// request broadcasts an ARP request for target from sender (the sender
// protocol address; the sender hardware address is always the interface's,
// so that replies come to this host's Ethernet address whatever sender
// says).
func (c *conn) request(target, sender netip.Addr) error {
	p, err := arp.NewPacket(arp.OperationRequest, c.mac, sender, ethernet.Broadcast, target)
	if err != nil {
		return fmt.Errorf("arpwatch: request for %s on %s: %w", target, c.iface, err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return fmt.Errorf("arpwatch: request for %s on %s: %w", target, c.iface, err)
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: c.mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	fb, err := f.MarshalBinary()
	if err != nil {
		return fmt.Errorf("arpwatch: request for %s on %s: %w", target, c.iface, err)
	}
	if _, err := c.p.WriteTo(fb, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
		return fmt.Errorf("arpwatch: request for %s on %s: %w", target, c.iface, err)
	}
	return nil
}

// read returns the next ARP reply to arrive before deadline; anything else
// the socket sees (requests, our own included, and malformed frames) is
// skipped. At the deadline the error is os.ErrDeadlineExceeded.
func (c *conn) read(deadline time.Time) (reply, error) {
	if err := c.p.SetReadDeadline(deadline); err != nil {
		return reply{}, fmt.Errorf("arpwatch: reading on %s: %w", c.iface, err)
	}
	for {
		n, _, err := c.p.ReadFrom(c.buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return reply{}, err
			}
			return reply{}, fmt.Errorf("arpwatch: reading on %s: %w", c.iface, err)
		}
		if r, ok := parseReply(c.buf[:n]); ok {
			return r, nil
		}
	}
}

// reply is an ARP reply: ip is at mac. mac is the ARP sender hardware
// address, which is what a neighbour cache learns; a proxy may send the
// frame from another Ethernet source. target is the target protocol
// address, which a responder copies from the request's sender protocol
// address: the one thing in a reply that says which request it answers.
type reply struct {
	ip     netip.Addr
	mac    net.HardwareAddr
	target netip.Addr
}

// parseReply reads an Ethernet frame and reports whether it is an ARP reply
// for IPv4 over Ethernet, and what it says. VLAN tags are accepted.
func parseReply(frame []byte) (reply, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return reply{}, false
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return reply{}, false
	}
	if p.Operation != arp.OperationReply || p.HardwareType != 1 ||
		p.ProtocolType != uint16(ethernet.EtherTypeIPv4) ||
		p.HardwareAddrLength != 6 || p.IPLength != 4 || !p.SenderIP.Is4() || !p.TargetIP.Is4() {
		return reply{}, false
	}
	return reply{ip: p.SenderIP, mac: slices.Clone(p.SenderHardwareAddr), target: p.TargetIP}, true
}
