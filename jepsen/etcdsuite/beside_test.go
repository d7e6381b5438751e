package etcdsuite

import (
	"testing"

	"github.com/ipfence/ipfence/verify/netfault"
)

// Restrict keeps exactly the cut links between the names kept: a
// partition of nodes and members together gives the members' mesh only
// the links between members.
func TestRestrict(t *testing.T) {
	all := []string{"n1", "n2", "e1", "e2", "e3"}
	g := netfault.Isolate(all, "e1")
	got := Restrict(g, []string{"e1", "e2", "e3"})
	want := [][2]string{{"e1", "e2"}, {"e1", "e3"}, {"e2", "e1"}, {"e3", "e1"}}
	links := got.Links()
	if len(links) != len(want) {
		t.Fatalf("links %v, want %v", links, want)
	}
	for i := range want {
		if links[i] != want[i] {
			t.Fatalf("links %v, want %v", links, want)
		}
	}
	if got.Cuts("n1", "e1") || !g.Cuts("n1", "e1") {
		t.Errorf("the restricted grudge kept a node's link, or the shape cut none")
	}
	if len(Restrict(g, []string{"n1", "n2"}).Links()) != 0 {
		t.Errorf("isolating e1 cut a link between n1 and n2")
	}
}
