package vrrp

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config describes one keepalived process running one VRRP instance, as
// ipfence's on-premises capture uses it: keepalived only elects; ipfence
// answers ARP for the address itself, so keepalived normally manages no
// virtual address at all (NoVIP).
type Config struct {
	// Instance names the vrrp_instance; the Watcher tracks it by this
	// name.
	Instance string
	// RouterID is global_defs' router_id, which names this keepalived in
	// its logs. Empty means "ipfence-<Instance>-<UnicastSrc or
	// Interface>", unique per member of an instance.
	RouterID string
	// Interface carries the adverts.
	Interface string
	// VirtualRouterID is the VRID, 1 to 255, the same on every member.
	VirtualRouterID int
	// Priority is 1 to 254; the highest wins. 255 means "address owner"
	// in VRRP, which ipfence never is.
	Priority int
	// AdvertInterval is the time between the master's adverts: whole
	// seconds from 1 to 255 for version 2, multiples of 10 ms from 10 ms
	// to 40.95 s for version 3. A backup takes over after three intervals
	// plus a skew of (256 - priority)/256 intervals without an advert,
	// and after the skew alone when the master says it stops.
	AdvertInterval time.Duration
	// Version is the VRRP version, 2 or 3.
	Version int
	// UnicastSrc is the source address of unicast adverts; the zero Addr
	// lets keepalived take the interface's primary address.
	UnicastSrc netip.Addr
	// UnicastPeers are the other members. Empty means multicast adverts
	// (224.0.0.18), which a partition made with nftables cuts as well.
	UnicastPeers []netip.Addr
	// NotifyFIFO is the absolute path of the notify FIFO, written as
	// vrrp_notify_fifo: only VRRP lines, never the health checker's.
	NotifyFIFO string
	// NoVIP means keepalived manages no address of its own. keepalived
	// 2.2.7 has no way to say so: an instance without virtual_ipaddress
	// is refused for VRRPv3 ("No VIP specified; at least one is
	// required") and accepted with a warning for VRRPv2, which also fails
	// --config-test (no_virtual_ipaddress arrives in 2.2.8). So Render
	// writes one placeholder, the same on every member of the instance:
	// PlaceholderVIP on lo with scope host. All of 127.0.0.0/8 is local
	// on lo already, so adding the address changes no route, scope host
	// keeps it from being picked as a source address, and lo sends no ARP.
	NoVIP bool
	// VIPs are the addresses keepalived itself adds on Interface while
	// master, when NoVIP is not set: for comparisons only, since ipfence
	// captures by proxy-ARP.
	VIPs []netip.Prefix
	// Preempt lets a higher-priority member that comes (back) take the
	// master role from a lower one. Without it a running master keeps
	// the role until it fails (nopreempt).
	Preempt bool
	// CheckUnicastSrc drops unicast adverts from addresses that are not
	// UnicastPeers (check_unicast_src), so that a stray sender on the LAN
	// cannot take part.
	CheckUnicastSrc bool
}

