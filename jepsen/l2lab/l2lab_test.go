//go:build linux

package l2lab_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/l2labtest"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/l2lab"
	"github.com/ipfence/ipfence/verify/netfault"
)

func TestNewRefusesHostCounts(t *testing.T) {
	for _, n := range []int{0, -1, l2lab.MaxHosts + 1} {
		if l, err := l2lab.New(l2lab.Options{Hosts: n}); err == nil {
			l.Close()
			t.Errorf("New with %d hosts: no error", n)
		} else if !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("New with %d hosts: error %q does not name the count", n, err)
		}
	}
}

// fetch connects from node to addr:port and returns what the server wrote.
func fetch(l *l2lab.Lab, node string, addr netip.Addr, port int, timeout time.Duration) (string, error) {
	var got string
	err := l.Do(node, func() error {
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(addr, uint16(port)).String(), timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// TestLab checks the layout: addresses, the workload namespaces, that the
// mobile address is unreachable until a host proxy-answers and routes it
// (set up here by hand, as the on-prem driver does), and partitions.
func TestLab(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 2})
	hosts := l.Hosts()
	if fmt.Sprint(hosts) != "[h1 h2]" || l.Observer() != "obs" || l.LANDevice() != "eth0" {
		t.Fatalf("hosts %v, observer %q, LAN %q", hosts, l.Observer(), l.LANDevice())
	}
	lan := netip.PrefixFrom(l.IP("h1"), 24).Masked()
	for _, n := range []string{"h1", "h2", "obs"} {
		if !lan.Contains(l.IP(n)) || len(l.MAC(n)) != 6 {
			t.Fatalf("%s: IP %s (LAN %s), MAC %s", n, l.IP(n), lan, l.MAC(n))
		}
	}
	if l.MAC("h1").String() == l.MAC("h2").String() {
		t.Fatalf("h1 and h2 share MAC %s", l.MAC("h1"))
	}
	if !lan.Contains(l.Address()) || l.Address().As4()[3] != 200 {
		t.Fatalf("Address %s is not .200 of %s", l.Address(), lan)
	}
	if l.WorkloadDevice("h1") != "wl0" || l.WorkloadDevice("nope") != "" {
		t.Fatalf("WorkloadDevice: %q, %q", l.WorkloadDevice("h1"), l.WorkloadDevice("nope"))
	}
	nh1, nh2 := l.WorkloadNextHop("h1"), l.WorkloadNextHop("h2")
	if nh1 == nh2 || lan.Contains(nh1) || !nh1.IsValid() {
		t.Fatalf("next hops %s, %s: want distinct, outside %s", nh1, nh2, lan)
	}
	if got := run(t, l.Command("h1", "cat", "/proc/sys/net/ipv4/ip_forward")); strings.TrimSpace(got) != "1" {
		t.Fatalf("h1 ip_forward = %q", got)
	}
	if got := run(t, l.Command("wl-h2", "ip", "-4", "-o", "addr", "show", "dev", "eth0")); !strings.Contains(got, l.Address().String()+"/32") || !strings.Contains(got, nh2.String()+"/30") {
		t.Fatalf("wl-h2 addresses:\n%s", got)
	}
	if err := l.Do("wl-h9", func() error { return nil }); err == nil {
		t.Fatal("Do in wl-h9: no error")
	}

	const port = 7000
	for _, h := range hosts {
		if err := l.ServeWorkload(h, port); err != nil {
			t.Fatal(err)
		}
	}
	// The workload answers locally, and from its host through the
	// host's /30.
	if got, err := fetch(l, "wl-h2", l.Address(), port, time.Second); err != nil || got != "h2" {
		t.Fatalf("from wl-h2 itself: %q, %v", got, err)
	}
	if _, err := fetch(l, "obs", l.Address(), port, 300*time.Millisecond); err == nil {
		t.Fatal("obs reached the address before any host proxy-answers for it")
	}

	// What the on-prem driver does, by hand, on h2.
	a := l.Address().String()
	run(t, l.Command("h2", "ip", "route", "add", a+"/32", "dev", "wl0"))
	run(t, l.Command("h2", "ip", "neigh", "add", "proxy", a, "dev", "eth0"))
	if got, err := fetch(l, "obs", l.Address(), port, 2*time.Second); err != nil || got != "h2" {
		t.Fatalf("obs via h2's proxy-ARP: %q, %v", got, err)
	}
	neigh := run(t, l.Command("obs", "ip", "neigh", "show", a))
	if !strings.Contains(neigh, l.MAC("h2").String()) {
		t.Fatalf("obs neighbour entry for %s: %q, want h2's MAC %s", a, neigh, l.MAC("h2"))
	}

	// Partitions cut hosts from each other, never the observer.
	if err := l.Partition(netfault.Isolate([]string{"h1", "h2", "obs"}, "h1")); err == nil {
		t.Fatal("a grudge naming obs was accepted")
	}
	// A server on h2's own address, as a capture daemon's would be.
	const selfPort = 7003
	var ln net.Listener
	err := l.Do("h2", func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(l.IP("h2"), selfPort).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "h2 itself")
			c.Close()
		}
	}()
	if got, err := fetch(l, "h1", l.IP("h2"), selfPort, time.Second); err != nil || got != "h2 itself" {
		t.Fatalf("h1 to h2 before the partition: %q, %v", got, err)
	}
	if err := l.Partition(netfault.Isolate(hosts, "h2")); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch(l, "h1", l.IP("h2"), selfPort, 300*time.Millisecond); err == nil {
		t.Fatal("h1 reached h2 through the partition")
	}
	if got, err := fetch(l, "obs", l.IP("h2"), selfPort, time.Second); err != nil || got != "h2 itself" {
		t.Fatalf("obs to h2 during the partition: %q, %v", got, err)
	}
	if got, err := fetch(l, "obs", l.Address(), port, time.Second); err != nil || got != "h2" {
		t.Fatalf("obs to the address during the partition: %q, %v", got, err)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if got, err := fetch(l, "h1", l.IP("h2"), selfPort, 2*time.Second); err != nil || got != "h2 itself" {
		t.Fatalf("h1 to h2 after healing: %q, %v", got, err)
	}
}

