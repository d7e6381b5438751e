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
// conversion is exact to the few nanoseconds between the two clock reads;
// for a time without one (parsed, or restored from disk) it falls back to
// the wall clock's distance from now.
func Of(t time.Time) int64 {
	return Now() - int64(time.Since(t))
}
