package netfault

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
)

func nodeNames(n int) []string {
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i+1)
	}
	return nodes
}

func TestShapes(t *testing.T) {
	n2, n3, n5 := nodeNames(2), nodeNames(3), nodeNames(5)
	cases := []struct {
		name string
		got  Grudge
		want Grudge
	}{
		{"halves/1", Halves(nodeNames(1)), Grudge{}},
		{"halves/2", Halves(n2), Grudge{"n1": {"n2"}, "n2": {"n1"}}},
		{"halves/3", Halves(n3), Grudge{"n1": {"n3"}, "n2": {"n3"}, "n3": {"n1", "n2"}}},
		{"halves/5", Halves(n5), Grudge{
			"n1": {"n4", "n5"}, "n2": {"n4", "n5"}, "n3": {"n4", "n5"},
			"n4": {"n1", "n2", "n3"}, "n5": {"n1", "n2", "n3"},
		}},
		{"isolate/2", Isolate(n2, "n2"), Grudge{"n1": {"n2"}, "n2": {"n1"}}},
		{"isolate/3", Isolate(n3, "n1"), Grudge{"n1": {"n2", "n3"}, "n2": {"n1"}, "n3": {"n1"}}},
		{"isolate/5", Isolate(n5, "n3"), Grudge{
			"n3": {"n1", "n2", "n4", "n5"},
			"n1": {"n3"}, "n2": {"n3"}, "n4": {"n3"}, "n5": {"n3"},
		}},
		{"isolate/alone", Isolate([]string{"n1"}, "n1"), Grudge{}},
		{"ring/2", MajoritiesRing(n2), Grudge{}},
		{"ring/3", MajoritiesRing(n3), Grudge{}},
		{"ring/4", MajoritiesRing(nodeNames(4)), Grudge{
			"n1": {"n3"}, "n2": {"n4"}, "n3": {"n1"}, "n4": {"n2"},
		}},
		{"ring/5", MajoritiesRing(n5), Grudge{
			"n1": {"n3", "n4"}, "n2": {"n4", "n5"}, "n3": {"n1", "n5"},
			"n4": {"n1", "n2"}, "n5": {"n2", "n3"},
		}},
		{"bridge/2", Bridge(n2), Grudge{}},
		{"bridge/3", Bridge(n3), Grudge{"n1": {"n3"}, "n3": {"n1"}}},
		{"bridge/4", Bridge(nodeNames(4)), Grudge{
			"n1": {"n4"}, "n2": {"n4"}, "n4": {"n1", "n2"},
		}},
		{"bridge/5", Bridge(n5), Grudge{
			"n1": {"n4", "n5"}, "n2": {"n4", "n5"},
			"n4": {"n1", "n2"}, "n5": {"n1", "n2"},
		}},
	}
	for _, c := range cases {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, map[string][]string(c.got), map[string][]string(c.want))
		}
	}
}

// sees returns what node a reaches in g among nodes, itself included.
func sees(g Grudge, nodes []string, a string) []string {
	var out []string
	for _, b := range nodes {
		if !g.Cuts(a, b) {
			out = append(out, b)
		}
	}
	return out
}

func TestMajoritiesRingProperties(t *testing.T) {
	for n := 4; n <= 12; n++ {
		nodes := nodeNames(n)
		g := MajoritiesRing(nodes)
		views := map[string]string{}
		for _, a := range nodes {
			v := sees(g, nodes, a)
			if len(v) <= n/2 {
				t.Errorf("n=%d: %s sees %v, not a majority", n, a, v)
			}
			// At least itself and ⌊n/2⌋ neighbours, and never the whole ring.
			if len(v) < n/2+1 || len(v) == n {
				t.Errorf("n=%d: %s sees %d nodes", n, a, len(v))
			}
			key := fmt.Sprint(v)
			if other, ok := views[key]; ok {
				t.Errorf("n=%d: %s and %s both see %v", n, a, other, v)
			}
			views[key] = a
			for _, b := range nodes {
				if g.Cuts(a, b) != g.Cuts(b, a) {
					t.Errorf("n=%d: link %s-%s cut one way only", n, a, b)
				}
			}
		}
	}
}

