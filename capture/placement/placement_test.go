package placement

import (
	"net/netip"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

func TestActive(t *testing.T) {
	p := capture.Pool{Name: "web", Provider: "aws", Group: "g", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		Members: []capture.Member{{Node: "c", Priority: 1}, {Node: "b", Priority: 1}, {Node: "a", Priority: 2}}}
	if got := Active(&p); got != "b" {
		t.Fatalf("ties break by name: %q", got)
	}
	p.Members[1].Drained = true
	if got := Active(&p); got != "c" {
		t.Fatalf("drained b: %q", got)
	}
	p.Members[0].Stale = true
	if got := Active(&p); got != "a" {
		t.Fatalf("stale c: %q", got)
	}
	p.Members[2].Drained = true
	if got := Active(&p); got != "" {
		t.Fatalf("nobody left: %q", got)
	}
	var order []string
	for _, m := range Ordered(&p) {
		order = append(order, m.Node)
	}
	if len(order) != 3 || order[0] != "b" || order[1] != "c" || order[2] != "a" {
		t.Fatalf("order %v", order)
	}
	d := Desired([]capture.Pool{p}, "x")
	k := capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.1"), Domain: "provider:aws:placement:g"}
	if h, ok := d[k]; !ok || h != "" || len(d) != 1 {
		t.Fatalf("desired %v", d)
	}
}
