package monotime

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOfMatchesNow(t *testing.T) {
	before := Now()
	t0 := time.Now()
	after := Now()
	got := Of(t0)
	// Of(t0) reads the clock again, so it is exact only to the time between
	// the reads; a millisecond is thousands of times that.
	if got < before-int64(time.Millisecond) || got > after+int64(time.Millisecond) {
		t.Fatalf("Of = %d, want within [%d, %d]", got, before, after)
	}
	past := time.Now().Add(-time.Second)
	if d := Now() - Of(past); d < int64(time.Second) || d > int64(time.Second+50*time.Millisecond) {
		t.Fatalf("a time a second ago converts to %v ago", time.Duration(d))
	}
}

// The clock is shared between processes: a child's reading falls between
// two readings of the parent.
func TestSharedAcrossProcesses(t *testing.T) {
	if os.Getenv("MONOTIME_CHILD") == "1" {
		os.Stdout.WriteString(strconv.FormatInt(Now(), 10))
		os.Exit(0)
	}
	before := Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedAcrossProcesses$")
	cmd.Env = append(os.Environ(), "MONOTIME_CHILD=1")
	out, err := cmd.Output()
	after := Now()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("child printed %q", out)
	}
	if child < before || child > after {
		t.Fatalf("child's clock %d outside the parent's [%d, %d]", child, before, after)
	}
}

// A thread descheduled between the two clocks' reads must not shift the
// conversion: Pair keeps the narrowest of its brackets.
func TestPairSurvivesAPreemption(t *testing.T) {
	defer func(m func() int64, w func() time.Time) { monoNow, timeNow = m, w }(monoNow, timeNow)
	// A fake machine: both clocks advance 1 µs a read; the first bracket
	// loses 50 ms to a preemption between time.Now and the second
	// monotonic read.
	mono := int64(1_000_000_000)
	base := time.Now()
	reads := 0
	monoNow = func() int64 {
		reads++
		if reads == 2 {
			mono += int64(50 * time.Millisecond)
		}
		mono += 1000
		return mono
	}
	timeNow = func() time.Time { mono += 1000; return base.Add(time.Duration(mono - 1_000_000_000)) }
	c := Pair()
	// The truth: time base+d is monotonic 1e9+d.
	probe := base.Add(time.Second)
	want := int64(1_000_000_000) + int64(time.Second)
	if got := c.Of(probe); got < want-2000 || got > want+2000 {
		t.Fatalf("after a 50ms preemption in one bracket, Of is off by %v", time.Duration(got-want))
	}
}
