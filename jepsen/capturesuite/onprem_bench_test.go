//go:build linux

package capturesuite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/verify/netfault"
	"time"
)

// BenchmarkOnPremMove times moves: the master's keepalived is stopped
// (SIGTERM: a planned move) or killed (SIGKILL: a crash), and the clock
// runs until the observer's neighbour
// entry for the address names the next host's MAC; then the old master
// comes back and takes the address back (not timed). With ipfence the
// address is captured by proxy-ARP under keepalived's authority; with
// keepalived alone it is keepalived's own virtual address, for comparison
// under the same VRRP settings. It reports the median and p99 in ms:
//
//	go test ./jepsen/capturesuite -run '^$' -bench OnPremMove -benchtime 20x -timeout 30m
func BenchmarkOnPremMove(b *testing.B) {
	for _, s := range []struct {
		name    string
		version int
		advert  time.Duration
		crash   bool
	}{
		{"vrrp3-advert100ms/stop", 3, 100 * time.Millisecond, false},
		{"vrrp2-advert1s/stop", 2, time.Second, false},
		{"vrrp3-advert100ms/crash", 3, 100 * time.Millisecond, true},
	} {
		for _, mode := range []string{"ipfence", "keepalived-alone"} {
			b.Run(s.name+"/"+mode, func(b *testing.B) {
				c := onpremFor(b, onpremOptions{version: s.version, advert: s.advert, vip: mode == "keepalived-alone", prefix: "ob"})
				n := observer(b, c)
				if mode == "ipfence" {
					reach(b, c, "h1", 30*time.Second)
				} else {
					// keepalived's address is local on its master, with
					// no workload behind it: a refused connection still
					// makes the observer resolve the address.
					deadline := time.Now().Add(30 * time.Second)
					for mac, _ := n.MAC(); mac == nil && time.Now().Before(deadline); mac, _ = n.MAC() {
						_, _ = c.lab.Fetch(workloadPort, 200*time.Millisecond)
						time.Sleep(100 * time.Millisecond)
					}
				}
				waitMAC(b, c, n, "h1", time.Now(), 10*time.Second)
				var took []time.Duration
				for b.Loop() {
					time.Sleep(neighLocktime)
					if s.crash {
						// A crash comes at any point of the advert
						// interval; a fixed delay after the last move
						// would pin it to one phase and bias the times
						// by up to an interval.
						time.Sleep(rand.N(s.advert))
					}
					start := time.Now()
					stopped := make(chan error, 1)
					go func() {
						if !s.crash {
							stopped <- c.stopKeepalived("h1")
							return
						}
						// SIGKILL: keepalived writes nothing and sends no
						// priority-0 advert; the backup waits out the
						// master-down interval.
						c.mu.Lock()
						ka := c.kas["h1"]
						delete(c.kas, "h1")
						c.mu.Unlock()
						stopped <- ka.Kill()
					}()
					took = append(took, waitMAC(b, c, n, "h2", start, 10*time.Second))
					if err := <-stopped; err != nil {
						b.Fatal(err)
					}
					if err := c.startKeepalived("h1"); err != nil {
						b.Fatal(err)
					}
					waitMAC(b, c, n, "h1", time.Now(), 20*time.Second)
				}
				slices.Sort(took)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(took[len(took)/2]), "median-ms")
				b.ReportMetric(ms(took[min(len(took)-1, len(took)*99/100)]), "p99-ms")
				b.Logf("%s: %d moves, median %v, p99 %v, all %v", mode, len(took), took[len(took)/2], took[min(len(took)-1, len(took)*99/100)], fmt.Sprint(took))
			})
		}
	}
}

// BenchmarkOnPremHeal partitions h1 (the master) from the other hosts
// until h2 is master too and the observer follows h2, then heals, and
// times how long the observer's neighbour entry takes to name h1 again
// (h1 keeps the mastership by priority). keepalived alone announces
// nothing when the old master's advert wins the race, so the observer
// keeps sending to h2, which dropped the address, until its entry fails
// its unicast probes (a client keeps connecting meanwhile);
// ipfence announces again whichever way the race goes. It reports the
// worst gap and how many heals took over a second:
//
//	go test ./jepsen/capturesuite -run '^$' -bench OnPremHeal -benchtime 10x -timeout 30m
func BenchmarkOnPremHeal(b *testing.B) {
	for _, mode := range []string{"ipfence", "keepalived-alone"} {
		b.Run(mode, func(b *testing.B) {
			c := onpremFor(b, onpremOptions{vip: mode == "keepalived-alone", prefix: "oh"})
			n := observer(b, c)
			deadline := time.Now().Add(30 * time.Second)
			for mac, _ := n.MAC(); mac == nil && time.Now().Before(deadline); mac, _ = n.MAC() {
				_, _ = c.lab.Fetch(workloadPort, 200*time.Millisecond)
				time.Sleep(100 * time.Millisecond)
			}
			waitMAC(b, c, n, "h1", time.Now(), 10*time.Second)
			var gaps []time.Duration
			over := 0
			for b.Loop() {
				time.Sleep(neighLocktime)
				if err := c.lab.Partition(netfault.Isolate(c.hosts, "h1")); err != nil {
					b.Fatal(err)
				}
				waitMAC(b, c, n, "h2", time.Now(), 10*time.Second)
				time.Sleep(neighLocktime)
				healed := time.Now()
				if err := c.lab.Heal(); err != nil {
					b.Fatal(err)
				}
				// A client keeps sending, as clients do: a neighbour
				// entry nobody uses is never checked again.
				done := make(chan struct{})
				go func() {
					for {
						select {
						case <-done:
							return
						case <-time.After(50 * time.Millisecond):
							_, _ = c.lab.Fetch(workloadPort, 200*time.Millisecond)
						}
					}
				}()
				gap := waitMAC(b, c, n, "h1", healed, 2*time.Minute)
				close(done)
				gaps = append(gaps, gap)
				if gap > time.Second {
					over++
				}
			}
			slices.Sort(gaps)
			b.ReportMetric(float64(gaps[len(gaps)-1].Microseconds())/1000, "worst-ms")
			b.ReportMetric(float64(over), "heals-over-1s")
			b.Logf("%s: %d heals, gaps %v", mode, len(gaps), gaps)
		})
	}
}
