package plan

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

var (
	a1 = netip.MustParseAddr("10.0.0.1")
	a2 = netip.MustParseAddr("10.0.0.2")
)

func rec(e capture.Epoch, holder string) capture.EpochRecord {
	return capture.EpochRecord{Epoch: e, Holder: holder}
}

func key(a netip.Addr) capture.Key {
	return capture.Key{Pool: "web", Address: a, Domain: capture.CloudDomain("aws", "g", "")}
}

func pools(drainedA bool) []capture.Pool {
	return []capture.Pool{{
		Name: "web", Provider: "aws", Group: "g", Addresses: []netip.Addr{a2, a1},
		Members: []capture.Member{{Node: "b", Priority: 2, Target: "eni-b"}, {Node: "a", Priority: 1, Target: "eni-a", Drained: drainedA}},
	}}
}

func TestEpochs(t *testing.T) {
	k1, k2, k3 := key(a1), key(a2), key(netip.MustParseAddr("10.0.0.3"))
	desired := map[capture.Key]string{k1: "a", k2: "b", k3: ""}
	local := map[capture.Key]capture.EpochRecord{k1: {Epoch: 4, Holder: "a"}, k2: {Epoch: 4, Holder: "a"}}
	seen := map[capture.Key]capture.EpochRecord{k1: {Epoch: 3, Holder: "b"}, k3: {Epoch: 7, Holder: "c"}}
	out, changed := Epochs(desired, local, seen)
	// k1: local is newer than seen and the holder is right: unchanged.
	// k2: holder moves a → b: bumped. k3: adopts seen 7 (holder c), then
	// bumps to 8 for holder "".
	want := map[capture.Key]capture.EpochRecord{k1: rec(4, "a"), k2: rec(5, "b"), k3: rec(8, "")}
	for k, w := range want {
		if out[k] != w {
			t.Errorf("%s: %+v, want %+v", k, out[k], w)
		}
	}
	if fmt.Sprint(changed) != fmt.Sprint([]capture.Key{k2, k3}) {
		t.Errorf("changed %v", changed)
	}
	// k1 moves to b: bumped past the higher of the local and seen records.
	out, changed = Epochs(map[capture.Key]string{k1: "b"}, local, seen)
	if out[k1] != (capture.EpochRecord{Epoch: 5, Holder: "b"}) || len(changed) != 1 {
		t.Errorf("move to b: %+v %v", out[k1], changed)
	}
	out, _ = Epochs(map[capture.Key]string{k1: "c"}, nil, map[capture.Key]capture.EpochRecord{k1: {Epoch: 9, Holder: "c"}})
	// A peer's higher record for the holder wanted is adopted without a bump.
	if out[k1] != (capture.EpochRecord{Epoch: 9, Holder: "c"}) {
		t.Errorf("adopt same holder: %+v", out[k1])
	}
	// A key nobody wants and nobody recorded stays at zero, unwritten.
	if _, changed := Epochs(map[capture.Key]string{k3: ""}, nil, nil); len(changed) != 0 {
		t.Errorf("an unwanted new key was written: %v", changed)
	}
}

func show(as []capture.Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s %s %s %s@%d", a.Kind, a.Address, a.Target, a.Holder, a.Epoch))
	}
	return strings.Join(parts, "; ")
}