// TestDoPanics checks that a panic in f comes back as an error, so that a
// test's clean-up still runs, and that the thread is usable afterwards.
func TestDoPanics(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 1})
	err := l.Do("h1", func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Do with a panic: %v", err)
	}
	for range 20 {
		err := l.Do("obs", func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			if ifi.HardwareAddr.String() != l.MAC("obs").String() {
				return fmt.Errorf("eth0 is %s, want the observer's %s", ifi.HardwareAddr, l.MAC("obs"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestClose checks that Close kills commands, stops servers, removes every
// namespace and may be repeated.
func TestClose(t *testing.T) {
	prefix := fmt.Sprintf("l2close%d", os.Getpid())
	l := l2labtest.New(t, l2lab.Options{Prefix: prefix, Hosts: 1})
	sleep := l.Command("wl-h1", "sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if err := l.ServeWorkload("h1", 7001); err != nil {
		t.Fatal(err)
	}
	if before := run(t, exec.Command("ip", "netns", "list")); !strings.Contains(before, prefix+"-wl-h1") {
		t.Fatalf("no namespace %s-wl-h1 in:\n%s", prefix, before)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleep.Wait() }()
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("sleep after Close: %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleep still runs 5s after Close")
	}
	after := run(t, exec.Command("ip", "netns", "list"))
	for line := range strings.Lines(after) {
		if strings.HasPrefix(line, prefix+"-") {
			t.Errorf("namespace left after Close: %s", line)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.ServeWorkload("h1", 7002); err == nil {
		t.Fatal("ServeWorkload after Close: no error")
	}
}

// TestStaleLab builds a lab over what a killed run of the same prefix left
// (namespaces for the bridge, a host and a workload, nobody holding the
// prefix): before, New failed with "ip netns add <prefix>-br: ...
// File exists". The stale namespaces go, the lab works.
func TestStaleLab(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (network namespaces)")
	}
	prefix := fmt.Sprintf("l2stale%d", os.Getpid())
	for _, ns := range []string{prefix + "-br", prefix + "-h1", prefix + "-wl-h1"} {
		run(t, exec.Command("ip", "netns", "add", ns))
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	l := l2labtest.New(t, l2lab.Options{Prefix: prefix, Hosts: 1})
	if err := l.ServeWorkload("h1", 7003); err != nil {
		t.Fatal(err)
	}
	// The route the driver would add: the workload is then reachable
	// from h1 itself.
	run(t, l.Command("h1", "ip", "route", "add", l.Address().String()+"/32", "via", l.WorkloadNextHop("h1").String(), "dev", l.WorkloadDevice("h1")))
	err := l.Do("h1", func() error {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(l.Address().String(), "7003"), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "h1" {
			return fmt.Errorf("read %q, %v; want h1", b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(run(t, exec.Command("ip", "netns", "list"))) {
		if strings.HasPrefix(line, prefix+"-") {
			t.Errorf("namespace left after Close: %s", line)
		}
	}
}
