package memory

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// roundTrip encodes s to JSON and back, as a state file does.
func roundTrip(t *testing.T, s Snapshot) Snapshot {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
	var out Snapshot
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal snapshot %s: %v", b, err)
	}
	return out
}

// sameSnapshot compares snapshots through JSON, where times are compared
// as instants rather than as time.Time structs with locations.
func sameSnapshot(t *testing.T, got, want Snapshot) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("snapshot:\n got %s\nwant %s", g, w)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	c := newClock()
	p := New(Options{NICs: nics, Clock: c.Now})
	ip3 := netip.MustParseAddr("10.0.0.3")
	mustAssign(t, p, req("eni-a", ip1, 1), false)
	mustAssign(t, p, req("eni-a", ip2, 1), false)
	c.Advance(time.Second)
	mustAssign(t, p, req("eni-b", ip1, 2), true) // a move, recorded with From
	if err := p.SetForwarding(t.Context(), req("eni-b", ip1, 2), true); err != nil {
		t.Fatal(err)
	}
	// Two mutations still queued when the snapshot is taken.
	p.SetDelay(10 * time.Second)
	mustAssign(t, p, req("eni-c", ip1, 3), true) // due at t0+11s
	c.Advance(time.Second)
	if err := p.Unassign(t.Context(), req("eni-a", ip2, 3)); err != nil { // due at t0+12s
		t.Fatal(err)
	}
	mustAssign(t, p, req("eni-c", ip3, 3), false) // due at t0+12s too

	snap := p.Snapshot()
	want := Snapshot{
		NICs: []NICState{
			{Name: "eni-a", Addresses: []netip.Addr{ip2}},
			{Name: "eni-b", Forwarding: true, Addresses: []netip.Addr{ip1}},
			{Name: "eni-c", Addresses: []netip.Addr{}},
		},
		Queue: []Queued{
			{At: t0.Add(11 * time.Second), Call: capture.Assign, NIC: "eni-c", Address: ip1, Epoch: 3, IdempotencyKey: "k:eni-c:10.0.0.1:3", Reassign: true},
			{At: t0.Add(12 * time.Second), Call: capture.Unassign, NIC: "eni-a", Address: ip2, Epoch: 3, IdempotencyKey: "k:eni-a:10.0.0.2:3"},
			{At: t0.Add(12 * time.Second), Call: capture.Assign, NIC: "eni-c", Address: ip3, Epoch: 3, IdempotencyKey: "k:eni-c:10.0.0.3:3"},
		},
		Mutations: []provider.Mutation{
			{Time: t0, Call: capture.Assign, NIC: "eni-a", Address: ip1, Epoch: 1, IdempotencyKey: "k:eni-a:10.0.0.1:1"},
			{Time: t0, Call: capture.Assign, NIC: "eni-a", Address: ip2, Epoch: 1, IdempotencyKey: "k:eni-a:10.0.0.2:1"},
			{Time: t0.Add(time.Second), Call: capture.Assign, NIC: "eni-b", Address: ip1, Epoch: 2, IdempotencyKey: "k:eni-b:10.0.0.1:2", From: "eni-a"},
			{Time: t0.Add(time.Second), Call: capture.EnableForwarding, NIC: "eni-b", Address: ip1, Epoch: 2, IdempotencyKey: "k:eni-b:10.0.0.1:2", Enabled: true},
		},
	}
	sameSnapshot(t, snap, want)

	// Restored from its JSON, the provider is indistinguishable: same
	// snapshot now, and the queued mutations apply at their own times.
	r, err := Restore(Options{Clock: c.Now}, roundTrip(t, snap))
	if err != nil {
		t.Fatalf("Restore = %v", err)
	}
	sameSnapshot(t, r.Snapshot(), want)
	if got := r.Queue(); len(got) != 3 || !got[0].At.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("Queue() = %+v, want the three queued mutations", got)
	}
	c.Advance(9 * time.Second) // t0+11s: the move to eni-c is due
	if h := r.Holder(ip1); h != "eni-c" {
		t.Fatalf("restored holder of %s at +11s = %q, want eni-c", ip1, h)
	}
	if got := r.NICs()[0].Addresses; !slices.Equal(got, []netip.Addr{ip2}) {
		t.Fatalf("eni-a at +11s holds %v, want [%s] (the unassign is due at +12s)", got, ip2)
	}
	c.Advance(time.Second)
	r.SetDelay(0)
	p.SetDelay(0)
	sameSnapshot(t, r.Snapshot(), p.Snapshot())
	expectSummary(t, r,
		"assign-secondary-ip eni-a 10.0.0.1 @0s",
		"assign-secondary-ip eni-a 10.0.0.2 @0s",
		"assign-secondary-ip eni-b 10.0.0.1 from eni-a @1s",
		"ensure-forwarding-enabled eni-b 10.0.0.1 @1s",
		"assign-secondary-ip eni-c 10.0.0.1 from eni-b @11s",
		"unassign-secondary-ip eni-a 10.0.0.2 @12s",
		"assign-secondary-ip eni-c 10.0.0.3 @12s",
	)
}

