//go:build linux

package vrrp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAnchors measures keepalived's own failover, the anchor that ipfence's
// on-premises capture adds its work to: two keepalived (priorities 150 and
// 100, preempt) in network namespaces, the master stopped (SIGTERM) or
// killed (SIGKILL, parent and VRRP child at once), and the time from the
// signal, sent at a random point of the advert interval, to the backup's
// Watcher delivering MASTER. Also the time until the old master's Watcher
// leaves MASTER (STOP, or UNKNOWN when its FIFO closes), which bounds the
// node's own release. It runs only when asked:
//
//	IPFENCE_VRRP_ANCHORS=1 go test ./capture/vrrp -run Anchors -v
//
// with IPFENCE_VRRP_ANCHOR_RUNS runs of each kind (default 10). VRRPv2 with
// 1 s adverts takes about two minutes, VRRPv3 with 0.1 s about fifteen
// seconds.
func TestAnchors(t *testing.T) {
	if os.Getenv("IPFENCE_VRRP_ANCHORS") != "1" {
		t.Skip("set IPFENCE_VRRP_ANCHORS=1 to measure keepalived's failover")
	}
	requireKeepalived(t)
	runs := 10
	if s := os.Getenv("IPFENCE_VRRP_ANCHOR_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("IPFENCE_VRRP_ANCHOR_RUNS=%q: want a positive number", s)
		}
		runs = n
	}
	var report []string
	for _, c := range []struct {
		version int
		advert  time.Duration
	}{{2, time.Second}, {3, 100 * time.Millisecond}} {
		name := fmt.Sprintf("VRRPv%d advert %v", c.version, c.advert)
		t.Run(fmt.Sprintf("v%d", c.version), func(t *testing.T) {
			lab := newLab(t, 2)
			h1 := newMember(t, lab, "h1", 150, c.version, c.advert)
			h2 := newMember(t, lab, "h2", 100, c.version, c.advert)
			// The backup's master-down interval and skew (RFC 3768, RFC
			// 5798), for comparison.
			skew := time.Duration(float64(c.advert) * (256 - 100) / 256)
			down := 3*c.advert + skew
			for _, kind := range []string{"stop", "kill"} {
				var takeover, release []time.Duration
				for i := range runs {
					if i > 0 || kind == "kill" {
						h1.start(t)
					}
					until(t, h1, Master, 10*down+10*time.Second)
					settle(t, []*member{h1, h2}, []State{Master, Backup}, 10*down+10*time.Second, 2*c.advert)
					drain(h1)
					drain(h2)
					// A crash strikes at any point of the advert
					// interval, and h2's master-down timer runs from
					// the last advert it heard: without the random
					// wait every kill would come just after an advert
					// (the settling above ends on one) and take the
					// longest.
					time.Sleep(rand.N(c.advert))
					at := time.Now()
					errc := make(chan error, 1)
					if kind == "stop" {
						go func() { errc <- h1.p.Stop() }()
					} else {
						go func() { errc <- h1.p.Kill() }()
					}
					left := make(chan time.Time, 1)
					go func() {
						for e := range h1.w.Changes() {
							if e.State != Master {
								left <- time.Now()
								return
							}
						}
					}()
					took := until(t, h2, Master, 10*down).Sub(at)
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
					select {
					case l := <-left:
						release = append(release, l.Sub(at))
					case <-time.After(5 * time.Second):
						t.Fatal("h1's Watcher still MASTER 5 s after its keepalived ended")
					}
					takeover = append(takeover, took)
					t.Logf("%s %s run %d: h2 MASTER after %v, h1 left MASTER after %v", name, kind, i+1, took.Round(100*time.Microsecond), release[len(release)-1].Round(100*time.Microsecond))
				}
				line := fmt.Sprintf("%-24s %-4s takeover median %7v p99 %7v min %7v max %7v | release median %7v max %7v | skew %v, master-down %v",
					name, kind, ms(median(takeover)), ms(percentile(takeover, 99)), ms(slices.Min(takeover)), ms(slices.Max(takeover)),
					ms(median(release)), ms(slices.Max(release)), ms(skew), ms(down))
				t.Log(line)
				report = append(report, line)
			}
		})
	}
	t.Logf("anchors over %d runs each (time from the signal to the Watcher's change):\n%s", runs, strings.Join(report, "\n"))
}

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// median returns the middle of ds (the mean of the two middle ones for an
// even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return m
}

// percentile returns the nearest-rank p-th percentile of ds: with ten
// values the 99th is the largest.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	k := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(k, 1)-1]
}

func TestPercentiles(t *testing.T) {
	millis := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	if got := median(millis(5, 1, 3)); got != 3*time.Millisecond {
		t.Errorf("median(5,1,3) = %v", got)
	}
	if got := median(millis(4, 1, 3, 2)); got != 2500*time.Microsecond {
		t.Errorf("median(4,1,3,2) = %v", got)
	}
	ten := millis(10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	if got := percentile(ten, 99); got != 10*time.Millisecond {
		t.Errorf("p99 of 1..10 = %v", got)
	}
	if got := percentile(ten, 50); got != 5*time.Millisecond {
		t.Errorf("p50 of 1..10 = %v", got)
	}
}
