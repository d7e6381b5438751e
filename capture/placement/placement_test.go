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
	d := Desired([]capture.Pool{p}, "x", nil, nil)
	k := capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.1"), Domain: "provider:aws:placement:g"}
	if h, ok := d[k]; !ok || h != "" || len(d) != 1 {
		t.Fatalf("desired %v", d)
	}
}

func TestDesiredSticky(t *testing.T) {
	a1 := netip.MustParseAddr("10.0.0.1")
	p := capture.Pool{Name: "web", Provider: "aws", Group: "g", Addresses: []netip.Addr{a1},
		Members: []capture.Member{{Node: "a", Priority: 1}, {Node: "b", Priority: 2}, {Node: "c", Priority: 3}}}
	k := capture.Key{Pool: "web", Address: a1, Domain: "provider:aws:placement:g"}
	cur := map[capture.Key]capture.EpochRecord{k: {Epoch: 4, Holder: "b"}}
	never := func(capture.Key, string) bool { return false }
	onlyA := func(_ capture.Key, m string) bool { return m == "a" }
	cases := []struct {
		name    string
		stale   string
		preempt Preempt
		want    string
	}{
		{"plain priority", "", nil, "a"},
		{"b keeps it: nobody may preempt", "", never, "b"},
		{"a may preempt", "", onlyA, "a"},
		{"b stale: a takes it, preempt or not", "b", never, "a"},
	}
	for _, c := range cases {
		pp := p
		pp.Members = append([]capture.Member(nil), p.Members...)
		for i := range pp.Members {
			pp.Members[i].Stale = pp.Members[i].Node == c.stale
		}
		if got := Desired([]capture.Pool{pp}, "x", cur, c.preempt)[k]; got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// c holds and only a may preempt: b, ahead of c, cannot, so c keeps it
	// unless a is eligible.
	cur[k] = capture.EpochRecord{Epoch: 5, Holder: "c"}
	pp := p
	pp.Members = []capture.Member{{Node: "a", Priority: 1, Drained: true}, {Node: "b", Priority: 2}, {Node: "c", Priority: 3}}
	if got := Desired([]capture.Pool{pp}, "x", cur, onlyA)[k]; got != "c" {
		t.Errorf("c keeps it when the one that may preempt is drained: %q", got)
	}
}
