// Package monotime reads the system's monotonic clock (CLOCK_MONOTONIC), the
// one clock that every process on a Linux machine shares and that neither
// NTP steps nor an operator's date command moves. The harness and the cloud
// simulator run as separate processes; stamping events with this clock is
// what lets the harness place the simulator's mutations among its own
// client operations without trusting the wall clock.
package monotime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC exists on every Linux this builds for; a failure
		// here is a broken kernel interface, not an input error.
		panic("monotime: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// Of converts a time taken by time.Now in this process to CLOCK_MONOTONIC
// nanoseconds. Go keeps a monotonic reading in such times, so the
// conversion is exact to the pairing of the two clocks (see Pair); for a
// time without one (parsed, or restored from disk) it falls back to the
// wall clock's distance from now.
func Of(t time.Time) int64 { return Pair().Of(t) }

// Converter maps times taken by time.Now in this process to
// CLOCK_MONOTONIC, from one pairing of the two clocks. Converting many
// times with one Converter keeps their distances exact: two moments that
// were one stay one.
type Converter struct {
	ref  time.Time
	mono int64
}

// Of converts t.
func (c Converter) Of(t time.Time) int64 { return c.mono + int64(t.Sub(c.ref)) }

// pairings is how many bracketed readings Pair takes at most.
const pairings = 8

// clocks are the two clocks Pair reads; a test replaces them to act out
// a preemption between the reads.
var (
	monoNow = Now
	timeNow = time.Now
)

// Pair reads the two clocks together: time.Now bracketed by two readings
// of CLOCK_MONOTONIC, its monotonic value taken as the bracket's middle,
// and of several brackets the narrowest. A single pair of reads (one
// clock, then the other) is off by however long the thread was descheduled
// between them — milliseconds on a loaded machine, always in the same
// direction — and the harness places a simulator's mutations among its
// clients' reads by these values: an offset of a few milliseconds put a
// mutation before a read that had in fact begun first, and a correct
// system was called not linearizable. The bracket bounds the error by half
// its width, and the narrowest of several is a few microseconds unless the
// thread was descheduled in every one.
func Pair() Converter {
	var best Converter
	gap := int64(-1)
	for range pairings {
		a := monoNow()
		t := timeNow()
		b := monoNow()
		if gap < 0 || b-a < gap {
			gap, best = b-a, Converter{ref: t, mono: a + (b-a)/2}
		}
		if gap <= int64(10*time.Microsecond) {
			break
		}
	}
	return best
}