// Validate checks every field Render writes, and names the first one that
// is wrong.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("vrrp: config of instance %q: "+format, append([]any{c.Instance}, args...)...))
	}
	if !isToken(c.Instance) {
		bad("instance name: want letters, digits, '_', '-', '.'")
	}
	if c.RouterID != "" && !isToken(c.RouterID) {
		bad("router_id %q: want letters, digits, '_', '-', '.'", c.RouterID)
	}
	if !isToken(c.Interface) {
		bad("interface %q: want an interface name", c.Interface)
	}
	if c.VirtualRouterID < 1 || c.VirtualRouterID > 255 {
		bad("virtual_router_id %d: want 1 to 255", c.VirtualRouterID)
	}
	if c.Priority < 1 || c.Priority > 254 {
		bad("priority %d: want 1 to 254", c.Priority)
	}
	switch c.Version {
	case 2:
		if c.AdvertInterval < time.Second || c.AdvertInterval > 255*time.Second || c.AdvertInterval%time.Second != 0 {
			bad("advert interval %v: VRRPv2 wants whole seconds from 1 s to 255 s", c.AdvertInterval)
		}
	case 3:
		if c.AdvertInterval < 10*time.Millisecond || c.AdvertInterval > 4095*10*time.Millisecond || c.AdvertInterval%(10*time.Millisecond) != 0 {
			bad("advert interval %v: VRRPv3 wants multiples of 10 ms from 10 ms to 40.95 s", c.AdvertInterval)
		}
	default:
		bad("VRRP version %d: want 2 or 3", c.Version)
	}
	if c.UnicastSrc.IsValid() && !c.UnicastSrc.Is4() {
		bad("unicast source %v: want an IPv4 address", c.UnicastSrc)
	}
	for _, p := range c.UnicastPeers {
		if !p.Is4() {
			bad("unicast peer %v: want an IPv4 address", p)
		}
		if p == c.UnicastSrc {
			bad("unicast peer %v is the unicast source", p)
		}
	}
	if c.CheckUnicastSrc && len(c.UnicastPeers) == 0 {
		bad("check_unicast_src without unicast peers")
	}
	if !filepath.IsAbs(c.NotifyFIFO) || !isPath(c.NotifyFIFO) {
		bad("notify FIFO %q: want an absolute path without white space or quotes", c.NotifyFIFO)
	}
	switch {
	case c.NoVIP && len(c.VIPs) > 0:
		bad("NoVIP with %d VIPs", len(c.VIPs))
	case !c.NoVIP && len(c.VIPs) == 0:
		bad("no VIPs: set NoVIP, or give the addresses keepalived should manage")
	}
	for _, v := range c.VIPs {
		if !v.Addr().Is4() {
			bad("VIP %v: want an IPv4 prefix", v)
		}
	}
	return errors.Join(errs...)
}

// isToken reports whether s is a non-empty word keepalived's parser reads
// as one token, and that means nothing else to it.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// isPath reports whether keepalived reads s as one token: no white space,
// quotes, braces or comment characters.
func isPath(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n\"'{}#!")
}

// routerID returns RouterID or the default built from the instance and
// the source address or interface.
func (c Config) routerID() string {
	if c.RouterID != "" {
		return c.RouterID
	}
	who := c.Interface
	if c.UnicastSrc.IsValid() {
		who = c.UnicastSrc.String()
	}
	return "ipfence-" + c.Instance + "-" + who
}

// PlaceholderVIP returns the address Render gives keepalived to manage
// when NoVIP is set: 127.255.0.<VirtualRouterID>/32, so that the members
// of one instance agree on it (keepalived compares the addresses in the
// adverts it receives with its own).
func (c Config) PlaceholderVIP() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 255, 0, byte(c.VirtualRouterID)}), 32)
}

// Render returns keepalived.conf for c. It does not validate c: Start
// does, and a caller writing the file itself should call Validate first.
func (c Config) Render() string {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "# Written by ipfence (capture/vrrp). keepalived elects the master;")
	w(0, "# ipfence reads the notify FIFO and captures while MASTER.")
	w(0, "global_defs {")
	w(1, "router_id %s", c.routerID())
	// No notify scripts run, so no script_user or enable_script_security:
	// the FIFO carries every transition, in order.
	w(1, "vrrp_notify_fifo %s", c.NotifyFIFO)
	w(0, "}")
	w(0, "")
	w(0, "vrrp_instance %s {", c.Instance)
	// Every member starts as backup and the election decides: a member
	// that starts as master would announce itself before it has heard the
	// others.
	w(1, "state BACKUP")
	w(1, "interface %s", c.Interface)
	w(1, "virtual_router_id %d", c.VirtualRouterID)
	w(1, "priority %d", c.Priority)
	w(1, "version %d", c.Version)
	w(1, "advert_int %s", strconv.FormatFloat(c.AdvertInterval.Seconds(), 'f', -1, 64))
	if !c.Preempt {
		w(1, "nopreempt")
	}
	if c.UnicastSrc.IsValid() {
		w(1, "unicast_src_ip %s", c.UnicastSrc)
	}
	if len(c.UnicastPeers) > 0 {
		w(1, "unicast_peer {")
		for _, p := range c.UnicastPeers {
			w(2, "%s", p)
		}
		w(1, "}")
	}
	if c.CheckUnicastSrc {
		w(1, "check_unicast_src")
	}
	w(1, "virtual_ipaddress {")
	if c.NoVIP {
		w(2, "%s dev lo scope host", c.PlaceholderVIP())
	}
	for _, v := range c.VIPs {
		w(2, "%s dev %s", v, c.Interface)
	}
	w(1, "}")
	w(0, "}")
	return b.String()
}
