package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Advert is a VRRP advertisement as a member received it.
type Advert struct {
	// From is the sender's address.
	From netip.Addr
	// Version is 2 or 3; VRID the virtual router; Priority the sender's.
	Version, VRID, Priority int
}

// protocolVRRP is VRRP's IP protocol number.
const protocolVRRP = 112

// ParseAdvert reads a VRRP packet (the IP payload): version and type in
// the first byte (only type 1, advertisement, exists), the virtual router
// ID, the priority. Errors say what is wrong.
func ParseAdvert(b []byte) (Advert, error) {
	if len(b) < 8 {
		return Advert{}, fmt.Errorf("vrrp: advert of %d bytes, want at least 8", len(b))
	}
	a := Advert{Version: int(b[0] >> 4), VRID: int(b[1]), Priority: int(b[2])}
	if a.Version != 2 && a.Version != 3 {
		return Advert{}, fmt.Errorf("vrrp: advert of version %d, want 2 or 3", a.Version)
	}
	if t := b[0] & 0x0f; t != 1 {
		return Advert{}, fmt.Errorf("vrrp: packet of type %d, want 1 (advertisement)", t)
	}
	if a.VRID == 0 {
		return Advert{}, errors.New("vrrp: advert for virtual router 0")
	}
	return a, nil
}

// ListenAdverts calls fn with every VRRP advertisement this host receives
// from another address, until ctx ends. A master hears adverts only when
// another router believes it is master too: with unicast peers, backups
// stay silent. So a master that hears one is seeing a split brain resolve
// (a partition healed), which keepalived 2.2.7 does not report on its
// notify FIFO, and which leaves the LAN sending to the other router's MAC
// unless the address is announced again. It needs CAP_NET_RAW and reads
// through a raw socket of protocol 112 in the caller's network namespace.
func ListenAdverts(ctx context.Context, fn func(Advert)) error {
	conn, err := net.ListenPacket(fmt.Sprintf("ip4:%d", protocolVRRP), "0.0.0.0")
	if err != nil {
		return fmt.Errorf("vrrp: listening for adverts: %w", err)
	}
	local := map[netip.Addr]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr()] = true
			}
		}
	}
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("vrrp: reading adverts: %w", err)
		}
		ip, ok := from.(*net.IPAddr)
		if !ok {
			continue
		}
		src, ok := netip.AddrFromSlice(ip.IP)
		if !ok || local[src.Unmap()] {
			// Our own multicast adverts loop back; they say nothing.
			continue
		}
		a, err := ParseAdvert(buf[:n])
		if err != nil {
			continue
		}
		a.From = src.Unmap()
		fn(a)
	}
}