func TestComputeAcquiresAndProjection(t *testing.T) {
	epochs := map[capture.Key]capture.EpochRecord{key(a1): rec(2, "a"), key(a2): rec(3, "a")}
	// a holds a1 at its current epoch, a2 at an older one: only a2 is
	// (re)acquired.
	held := map[capture.Key]capture.Held{
		key(a1): {Key: key(a1), Provider: "aws", Target: "eni-a", Epoch: 2, Confirmed: true},
		key(a2): {Key: key(a2), Provider: "aws", Target: "eni-a", Epoch: 1, Confirmed: true},
	}
	p := Compute(Input{Node: "a", Pools: pools(false), Epochs: epochs, Held: held})
	if got := show(p.Acquires); got != "assign-secondary-ip 10.0.0.2 eni-a a@3; ensure-forwarding-enabled 10.0.0.2 eni-a a@3" {
		t.Errorf("acquires: %s", got)
	}
	if len(p.Releases) != 0 || len(p.Markers) != 0 {
		t.Errorf("releases %v markers %v", p.Releases, p.Markers)
	}
	if p.Acquires[0].Params[capture.ParamAllowReassignment] != "true" || p.Acquires[0].IdempotencyKey != "web:aws:eni-a:assign-secondary-ip:10.0.0.2:epoch:3" {
		t.Errorf("assign %+v", p.Acquires[0])
	}

	// An acquire claimed but not confirmed (a crash hid its outcome) is
	// planned again at the current epoch.
	held[key(a1)] = capture.Held{Key: key(a1), Provider: "aws", Target: "eni-a", Epoch: 2}
	p = Compute(Input{Node: "a", Pools: pools(false), Epochs: epochs, Held: held})
	if got := show(p.Acquires); !strings.HasPrefix(got, "assign-secondary-ip 10.0.0.1 eni-a a@2; ensure-forwarding-enabled 10.0.0.1 eni-a a@2; ") {
		t.Errorf("unconfirmed acquire: %s", got)
	}

	// Drained: both released (the unconfirmed one too: it may have taken
	// effect); forwarding goes off once, per address, as no
	// address stays on eni-a.
	epochs = map[capture.Key]capture.EpochRecord{key(a1): rec(3, "b"), key(a2): rec(4, "b")}
	p = Compute(Input{Node: "a", Pools: pools(true), Epochs: epochs, Held: held})
	want := "unassign-secondary-ip 10.0.0.1 eni-a a@3; ensure-forwarding-disabled 10.0.0.1 eni-a a@3; unassign-secondary-ip 10.0.0.2 eni-a a@4; ensure-forwarding-disabled 10.0.0.2 eni-a a@4"
	if got := show(p.Releases); got != want {
		t.Errorf("releases:\n%s\nwant\n%s", got, want)
	}
	if show(p.Markers) != want || len(p.Acquires) != 0 {
		t.Errorf("markers %s acquires %v", show(p.Markers), p.Acquires)
	}

	// One address moves away, the other stays: forwarding stays on.
	epochs = map[capture.Key]capture.EpochRecord{key(a1): rec(3, "b"), key(a2): rec(1, "a")}
	held[key(a2)] = capture.Held{Key: key(a2), Provider: "aws", Target: "eni-a", Epoch: 1, Confirmed: true}
	p = Compute(Input{Node: "a", Pools: pools(false), Epochs: epochs, Held: held})
	if got := show(p.Releases); got != "unassign-secondary-ip 10.0.0.1 eni-a a@3" {
		t.Errorf("partial release: %s", got)
	}
}

func TestComputeMarkers(t *testing.T) {
	epochs := map[capture.Key]capture.EpochRecord{key(a1): rec(5, "b"), key(a2): rec(6, "a")}
	cur := capture.NewAction(capture.Unassign, key(a1), "aws", "eni-a", "a", 5, nil)
	old := capture.NewAction(capture.Unassign, key(a1), "aws", "eni-a", "a", 4, nil)
	again := capture.NewAction(capture.Unassign, key(a2), "aws", "eni-a", "a", 6, nil)
	// Nothing held: the current marker is re-emitted (and not written
	// again); the old one and the one whose address came back are dropped.
	p := Compute(Input{Node: "a", Pools: pools(false), Epochs: epochs, Markers: []capture.Action{old, cur, again}})
	if show(p.Releases) != show([]capture.Action{cur}) || len(p.Markers) != 0 {
		t.Errorf("releases %s markers %s", show(p.Releases), show(p.Markers))
	}
	if strings.Join(p.Drop, ",") != old.IdempotencyKey+","+again.IdempotencyKey {
		t.Errorf("drop %v", p.Drop)
	}
}

func TestComputeOnPrem(t *testing.T) {
	ps := []capture.Pool{{Name: "lan", Provider: "onprem", L2Domain: "dc1", Addresses: []netip.Addr{a1},
		Members: []capture.Member{{Node: "a", Priority: 1, Target: "eth0"}}}}
	k := capture.Key{Pool: "lan", Address: a1, Domain: "onprem:dc1"}
	p := Compute(Input{Node: "a", Pools: ps, Epochs: map[capture.Key]capture.EpochRecord{k: rec(1, "a")}})
	if got := show(p.Acquires); got != "proxy-arp-start 10.0.0.1 eth0 a@1" {
		t.Errorf("on-prem acquire: %s", got)
	}
	held := map[capture.Key]capture.Held{k: {Key: k, Provider: "onprem", Target: "eth0", Epoch: 1}}
	p = Compute(Input{Node: "a", Pools: ps, Epochs: map[capture.Key]capture.EpochRecord{k: rec(2, "")}, Held: held})
	if got := show(p.Releases); got != "proxy-arp-stop 10.0.0.1 eth0 a@2" {
		t.Errorf("on-prem release: %s", got)
	}
}

