package loopback

import (
	"net"
	"slices"
	"strconv"
	"testing"
)

// The ports are distinct, free, and below the kernel's ephemeral range
// where it leaves room (as it does by default: 32768 and up).
func TestFreePortsBelowEphemeral(t *testing.T) {
	ps, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	sorted := slices.Clone(ps)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != 20 {
		t.Fatalf("ports %v are not distinct", ps)
	}
	for _, p := range ps {
		if low-lowestPort >= 1000 && (p < lowestPort || p >= low) {
			t.Fatalf("port %d is outside [%d, %d)", p, lowestPort, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
	if low == 0 {
		t.Logf("no ephemeral range to read: the kernel picked %v", ps)
	}
}