func TestRandomHalves(t *testing.T) {
	nodes := nodeNames(5)
	// Pinned: a seed must replay the same partition on every Go version.
	// SplitMix64 from 1 and Fisher–Yates order the nodes n3 n2 n5 n4 n1
	// (checked against an independent implementation).
	want := Grudge{
		"n2": {"n1", "n4"}, "n3": {"n1", "n4"}, "n5": {"n1", "n4"},
		"n1": {"n2", "n3", "n5"}, "n4": {"n2", "n3", "n5"},
	}
	if got := RandomHalves(nodes, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("RandomHalves(seed 1) = %v, want %v", map[string][]string(got), map[string][]string(want))
	}
	distinct := map[string]bool{}
	for seed := range uint64(50) {
		a, b := RandomHalves(nodes, seed), RandomHalves(nodes, seed)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d gave %v, then %v", seed, a, b)
		}
		// Always a 3 | 2 split in which every node is cut from the
		// other side only.
		for _, x := range nodes {
			cut := len(a[x])
			if cut != 2 && cut != 3 {
				t.Fatalf("seed %d: %s cut from %d nodes in %v", seed, x, cut, a)
			}
			for _, y := range a[x] {
				if len(a[y]) == cut || !a.Cuts(y, x) {
					t.Fatalf("seed %d: %s and %s on the same side or cut one way in %v", seed, x, y, a)
				}
			}
		}
		distinct[a.String()] = true
	}
	// 10 ways to pick the majority of 5; 50 seeds should find most.
	if len(distinct) < 6 {
		t.Errorf("50 seeds gave %d distinct splits: %v", len(distinct), slices.Sorted(maps.Keys(distinct)))
	}
}

func TestShuffle(t *testing.T) {
	nodes := nodeNames(6)
	got := Shuffle(nodes, 42)
	if !reflect.DeepEqual(got, Shuffle(nodes, 42)) {
		t.Fatal("same seed, different order")
	}
	if !reflect.DeepEqual(nodes, nodeNames(6)) {
		t.Fatalf("Shuffle changed its input: %v", nodes)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !reflect.DeepEqual(sorted, nodes) {
		t.Fatalf("Shuffle(%v) = %v, not a permutation", nodes, got)
	}
	if reflect.DeepEqual(got, Shuffle(nodes, 43)) && reflect.DeepEqual(got, Shuffle(nodes, 44)) {
		t.Errorf("seeds 42, 43, 44 all give %v", got)
	}
}

func TestLinks(t *testing.T) {
	got := Halves(nodeNames(3)).Links()
	want := [][2]string{{"n1", "n3"}, {"n2", "n3"}, {"n3", "n1"}, {"n3", "n2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Links = %v, want %v", got, want)
	}
	// Duplicates and self-links of a hand-written grudge are left out.
	g := Grudge{"b": {"a", "b", "a"}, "a": {"c"}}
	want = [][2]string{{"a", "c"}, {"b", "a"}}
	if got := g.Links(); !reflect.DeepEqual(got, want) {
		t.Errorf("Links = %v, want %v", got, want)
	}
	if g.Cuts("b", "b") || !g.Cuts("b", "a") || g.Cuts("a", "b") {
		t.Errorf("Cuts wrong on %v", g)
	}
	if got, want := g.Nodes(), []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Nodes = %v, want %v", got, want)
	}
}

func TestGrudgeString(t *testing.T) {
	cases := []struct {
		g    Grudge
		want string
	}{
		{Grudge{}, "none"},
		{nil, "none"},
		{Halves(nodeNames(5)), "n1,n2,n3 | n4,n5"},
		{Isolate(nodeNames(3), "n2"), "n1,n3 | n2"},
		{MajoritiesRing(nodeNames(5)), "n1 -/-> n3,n4; n2 -/-> n4,n5; n3 -/-> n1,n5; n4 -/-> n1,n2; n5 -/-> n2,n3"},
		// The bridge n3 is named nowhere: it reaches everyone.
		{Bridge(nodeNames(5)), "n1,n2 | n4,n5"},
		// One way only: no groups.
		{Grudge{"n1": {"n2"}}, "n1 -/-> n2"},
		// Three groups.
		{Grudge{"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b"}}, "a | b | c"},
	}
	for _, c := range cases {
		if got := c.g.String(); got != c.want {
			t.Errorf("String(%v) = %q, want %q", map[string][]string(c.g), got, c.want)
		}
	}
}
