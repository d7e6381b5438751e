package federation

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

const ms = int64(time.Millisecond)

func hb(origin string, seq uint64, at int64) Event {
	return Event{Origin: origin, Seq: seq, Lamport: seq, Time: at, Kind: Heartbeat}
}

func intent(kind Kind, origin string, seq, lamport uint64, member string) Event {
	return Event{Origin: origin, Seq: seq, Lamport: lamport, Kind: kind, Subject: member}
}

func epoch(origin string, seq, lamport uint64, key string, e capture.Epoch, holder string) Event {
	return Event{Origin: origin, Seq: seq, Lamport: lamport, Kind: Epoch, Subject: key, Record: &capture.EpochRecord{Epoch: e, Holder: holder}}
}

const key1 = "web/10.0.0.1@provider:aws:placement:g"

// Registers keep the newest event by their kind's rule, whatever the order
// events arrive in, any number of times.
func TestApplyConverges(t *testing.T) {
	events := []Event{
		hb("a", 1, 100), hb("a", 3, 300), hb("a", 2, 200), hb("b", 1, 150),
		intent(Drain, "b", 2, 5, "a"), intent(Undrain, "c", 1, 7, "a"), intent(Drain, "a", 4, 7, "a"),
		epoch("a", 5, 3, key1, 2, "b"), epoch("b", 5, 10, key1, 1, "a"), epoch("c", 3, 4, key1, 2, "b"),
	}
	var want []Event
	for round := range 200 {
		r := rand.New(rand.NewPCG(uint64(round), 9))
		s := NewState()
		for _, i := range r.Perm(len(events)) {
			s.Apply(events[i])
			if r.IntN(3) == 0 {
				s.Apply(events[r.IntN(len(events))]) // duplicates change nothing
			}
		}
		got := s.Events()
		if want == nil {
			want = got
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("order %d gave a different state", round)
		}
		if s.Lamport() != 10 {
			t.Fatalf("lamport %d, want 10", s.Lamport())
		}
	}
	s := NewState()
	for _, e := range events {
		s.Apply(e)
	}
	if h, _ := s.Heartbeat("a"); h.Seq != 3 {
		t.Errorf("heartbeat of a: %+v", h)
	}
	// Intents: lamport 7 ties between c's undrain and a's drain; the
	// origin name breaks it ("c" > "a"): undrain.
	if in, _ := s.Intent("a"); in.Kind != Undrain || s.Drained("a") {
		t.Errorf("intent for a: %+v", in)
	}
	// Epochs: the highest epoch wins, then the later lamport.
	k, _ := capture.ParseKey(key1)
	if got := s.Epochs()[k]; got != (capture.EpochRecord{Epoch: 2, Holder: "b"}) {
		t.Errorf("epoch: %+v", got)
	}
	if ev, _ := s.EpochEvent(k); ev.Origin != "c" || ev.Lamport != 4 {
		t.Errorf("the later lamport among equal epochs should win: %+v", ev)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Origin: "", Seq: 1, Kind: Heartbeat}, `bad origin ""`},
		{Event{Origin: "a|b", Seq: 1, Kind: Heartbeat}, `bad origin "a|b"`},
		{Event{Origin: "a", Kind: Heartbeat}, "has no seq"},
		{Event{Origin: "a", Seq: 1, Kind: Drain}, "has no subject"},
		{Event{Origin: "a", Seq: 1, Kind: "poke", Subject: "x"}, `unknown kind "poke"`},
		{Event{Origin: "a", Seq: 1, Kind: Epoch, Subject: key1}, "has no record"},
		{Event{Origin: "a", Seq: 1, Kind: Epoch, Subject: "nope", Record: &capture.EpochRecord{}}, "is not pool/address@domain"},
	}
	for _, c := range cases {
		err := c.e.Validate()
		if err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.e, err, c.want)
		}
	}
	if e := epoch("a", 1, 1, key1, 1, "a"); e.Validate() != nil {
		t.Errorf("valid epoch refused: %v", e.Validate())
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

var timing = Timing{TTL: 600 * time.Millisecond, PromotionHold: 0}

func TestLivenessStreamTime(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	s := NewState()
	s.Apply(hb("a", 1, 1000*ms))
	s.Apply(hb("b", 1, 1000*ms))
	s.Apply(hb("c", 1, 1000*ms))
	// a falls silent; b and c go on: at 1500 a is fresh, at 1600 stale.
	s.Apply(hb("b", 2, 1500*ms))
	s.Apply(hb("c", 2, 1500*ms))
	if m := Assess(s, nodes, timing, 0); m["a"].Stale || m["b"].Stale || !m["a"].Heard {
		t.Fatalf("at 1.5s: %+v", m)
	}
	s.Apply(hb("b", 3, 1600*ms))
	s.Apply(hb("c", 3, 1600*ms))
	m := Assess(s, nodes, timing, 0)
	if !m["a"].Stale || m["b"].Stale || m["a"].Age != 600*time.Millisecond {
		t.Fatalf("at 1.6s: %+v", m)
	}
	// c's clock jumps an hour ahead: the median holds, nobody goes stale.
	s.Apply(hb("a", 2, 1650*ms))
	s.Apply(hb("c", 4, 3600_000*ms))
	if m := Assess(s, nodes, timing, 0); m["a"].Stale || m["b"].Stale {
		t.Fatalf("one clock ahead made others stale: %+v", m)
	} else if m["c"].Age != 0 {
		// c is an hour ahead of the median: just heard, not -1h old.
		t.Fatalf("a member ahead of the group's time has age %v, want 0", m["c"].Age)
	}
	// b's clock stalls: it stops moving and is stale once the others are
	// past its last heartbeat.
	s.Apply(hb("b", 4, 1600*ms))
	s.Apply(hb("a", 3, 2300*ms))
	if m := Assess(s, nodes, timing, 0); !m["b"].Stale || m["a"].Stale {
		t.Fatalf("stalled clock: %+v", m)
	}
}

func TestLivenessUnknownGrace(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	s := NewState()
	s.Apply(hb("a", 1, 5000*ms))
	if m := Assess(s, nodes, timing, 5000*ms); m["b"].Stale || m["b"].Heard {
		t.Fatalf("b, never heard, right after start: %+v", m["b"])
	}
	// a alone, however long it waits, has heard no majority: it must not
	// find the others stale (a restarted node that did would seize their
	// addresses before catching up with their epochs).
	s.Apply(hb("a", 2, 60_000*ms))
	if m := Assess(s, nodes, timing, 5000*ms); m["b"].Stale || m["c"].Stale {
		t.Fatalf("a alone made b or c stale: %+v", m)
	}
	// Once c is heard, a and c are a majority: b, never heard, is stale
	// once the grace has passed on their time.
	s.Apply(hb("c", 1, 5500*ms))
	if m := Assess(s, nodes, timing, 5000*ms); m["b"].Stale {
		t.Fatalf("b stale within the grace: %+v", m["b"])
	}
	s.Apply(hb("c", 2, 5600*ms))
	if m := Assess(s, nodes, timing, 5000*ms); !m["b"].Stale || m["b"].Heard || m["c"].Stale {
		t.Fatalf("b, never heard, past the grace: %+v", m)
	}
}

func TestDrainIntents(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	s := NewState()
	s.Apply(intent(Drain, "c", 3, 12, "b"))
	if m := Assess(s, nodes, timing, 0); !m["b"].Drained || m["a"].Drained {
		t.Fatalf("drain: %+v", m)
	}
	// An older undrain does not override a newer drain; a newer one does.
	s.Apply(intent(Undrain, "a", 1, 11, "b"))
	if !s.Drained("b") {
		t.Fatal("an older undrain won")
	}
	s.Apply(intent(Undrain, "a", 2, 13, "b"))
	if s.Drained("b") {
		t.Fatal("a newer undrain lost")
	}
}