func TestRestoreKeepsOptions(t *testing.T) {
	c := newClock()
	var failed []capture.Kind
	o := Options{Clock: c.Now, Delay: 2 * time.Second, Fail: func(call capture.Kind, _ provider.Request) error {
		failed = append(failed, call)
		return nil
	}}
	r, err := Restore(o, Snapshot{NICs: []NICState{{Name: "eni-a"}, {Name: "eni-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	mustAssign(t, r, req("eni-a", ip1, 1), false)
	if h := r.Holder(ip1); h != "" {
		t.Fatalf("holder right after an assign with a 2s delay = %q, want none", h)
	}
	c.Advance(2 * time.Second)
	if h := r.Holder(ip1); h != "eni-a" {
		t.Fatalf("holder after the delay = %q, want eni-a", h)
	}
	if !slices.Equal(failed, []capture.Kind{capture.Assign}) {
		t.Fatalf("fault injector saw %v, want [assign-secondary-ip]", failed)
	}
}

func TestRestoreRejects(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.7")
	ok := func() Snapshot {
		return Snapshot{NICs: []NICState{{Name: "eni-a", Addresses: []netip.Addr{a}}, {Name: "eni-b"}}}
	}
	cases := []struct {
		name  string
		opts  Options
		edit  func(s *Snapshot)
		error string
	}{
		{"empty NIC name", Options{}, func(s *Snapshot) { s.NICs[1].Name = "" }, "nics[1]: empty name"},
		{"NIC twice", Options{}, func(s *Snapshot) { s.NICs[1].Name = "eni-a" }, `nics[1]: NIC "eni-a" appears twice`},
		{"other NICs in the options", Options{NICs: []string{"eni-a", "eni-c"}}, func(*Snapshot) {}, "the snapshot has NICs [eni-a eni-b], the options name [eni-a eni-c]"},
		{"invalid address", Options{}, func(s *Snapshot) { s.NICs[1].Addresses = []netip.Addr{{}} }, "nics[1] (eni-b): addresses[0]: invalid address"},
		{"address on two NICs", Options{}, func(s *Snapshot) { s.NICs[1].Addresses = []netip.Addr{a} }, "nics[1] (eni-b): address 10.0.0.7 is already on eni-a"},
		{"address twice on one NIC", Options{}, func(s *Snapshot) { s.NICs[0].Addresses = []netip.Addr{a, a} }, "address 10.0.0.7 is already on eni-a"},
		{"queued unknown call", Options{}, func(s *Snapshot) { s.Queue = []Queued{{Call: capture.ProxyARPStart, NIC: "eni-a", Address: a}} }, `queue[0] (proxy-arp-start 10.0.0.7 on eni-a): call "proxy-arp-start" is not one this provider makes`},
		{"queued unknown NIC", Options{}, func(s *Snapshot) { s.Queue = []Queued{{Call: capture.Assign, NIC: "eni-z", Address: a}} }, `queue[0] (assign-secondary-ip 10.0.0.7 on eni-z): unknown NIC "eni-z"`},
		{"queued assign without address", Options{}, func(s *Snapshot) { s.Queue = []Queued{{Call: capture.Assign, NIC: "eni-a"}} }, "queue[0] (assign-secondary-ip invalid IP on eni-a): invalid address"},
		{"queued reassign on an unassign", Options{}, func(s *Snapshot) {
			s.Queue = []Queued{{Call: capture.Unassign, NIC: "eni-a", Address: a, Reassign: true}}
		}, "reassign is for assigns only"},
		{"queue out of order", Options{}, func(s *Snapshot) {
			s.Queue = []Queued{
				{At: t0.Add(time.Second), Call: capture.Assign, NIC: "eni-b", Address: a, Reassign: true},
				{At: t0, Call: capture.EnableForwarding, NIC: "eni-b"},
			}
		}, "queue[1] (ensure-forwarding-enabled invalid IP on eni-b): apply time 2026-01-02T03:04:05Z is before the previous one's, 2026-01-02T03:04:06Z"},
		{"recorded unknown NIC", Options{}, func(s *Snapshot) {
			s.Mutations = []provider.Mutation{{Call: capture.Assign, NIC: "eni-z", Address: a}}
		}, `mutations[0] (assign-secondary-ip 10.0.0.7 on eni-z): unknown NIC "eni-z"`},
		{"recorded move from nowhere", Options{}, func(s *Snapshot) {
			s.Mutations = []provider.Mutation{{Call: capture.Assign, NIC: "eni-a", Address: a, From: "eni-z"}}
		}, `from "eni-z" is not another known NIC of an assign`},
		{"recorded unknown call", Options{}, func(s *Snapshot) {
			s.Mutations = []provider.Mutation{{Call: "describe", NIC: "eni-a"}}
		}, `call "describe" is not one this provider makes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			if _, err := Restore(Options{}, s); err != nil {
				t.Fatalf("the unedited snapshot: Restore = %v", err)
			}
			tc.edit(&s)
			p, err := Restore(tc.opts, s)
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("Restore = %v, %v; want an error containing %q", p, err, tc.error)
			}
		})
	}
}

func TestRestoreAcceptsOptionNICsInAnyOrder(t *testing.T) {
	s := Snapshot{NICs: []NICState{{Name: "eni-b"}, {Name: "eni-a", Addresses: []netip.Addr{ip1}}}}
	p, err := Restore(Options{NICs: []string{"eni-b", "eni-a", "eni-a"}}, s)
	if err != nil {
		t.Fatalf("Restore = %v", err)
	}
	// The provider orders its NICs by name, whatever the snapshot's order.
	got := p.NICs()
	if len(got) != 2 || got[0].Name != "eni-a" || !slices.Equal(got[0].Addresses, []netip.Addr{ip1}) || got[1].Name != "eni-b" {
		t.Fatalf("NICs() = %+v, want eni-a holding %s, then eni-b", got, ip1)
	}
}

// FuzzRestore feeds arbitrary JSON to Restore: it must not panic, and a
// provider it accepts must keep its rules (an address on at most one NIC)
// and snapshot to a value that restores to itself.
func FuzzRestore(f *testing.F) {
	good, _ := json.Marshal(Snapshot{
		NICs: []NICState{{Name: "eni-a", Forwarding: true, Addresses: []netip.Addr{ip1}}, {Name: "eni-b"}},
		Queue: []Queued{
			{At: t0, Call: capture.Assign, NIC: "eni-b", Address: ip1, Reassign: true, Epoch: 2, IdempotencyKey: "k"},
			{At: t0.Add(time.Hour), Call: capture.Unassign, NIC: "eni-b", Address: ip1},
		},
		Mutations: []provider.Mutation{{Time: t0, Call: capture.Assign, NIC: "eni-a", Address: ip1}},
	})
	f.Add(good)
	f.Add([]byte(`{"nics":[{"name":"a","addresses":["10.0.0.1"]},{"name":"b","addresses":["10.0.0.1"]}]}`))
	f.Add([]byte(`{"nics":[{"name":""}]}`))
	f.Add([]byte(`{"nics":[{"name":"a"}],"queue":[{"call":"assign-secondary-ip","nic":"a","address":"fe80::1%eth0"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		c := newClock()
		p, err := Restore(Options{Clock: c.Now}, s)
		if err != nil {
			return
		}
		c.Advance(2 * time.Hour)
		first := p.Snapshot()
		where := map[netip.Addr]string{}
		for _, n := range first.NICs {
			for _, a := range n.Addresses {
				if h, ok := where[a]; ok {
					t.Fatalf("%s on both %s and %s", a, h, n.Name)
				}
				where[a] = n.Name
			}
		}
		r, err := Restore(Options{Clock: c.Now}, roundTrip(t, first))
		if err != nil {
			t.Fatalf("a provider's own snapshot does not restore: %v", err)
		}
		if second := r.Snapshot(); !reflect.DeepEqual(mustJSON(t, second), mustJSON(t, first)) {
			t.Fatalf("snapshot changed across a restore:\n%s\n%s", mustJSON(t, first), mustJSON(t, second))
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
