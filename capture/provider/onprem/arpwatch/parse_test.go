package arpwatch

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// frame builds an Ethernet frame carrying an ARP packet.
func frame(t testing.TB, op arp.Operation, mac net.HardwareAddr, ip netip.Addr, target netip.Addr) []byte {
	t.Helper()
	p, err := arp.NewPacket(op, mac, ip, ethernet.Broadcast, target)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	fb, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

func TestParseReply(t *testing.T) {
	reply := frame(t, arp.OperationReply, macH1, addrA, addrB)
	r, ok := parseReply(reply)
	if !ok || r.ip != addrA || !bytes.Equal(r.mac, macH1) || r.target != addrB {
		t.Fatalf("reply: %+v, %v", r, ok)
	}
	// The MAC is a copy: the read buffer is reused.
	reply[14+8] ^= 0xff // the first byte of the sender hardware address
	if !bytes.Equal(r.mac, macH1) {
		t.Fatal("parsed MAC aliases the frame")
	}
	if _, ok := parseReply(frame(t, arp.OperationRequest, macH1, addrA, addrB)); ok {
		t.Fatal("a request was read as a reply")
	}
	ipv4 := frame(t, arp.OperationReply, macH1, addrA, addrB)
	ipv4[12], ipv4[13] = 0x08, 0x00
	if _, ok := parseReply(ipv4); ok {
		t.Fatal("an IPv4 frame was read as an ARP reply")
	}
	for n := range 42 {
		if _, ok := parseReply(frame(t, arp.OperationReply, macH1, addrA, addrB)[:n]); ok {
			t.Fatalf("a frame cut to %d bytes was read as a reply", n)
		}
	}
}

// FuzzParseReply feeds arbitrary frames to the parser of what the wire
// brings: it must not panic, and what it accepts must be an IPv4 address at
// an Ethernet address that a reply frame built from them reads back as.
func FuzzParseReply(f *testing.F) {
	f.Add(frame(f, arp.OperationReply, macH1, addrA, addrB))
	f.Add(frame(f, arp.OperationRequest, macH2, addrB, addrA))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := parseReply(b)
		if !ok {
			return
		}
		if !r.ip.Is4() || len(r.mac) != 6 || !r.target.Is4() {
			t.Fatalf("accepted %+v", r)
		}
		again, ok := parseReply(frame(t, arp.OperationReply, r.mac, r.ip, r.target))
		if !ok || again.ip != r.ip || !bytes.Equal(again.mac, r.mac) || again.target != r.target {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, ok)
		}
	})
}

func TestObserveOptionsSenders(t *testing.T) {
	for _, tc := range []struct {
		senders []netip.Addr
		want    string
	}{
		{[]netip.Addr{send0, send1}, "2 senders"},
		{[]netip.Addr{send0, send1, netip.MustParseAddr("fd00::1")}, "sender fd00::1 is not an IPv4 address"},
		{[]netip.Addr{send0, send1, netip.MustParseAddr("::ffff:10.0.0.9")}, "is not an IPv4 address"},
		{[]netip.Addr{send0, send1, {}}, "sender invalid IP is not an IPv4 address"},
		{[]netip.Addr{send0, send1, send0}, "sender 10.0.0.201 listed twice"},
		{[]netip.Addr{send0, send1, addrA}, "sender 10.0.0.200 is an observed address"},
		{[]netip.Addr{send0, send1, netip.IPv4Unspecified()}, "sender 0.0.0.0 cannot be"},
		{[]netip.Addr{send0, send1, netip.MustParseAddr("224.0.0.1")}, "sender 224.0.0.1 cannot be"},
	} {
		_, err := Observe(t.Context(), "lo", []netip.Addr{addrA}, ObserveOptions{Senders: tc.senders})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("senders %v: %v, want an error containing %q", tc.senders, err, tc.want)
		}
	}
	// A good pool passes the checks; the interface is next, and this one
	// does not exist.
	_, err := Observe(t.Context(), "nosuch0", []netip.Addr{addrA}, ObserveOptions{Senders: []netip.Addr{send0, send1, send2}})
	if err == nil || !strings.Contains(err.Error(), `interface "nosuch0"`) {
		t.Fatalf("a good pool: %v, want the interface's error", err)
	}
}
