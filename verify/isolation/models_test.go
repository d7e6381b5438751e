package isolation

import (
	"slices"
	"testing"
)

func TestBoundary(t *testing.T) {
	cases := []struct {
		anomalies []string
		not       []string
		alsoNot   []string // checked for inclusion only when nil
	}{
		{[]string{"G0"}, []string{"read-uncommitted"}, nil},
		{[]string{"G1c"}, []string{"read-committed"}, nil},
		{[]string{"G-single-item"}, []string{"consistent-view", "repeatable-read"}, nil},
		{[]string{"G2-item"}, []string{"repeatable-read"}, nil},
		// Strong snapshot isolation forbids G-nonadjacent-realtime, which
		// G-single-item-realtime implies; strict serializability implies
		// strong SI.
		{[]string{"G-single-item-realtime"}, []string{"strong-snapshot-isolation"}, []string{"strict-serializable"}},
		{[]string{"G2-item-realtime"}, []string{"strict-serializable"}, []string{}},
		{[]string{"G2-item-process"}, []string{"strong-session-serializable"}, []string{"strict-serializable"}},
		{[]string{"G1a"}, []string{"read-committed"}, nil},
		{[]string{"internal"}, []string{"read-atomic"}, nil},
	}
	for _, c := range cases {
		not, also := Boundary(c.anomalies)
		if !slices.Equal(not, c.not) {
			t.Errorf("%v: not %v, want %v", c.anomalies, not, c.not)
		}
		if c.alsoNot != nil && !slices.Equal(also, c.alsoNot) {
			t.Errorf("%v: also_not %v, want %v", c.anomalies, also, c.alsoNot)
		}
		for _, m := range also {
			if slices.Contains(not, m) {
				t.Errorf("%v: %s both weakest and stronger", c.anomalies, m)
			}
		}
	}
	// G2-item rules out serializable and strict-serializable too, as
	// stronger models.
	_, also := Boundary([]string{"G2-item"})
	for _, m := range []string{"serializable", "strict-serializable", "strong-session-serializable"} {
		if !slices.Contains(also, m) {
			t.Errorf("G2-item: also_not %v lacks %s", also, m)
		}
	}
	if slices.Contains(also, "snapshot-isolation") {
		t.Errorf("G2-item (write skew) must not rule out snapshot isolation: %v", also)
	}
}

func TestProhibited(t *testing.T) {
	ss := Prohibited("strict-serializable")
	for _, a := range []string{"G0", "G1a", "G1b", "G1c", "G-single-item", "G2-item", "G2-item-realtime", "G-single-item-realtime", "G1c-realtime", "G0-realtime", "internal", "lost-update", "dirty-update", "duplicate-elements", "garbage-read"} {
		if !ss[a] {
			t.Errorf("strict-serializable does not prohibit %s", a)
		}
	}
	ser := Prohibited("serializable")
	if ser["G2-item-realtime"] || ser["G-single-item-process"] || !ser["G2-item"] {
		t.Errorf("serializable: realtime %v process %v item %v", ser["G2-item-realtime"], ser["G-single-item-process"], ser["G2-item"])
	}
	si := Prohibited("snapshot-isolation")
	if si["G2-item"] || !si["G-single-item"] || !si["G-nonadjacent-item"] || !si["G1c"] {
		t.Errorf("snapshot-isolation: %v %v %v %v", si["G2-item"], si["G-single-item"], si["G-nonadjacent-item"], si["G1c"])
	}
	rc := Prohibited("read-committed")
	if rc["G-single-item"] || rc["G2-item"] || !rc["G1a"] || !rc["G1b"] || !rc["G0"] {
		t.Errorf("read-committed: %v", rc)
	}
	if err := ValidModel("strict-serializable"); err != nil {
		t.Fatal(err)
	}
	if err := ValidModel("acid"); err == nil {
		t.Fatal("acid accepted")
	}
}
