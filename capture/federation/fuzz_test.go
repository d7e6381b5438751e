package federation

import (
	"encoding/json"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

// FuzzDoor feeds arbitrary events through the door into a state: nothing
// panics, and whatever is admitted leaves every counter below MaxValue, so
// the clock can always stamp the next event and no epoch can wrap.
func FuzzDoor(f *testing.F) {
	seed := []Event{
		epoch("b", 1, 1, key1, 1, "b"),
		epoch("b", 2, 2, key1, capture.Epoch(maxU64), "b"),
		intent(Drain, "c", 1, maxU64, "a"),
		hb("b", maxU64, 1),
		{Origin: "b", Seq: 3, Lamport: 3, Kind: Status, Subject: "b", Held: []string{key1}},
	}
	for _, e := range seed {
		b, _ := json.Marshal(e)
		f.Add(b)
	}
	k := mustKeyF(key1)
	lim := Limits{Self: "a", Nodes: []string{"a", "b", "c"}, Keys: map[capture.Key]bool{k: true}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if json.Unmarshal(data, &e) != nil {
			return
		}
		s := NewState()
		s.Apply(hb("b", 5, 1))
		for range 3 {
			if reason, _ := s.Check(&e, lim); reason != "" {
				return
			}
			s.Apply(e)
			if e.Kind == Epoch {
				r := *e.Record // the state keeps the pointer it was given
				r.Epoch++      // a neighbour within the window
				e.Record = &r
			}
			e.Seq++
		}
		if _, err := s.Next(); err != nil {
			t.Fatalf("after admitted events the clock cannot stamp: %v (lamport %d)", err, s.Lamport())
		}
		for _, r := range s.Epochs() {
			if uint64(r.Epoch) >= MaxValue {
				t.Fatalf("admitted epoch %d", r.Epoch)
			}
		}
	})
}

func mustKeyF(s string) capture.Key {
	k, err := capture.ParseKey(s)
	if err != nil {
		panic(err)
	}
	return k
}