// The same inputs give byte-identical plans, whatever order the maps and
// lists were built in.
func TestComputeDeterministic(t *testing.T) {
	var first []byte
	for i := range 50 {
		epochs := map[capture.Key]capture.EpochRecord{}
		held := map[capture.Key]capture.Held{}
		var addrs []netip.Addr
		for j := range 40 {
			n := (j*7 + i) % 40
			a := netip.AddrFrom4([4]byte{10, 0, 1, byte(n)})
			addrs = append(addrs, a)
			k := capture.Key{Pool: "web", Address: a, Domain: capture.CloudDomain("aws", "g", "")}
			holder := []string{"a", "b", ""}[n%3]
			epochs[k] = capture.EpochRecord{Epoch: capture.Epoch(n + 1), Holder: holder}
			if n%2 == 0 {
				held[k] = capture.Held{Key: k, Provider: "aws", Target: "eni-a", Epoch: capture.Epoch(n)}
			}
		}
		ps := []capture.Pool{{Name: "web", Provider: "aws", Group: "g", Addresses: addrs,
			Members: []capture.Member{{Node: "a", Target: "eni-a"}, {Node: "b", Target: "eni-b"}}}}
		p := Compute(Input{Node: "a", Pools: ps, Epochs: epochs, Held: held})
		got := p.Encode()
		if first == nil {
			first = got
			if len(p.Acquires) == 0 || len(p.Releases) == 0 {
				t.Fatalf("the case plans nothing: %s", got)
			}
			continue
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("run %d planned differently:\n%s\n%s", i, got, first)
		}
	}
}

// Issue 14: a record at 2^64−1 (one forged or bit-flipped event) made the
// next holder change wrap the epoch to 0. Epochs never returns a record
// lower than the local one, whatever it is given.
func TestEpochsNeverWrap(t *testing.T) {
	k := key(a1)
	// A seen record above MaxEpoch is not adopted.
	out, changed := Epochs(map[capture.Key]string{k: "b"}, map[capture.Key]capture.EpochRecord{k: rec(1, "a")},
		map[capture.Key]capture.EpochRecord{k: rec(1<<64-1, "a")})
	if out[k] != rec(2, "b") || len(changed) != 1 {
		t.Fatalf("seen 2^64−1: %+v %v, want epoch 2 for b", out[k], changed)
	}
	// A local record at MaxEpoch is kept, holder and all, rather than
	// bumped past it.
	out, changed = Epochs(map[capture.Key]string{k: "b"}, map[capture.Key]capture.EpochRecord{k: rec(MaxEpoch, "a")}, nil)
	if out[k] != rec(MaxEpoch, "a") || len(changed) != 0 {
		t.Fatalf("local MaxEpoch: %+v %v", out[k], changed)
	}
	// Just below, the bump still happens.
	out, _ = Epochs(map[capture.Key]string{k: "b"}, nil, map[capture.Key]capture.EpochRecord{k: rec(MaxEpoch-1, "a")})
	if out[k] != rec(MaxEpoch, "b") {
		t.Fatalf("bump to MaxEpoch: %+v", out[k])
	}
	for _, local := range []capture.Epoch{0, 1, 7, MaxEpoch - 1, MaxEpoch, 1<<64 - 1} {
		for _, seen := range []capture.Epoch{0, 1, 8, MaxEpoch, MaxEpoch + 1, 1<<64 - 1} {
			out, _ := Epochs(map[capture.Key]string{k: "c"}, map[capture.Key]capture.EpochRecord{k: rec(local, "a")},
				map[capture.Key]capture.EpochRecord{k: rec(seen, "b")})
			if out[k].Epoch < local {
				t.Errorf("local %d, seen %d: epoch went down to %d", local, seen, out[k].Epoch)
			}
		}
	}
}

// Two nodes that bumped at once hold the same epoch for two holders: the
// key moves past it, whoever is desired.
func TestEpochsConflictMovesOn(t *testing.T) {
	k := key(a1)
	for _, desired := range []string{"a", "b"} {
		out, changed := Epochs(map[capture.Key]string{k: desired}, map[capture.Key]capture.EpochRecord{k: rec(9, "a")},
			map[capture.Key]capture.EpochRecord{k: rec(9, "b")})
		if out[k] != rec(10, desired) || len(changed) != 1 {
			t.Fatalf("desired %s: %+v %v", desired, out[k], changed)
		}
	}
	// The same record seen and held is no conflict.
	out, changed := Epochs(map[capture.Key]string{k: "a"}, map[capture.Key]capture.EpochRecord{k: rec(9, "a")},
		map[capture.Key]capture.EpochRecord{k: rec(9, "a")})
	if out[k] != rec(9, "a") || len(changed) != 0 {
		t.Fatalf("no conflict: %+v %v", out[k], changed)
	}
}
