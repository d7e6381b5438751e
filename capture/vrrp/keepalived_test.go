//go:build linux

package vrrp

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/netfault"
)

// Three keepalived in network namespaces, priorities 150/100/50, VRRPv3
// with 0.5 s adverts: the master-down interval of h2 is 3 × 0.5 s plus a
// skew of (256 − 100)/256 × 0.5 s ≈ 1.80 s, its skew alone ≈ 0.30 s.
func TestKeepalivedFailover(t *testing.T) {
	requireKeepalived(t)
	if testing.Short() {
		t.Skip("runs keepalived for about 15 s")
	}
	lab := newLab(t, 3)
	const advert = 500 * time.Millisecond
	h1 := newMember(t, lab, "h1", 150, 3, advert)
	h2 := newMember(t, lab, "h2", 100, 3, advert)
	h3 := newMember(t, lab, "h3", 50, 3, advert)
	all := []*member{h1, h2, h3}

	// Election: every member starts as backup; h1's master-down
	// interval is the shortest, so it wins.
	start := time.Now()
	until(t, h1, Master, 10*time.Second)
	t.Logf("election: h1 MASTER %v after start", time.Since(start).Round(time.Millisecond))
	settle(t, all, []State{Master, Backup, Backup}, 5*time.Second, 2*advert)
	for _, m := range all[1:] {
		drain(m)
	}

	// Planned stop: keepalived sends a priority-0 advert, so h2 takes
	// over after its skew, well before its master-down interval.
	stopped := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- h1.p.Stop() }()
	took := until(t, h2, Master, 5*time.Second).Sub(stopped)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Logf("planned stop (SIGTERM): h2 MASTER after %v", took.Round(time.Millisecond))
	if took >= 3*advert {
		t.Errorf("after a planned stop h2 took %v, no faster than the master-down interval (> %v): no priority-0 advert?", took, 3*advert)
	}
	// h1 says STOP, then its FIFO closes.
	until(t, h1, Stop, time.Second)
	until(t, h1, Unknown, 5*time.Second)
	settle(t, all, []State{Unknown, Master, Backup}, 5*time.Second, 2*advert)

	// h1 comes back and, with preempt, takes the role again.
	back := time.Now()
	h1.start(t)
	until(t, h1, Master, 10*time.Second)
	until(t, h2, Backup, 5*time.Second)
	t.Logf("preempt: h1 MASTER again %v after its restart", time.Since(back).Round(time.Millisecond))
	settle(t, all, []State{Master, Backup, Backup}, 5*time.Second, 2*advert)
	for _, m := range all {
		drain(m)
	}

	// Crash: neither a last advert nor a STOP line. h2 waits out its
	// master-down interval; h1's Watcher learns of the crash only from
	// its FIFO's closing, and says Unknown without a STOP.
	killed := time.Now()
	if err := h1.p.Kill(); err != nil {
		t.Fatal(err)
	}
	crashSeen := until(t, h1, Unknown, 5*time.Second).Sub(killed)
	took = until(t, h2, Master, 10*time.Second).Sub(killed)
	t.Logf("crash (SIGKILL): h1's Watcher UNKNOWN after %v, h2 MASTER after %v", crashSeen.Round(time.Millisecond), took.Round(time.Millisecond))
	// The master-down timer runs from the last advert h2 heard, up to
	// one interval before the kill.
	if took < 2*advert {
		t.Errorf("after a crash h2 took over in %v, before its master-down interval less one advert (> %v)", took, 2*advert)
	}
	settle(t, all, []State{Unknown, Master, Backup}, 5*time.Second, 2*advert)

	h1.start(t)
	until(t, h1, Master, 10*time.Second)
	settle(t, all, []State{Master, Backup, Backup}, 5*time.Second, 2*advert)
	for _, m := range all {
		drain(m)
	}

	// Partition: h1 alone keeps its role; h2 hears nothing and takes it
	// too. VRRP alone gives two masters, which is why on-prem capture is
	// documented as weaker than cloud capture.
	cut := time.Now()
	if err := lab.Partition(netfault.Isolate(lab.Hosts(), "h1")); err != nil {
		t.Fatal(err)
	}
	took = until(t, h2, Master, 10*time.Second).Sub(cut)
	t.Logf("partition: h2 MASTER beside h1 after %v", took.Round(time.Millisecond))
	settle(t, all, []State{Master, Master, Backup}, 5*time.Second, 4*advert)

	// Heal: h2 hears h1's higher priority and steps down.
	healed := time.Now()
	if err := lab.Heal(); err != nil {
		t.Fatal(err)
	}
	took = until(t, h2, Backup, 10*time.Second).Sub(healed)
	t.Logf("heal: h2 BACKUP after %v", took.Round(time.Millisecond))
	settle(t, all, []State{Master, Backup, Backup}, 5*time.Second, 4*advert)
	if s := h1.w.State(); s != Master {
		t.Fatalf("h1 %v after the heal, want MASTER", s)
	}
}

// What Render writes, keepalived's own parser accepts, and keepalived
// runs an instance without a virtual address.
func TestRenderAcceptedByKeepalived(t *testing.T) {
	requireKeepalived(t)
	lab := newLab(t, 2)
	dir := t.TempDir()
	base := Config{
		Instance:        "VI_1",
		Interface:       lab.LANDevice(),
		VirtualRouterID: 7,
		Priority:        100,
		AdvertInterval:  time.Second,
		Version:         2,
		UnicastSrc:      lab.IP("h1"),
		UnicastPeers:    []netip.Addr{lab.IP("h2")},
		NotifyFIFO:      filepath.Join(dir, "notify"),
		NoVIP:           true,
	}
	v3 := base
	v3.Version, v3.AdvertInterval, v3.Preempt, v3.CheckUnicastSrc = 3, 30*time.Millisecond, true, true
	vip := base
	vip.NoVIP, vip.VIPs = false, []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")}
	multicast := base
	multicast.UnicastSrc, multicast.UnicastPeers = netip.Addr{}, nil
	for name, cfg := range map[string]Config{"v2": base, "v3": v3, "vip": vip, "multicast": multicast} {
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		conf := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(conf, []byte(cfg.Render()), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := lab.Command("h1", "keepalived", "--config-test", "--use-file", conf).CombinedOutput()
		if err != nil {
			t.Errorf("%s: keepalived --config-test: %v\n%s\n%s", name, err, out, cfg.Render())
		}
	}
}
