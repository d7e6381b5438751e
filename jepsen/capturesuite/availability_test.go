package capturesuite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// readNone is a completed read of address that found no holder, returning
// at t seconds.
func readNone(p history.Process, address string, t float64) []history.Event {
	v := map[string]history.Value{"address": address}
	return []history.Event{
		{Process: p, Type: history.Invoke, F: "read", Value: v, Time: int64((t - 0.01) * float64(sec))},
		{Process: p, Type: history.OK, F: "read", Value: map[string]history.Value{"address": address, "holder": nil}, Time: int64(t * float64(sec))},
	}
}

func TestAvailability(t *testing.T) {
	// A pause of n2 from 10 s to 14 s (the window runs from the start's
	// invoke to the stop's completion).
	pause := []history.Event{
		nem("start-pause", history.Invoke, map[string]any{"node": "n2"}, 10), nem("start-pause", history.Info, "n2", 10),
		nem("stop-pause", history.Invoke, nil, 14), nem("stop-pause", history.Info, "resumed n2", 14),
	}
	a, b := "10.0.1.10", "10.0.1.11"
	cases := []struct {
		name      string
		mutations []mutationRecord
		reads     []history.Event
		valid     linear.Verdict
		// noHolder, inside and outside in ms; the periods in words.
		noHolder, inside, outside float64
		words                     []string
	}{
		{
			name: "moves with reassignment leave no gap",
			mutations: []mutationRecord{
				rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
				rec(5, "assign-secondary-ip", "eni-n2", a, 2, "eni-n1"),
				rec(6, "ensure-forwarding-disabled", "eni-n1", a, 2, ""),
				// A release on a NIC that no longer holds the address.
				rec(7, "unassign-secondary-ip", "eni-n1", a, 2, ""),
			},
			valid: linear.True,
		},
		{
			// The planted bug's harm: a stale unassign strips the holder at
			// 12 s, and the address is on no NIC until 24.5 s: 2 s inside
			// the pause, 10.5 s outside it.
			name: "outage outside faults is a failure",
			mutations: []mutationRecord{
				rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
				rec(12, "unassign-secondary-ip", "eni-n1", a, 1, ""),
				rec(24.5, "assign-secondary-ip", "eni-n3", a, 3, ""),
			},
			reads:    append(append(readNone(0, a, 12.5), readNone(1, a, 20)...), readNone(0, a, 26)...),
			valid:    linear.False,
			noHolder: 12500, inside: 2000, outside: 10500,
			words: []string{"10.0.1.10 had no holder from 12.000s to 24.500s (12.5s: 10.5s outside fault windows); 2 reads found none, over the 10s bound"},
		},
		{
			// The desired holder paused: the address waits for it inside
			// the fault and is taken 8.2 s after the heal. Reported, not a
			// failure.
			name: "outage inside a fault and briefly after",
			mutations: []mutationRecord{
				rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
				rec(11, "unassign-secondary-ip", "eni-n1", a, 2, ""),
				rec(22.2, "assign-secondary-ip", "eni-n2", a, 2, ""),
			},
			valid:    linear.True,
			noHolder: 11200, inside: 3000, outside: 8200,
		},
		{
			// b loses its only NIC at 30 s and the record ends at 41 s
			// with b still on none: 11 s outside faults.
			name: "open outage at the end of the record",
			mutations: []mutationRecord{
				rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
				rec(1, "assign-secondary-ip", "eni-n1", b, 1, ""),
				rec(30, "unassign-secondary-ip", "eni-n1", b, 1, ""),
				rec(41, "ensure-forwarding-enabled", "eni-n1", a, 1, ""),
			},
			valid:    linear.False,
			noHolder: 11000, outside: 11000,
			words: []string{"10.0.1.11 had no holder from 30.000s to the end of the record (11s: 11s outside fault windows), over the 10s bound"},
		},
		{
			// Two NICs held a (a broken provider); one letting go leaves
			// the other: no gap.
			name: "losing one of two holders is no outage",
			mutations: []mutationRecord{
				rec(1, "assign-secondary-ip", "eni-n1", a, 1, ""),
				rec(2, "assign-secondary-ip", "eni-n2", a, 2, ""),
				rec(3, "unassign-secondary-ip", "eni-n1", a, 2, ""),
			},
			valid: linear.True,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := append(append([]history.Event{}, pause...), c.reads...)
			res := availability(&collected{mutations: c.mutations}).Check(context.Background(), run(t, events))
			got := fmt.Sprintf("%v %v %v %v", res.Valid, res.Fields["no_holder_ms"], res.Fields["inside_faults_ms"], res.Fields["outside_faults_ms"])
			want := fmt.Sprintf("%v %v %v %v", c.valid, c.noHolder, c.inside, c.outside)
			if got != want {
				t.Fatalf("verdict and ms %s, want %s: %+v", got, want, res.Fields)
			}
			findings := res.Fields["findings"].([]string)
			if strings.Join(findings, "\n") != strings.Join(c.words, "\n") || res.Fields["findings_total"] != len(c.words) {
				t.Fatalf("findings %q, want %q", findings, c.words)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	s := func(x float64) int64 { return int64(x * float64(sec)) }
	d := func(x float64) time.Duration { return time.Duration(x * float64(sec)) }
	// Overlapping and nested windows count once; a window never stopped
	// runs to the end.
	pause := []history.Event{
		nem("start-pause", history.Invoke, nil, 1), nem("start-pause", history.Info, "n2", 1),
		nem("start-kill", history.Invoke, nil, 2), nem("start-kill", history.Info, "n1", 2),
		nem("stop-pause", history.Invoke, nil, 4), nem("stop-pause", history.Info, "", 4),
		nem("stop-kill", history.Invoke, nil, 3), nem("stop-kill", history.Info, "", 3),
		nem("start-partition", history.Invoke, nil, 8), nem("start-partition", history.Info, "halves", 8),
	}
	faults := run(t, pause).Faults
	for _, c := range []struct {
		start, end, want float64
	}{{0, 10, 5}, {0, 1, 0}, {2.5, 3.5, 1}, {3.5, 9, 1.5}, {5, 7, 0}} {
		if got := overlap(s(c.start), s(c.end), faults); got != d(c.want) {
			t.Errorf("overlap [%v, %v) = %v, want %v", c.start, c.end, got, d(c.want))
		}
	}
}
