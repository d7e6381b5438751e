package vrrp

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		Instance:        "VI_1",
		Interface:       "eth0",
		VirtualRouterID: 51,
		Priority:        150,
		AdvertInterval:  100 * time.Millisecond,
		Version:         3,
		UnicastSrc:      netip.MustParseAddr("10.0.0.1"),
		UnicastPeers:    []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")},
		NotifyFIFO:      "/run/ipfence/vrrp.fifo",
		NoVIP:           true,
		Preempt:         true,
		CheckUnicastSrc: true,
	}
}

func TestRender(t *testing.T) {
	want := `# Written by ipfence (capture/vrrp). keepalived elects the master;
# ipfence reads the notify FIFO and captures while MASTER.
global_defs {
    router_id ipfence-VI_1-10.0.0.1
    vrrp_notify_fifo /run/ipfence/vrrp.fifo
}

vrrp_instance VI_1 {
    state BACKUP
    interface eth0
    virtual_router_id 51
    priority 150
    version 3
    advert_int 0.1
    unicast_src_ip 10.0.0.1
    unicast_peer {
        10.0.0.2
        10.0.0.3
    }
    check_unicast_src
    virtual_ipaddress {
        127.255.0.51/32 dev lo scope host
    }
}
`
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Render(); got != want {
		t.Errorf("Render:\n%s\nwant:\n%s", got, want)
	}

	// VRRPv2, no preempt, keepalived's own address, multicast, a
	// router_id given.
	c = validConfig()
	c.Version, c.AdvertInterval, c.Preempt = 2, 2*time.Second, false
	c.NoVIP, c.VIPs = false, []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32")}
	c.UnicastSrc, c.UnicastPeers, c.CheckUnicastSrc = netip.Addr{}, nil, false
	c.RouterID = "edge-1"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got := c.Render()
	for _, line := range []string{"\n    router_id edge-1\n", "\n    version 2\n", "\n    advert_int 2\n", "\n    nopreempt\n", "\n        192.0.2.7/32 dev eth0\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("Render lacks %q:\n%s", line, got)
		}
	}
	for _, word := range []string{"unicast", "127.255.0.", "check_unicast_src"} {
		if strings.Contains(got, word) {
			t.Errorf("Render has %q:\n%s", word, got)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		change func(*Config)
		says   string
	}{
		{func(c *Config) { c.Instance = "" }, "instance name"},
		{func(c *Config) { c.Instance = "VI 1" }, "instance name"},
		{func(c *Config) { c.RouterID = "a{b" }, `router_id "a{b"`},
		{func(c *Config) { c.Interface = "" }, `interface ""`},
		{func(c *Config) { c.VirtualRouterID = 0 }, "virtual_router_id 0"},
		{func(c *Config) { c.VirtualRouterID = 256 }, "virtual_router_id 256"},
		{func(c *Config) { c.Priority = 0 }, "priority 0"},
		{func(c *Config) { c.Priority = 255 }, "priority 255"},
		{func(c *Config) { c.Version = 1 }, "VRRP version 1"},
		{func(c *Config) { c.AdvertInterval = 5 * time.Millisecond }, "advert interval 5ms: VRRPv3"},
		{func(c *Config) { c.AdvertInterval = 105 * time.Millisecond }, "advert interval 105ms: VRRPv3"},
		{func(c *Config) { c.AdvertInterval = 41 * time.Second }, "advert interval 41s: VRRPv3"},
		{func(c *Config) { c.Version = 2 }, "advert interval 100ms: VRRPv2"},
		{func(c *Config) { c.Version, c.AdvertInterval = 2, 1500*time.Millisecond }, "advert interval 1.5s: VRRPv2"},
		{func(c *Config) { c.Version, c.AdvertInterval = 2, 256*time.Second }, "advert interval 4m16s: VRRPv2"},
		{func(c *Config) { c.UnicastSrc = netip.MustParseAddr("2001:db8::1") }, "unicast source 2001:db8::1"},
		{func(c *Config) { c.UnicastPeers[1] = netip.Addr{} }, "unicast peer invalid IP"},
		{func(c *Config) { c.UnicastPeers[0] = c.UnicastSrc }, "unicast peer 10.0.0.1 is the unicast source"},
		{func(c *Config) { c.UnicastPeers = nil }, "check_unicast_src without unicast peers"},
		{func(c *Config) { c.NotifyFIFO = "vrrp.fifo" }, `notify FIFO "vrrp.fifo"`},
		{func(c *Config) { c.NotifyFIFO = "/run/my fifo" }, `notify FIFO "/run/my fifo"`},
		{func(c *Config) { c.VIPs = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")} }, "NoVIP with 1 VIPs"},
		{func(c *Config) { c.NoVIP = false }, "no VIPs: set NoVIP"},
		{func(c *Config) { c.NoVIP, c.VIPs = false, []netip.Prefix{netip.MustParsePrefix("2001:db8::1/128")} }, "VIP 2001:db8::1/128"},
	} {
		cfg := validConfig()
		cfg.UnicastPeers = append([]netip.Addr(nil), cfg.UnicastPeers...)
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil {
			t.Errorf("Validate accepted a config that should say %q:\n%s", c.says, cfg.Render())
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "vrrp: config of instance") {
			t.Errorf("Validate: %v; want it to say %q", err, c.says)
		}
	}
}
