package daemon_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFailover measures failover time: the holder is killed with
// SIGKILL, and the clock stops when every address is visible on the next
// member's NIC at the simulator. Heartbeat 200 ms, TTL 600 ms, reconcile
// 500 ms, 4 addresses. Each run then restarts the killed node and undrains
// it, so that the next run kills the holder again.
//
//	go test ./capture/daemon -run '^$' -bench Failover -benchtime 20x
func BenchmarkFailover(b *testing.B) {
	c := startCluster(b, settings{nodes: 3, addresses: 4})
	c.waitAllOn("eni-n1", generous)
	var times []time.Duration
	for b.Loop() {
		c.signal("n1", syscall.SIGKILL)
		times = append(times, c.waitAllOn("eni-n2", generous))
		b.StopTimer()
		c.start("n1")
		c.intent("n2", "undrain", "n1")
		c.waitAllOn("eni-n1", generous)
		b.StartTimer()
	}
	slices.Sort(times)
	median := times[len(times)/2]
	p99 := times[min(len(times)-1, len(times)*99/100)]
	b.ReportMetric(median.Seconds(), "median-s")
	b.ReportMetric(p99.Seconds(), "p99-s")
	b.ReportMetric(times[len(times)-1].Seconds(), "max-s")
	checkFence(b, c.mutations())
}

// BenchmarkIdleCPU measures the CPU an idle 3-node cluster holding 1,000
// addresses uses: each node's user and system time over 10 seconds, as a
// percentage of one core.
//
//	go test ./capture/daemon -run '^$' -bench IdleCPU -benchtime 1x
func BenchmarkIdleCPU(b *testing.B) {
	c := startCluster(b, settings{nodes: 3, addresses: 1000})
	c.waitAllOn("eni-n1", 2*time.Minute)
	// Let the catch-up after the captures settle.
	time.Sleep(3 * time.Second)
	const window = 10 * time.Second
	for b.Loop() {
		before := map[string]float64{}
		for n, p := range c.procs {
			before[n] = cpuSeconds(b, p.Process.Pid)
		}
		time.Sleep(window)
		worst := 0.0
		for n, p := range c.procs {
			pct := 100 * (cpuSeconds(b, p.Process.Pid) - before[n]) / window.Seconds()
			b.ReportMetric(pct, n+"-cpu-%")
			worst = max(worst, pct)
		}
		b.ReportMetric(worst, "worst-cpu-%")
	}
}

// cpuSeconds reads a process's user plus system time from /proc.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks; 100 per second on Linux
}

// BenchmarkFailover1000 is BenchmarkFailover with a pool of 1,000
// addresses: the clock runs from the holder's SIGKILL until all 1,000 are
// on the next member's NIC at the simulator, detection (TTL 600 ms)
// included. It also reports, from n2's log, detect-s (the kill until n2
// logs n1 stale) and move-s (from then until all 1,000 are on n2's NIC):
// the part batching speeds up.
//
//	go test ./capture/daemon -run '^$' -bench Failover1000 -benchtime 3x
func BenchmarkFailover1000(b *testing.B) {
	c := startCluster(b, settings{nodes: 3, addresses: 1000})
	c.waitAllOn("eni-n1", 5*time.Minute)
	var times, detect, move []time.Duration
	for b.Loop() {
		c.mu.Lock()
		mark := c.outputs["n2"].Len()
		c.mu.Unlock()
		killed := time.Now()
		c.signal("n1", syscall.SIGKILL)
		took := c.waitAllOn("eni-n2", 5*time.Minute)
		times = append(times, took)
		c.mu.Lock()
		out := c.outputs["n2"].String()[mark:]
		c.mu.Unlock()
		if at, ok := loggedAt(out, `msg="member stale"`, "member=n1"); ok {
			detect = append(detect, at.Sub(killed))
			move = append(move, killed.Add(took).Sub(at))
		}
		b.StopTimer()
		c.start("n1")
		c.intent("n2", "undrain", "n1")
		c.waitAllOn("eni-n1", 5*time.Minute)
		b.StartTimer()
	}
	report := func(ds []time.Duration, name string) {
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		b.ReportMetric(ds[len(ds)/2].Seconds(), name)
	}
	report(times, "median-s")
	report(detect, "detect-s")
	report(move, "move-s")
	b.ReportMetric(slices.Max(times).Seconds(), "max-s")
	checkFence(b, c.mutations())
}

// loggedAt finds the first log line with every word and returns its
// time= field.
func loggedAt(out string, words ...string) (time.Time, bool) {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if !ok {
			continue
		}
		f, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		if t, err := time.Parse(time.RFC3339Nano, f); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// BenchmarkStatus1000 measures GET /v1/status (what ipfence ctl status
// shows) on a node of a 3-node cluster holding 1,000 addresses: every
// address with its epoch line and where the simulator says it is.
//
//	go test ./capture/daemon -run '^$' -bench Status1000 -benchtime 20x
func BenchmarkStatus1000(b *testing.B) {
	c := startCluster(b, settings{nodes: 3, addresses: 1000})
	c.waitAllOn("eni-n1", 5*time.Minute)
	for b.Loop() {
		st := c.status("n2")
		if len(st.Addresses) != 1000 {
			b.Fatalf("%d addresses in the status", len(st.Addresses))
		}
		for _, a := range st.Addresses {
			if a.ProviderError != "" || a.ProviderHolder != "n1" {
				b.Fatalf("%+v", a)
			}
		}
	}
}
