//go:build linux

// Package onprem is the on-premises capture driver: a host captures a mobile
// /32 by answering ARP for it on its LAN interface (proxy-ARP) and routing
// it on to where the address really lives (a workload device: a veth, a
// tunnel, a bridge towards VMs), and announces the move with gratuitous ARP
// (GARP) so that neighbours that cached the old holder's MAC switch at once.
//
// # What acquiring does
//
// The Linux kernel answers an ARP request for an address that is not its
// own when three things hold: a proxy neighbour entry for the address on
// the interface the request came in by, forwarding on that interface, and a
// route to the address that leaves by another interface. So Assign, in this
// order:
//
//  1. sets net.ipv4.ip_forward=1, net.ipv4.conf.<LAN>.forwarding=1 and
//     net.ipv4.neigh.<LAN>.proxy_delay=0 (the kernel otherwise delays its
//     answer to a broadcast request by a random time up to 0.8 s);
//  2. installs the route <address>/32 towards the workload device, marked
//     with protocol RouteProtocol so that the driver recognises its own;
//  3. adds the proxy neighbour entry for the address on the LAN interface;
//  4. sends GARPCount gratuitous ARP requests on the LAN at once and as
//     many again GARPRepeatAfter later, in the background, as keepalived
//     does: a neighbour that missed the first burst (a switch port still
//     coming up) learns from the second.
//
// A change is made only if the readiness check the call's context carries
// (gate.WithReady) passes right before it, after the driver's own checks:
// before the sysctls and the route, again before the proxy entry, and
// before every gratuitous ARP frame (Assign's and Announce's); Unassign
// asks before it removes anything. A refusal wraps gate.ErrNotReady. A
// node paused between the executor's check and the kernel calls rechecks
// when it wakes and sends nothing. An Assign refused after it added the
// proxy entry but before any GARP left takes the entry out again (unless
// the host answered for the address before the call), so that a refused
// Assign leaves the host answering only as it did before. The second
// burst, which Assign schedules, carries no readiness (the pass that asked
// for it is over by then); Unassign cancels it.
//
// The route comes before the proxy entry and Unassign removes them the
// other way round, so that whatever a crash leaves behind, the kernel
// never answers for an address it cannot route on. A proxy entry counts
// as the driver's only together with its route: the kernel keeps no owner
// mark on proxy entries, and one without the driver's route is left alone.
//
// # What it cannot do
//
// A driver acts on its own host only. Another host's proxy-ARP is neither
// visible nor revocable from here, so there is no atomic move: Assign's
// reassign flag has no effect, and two hosts that both acquire both answer
// (a split brain, which capture/provider/onprem/arpwatch and `ipfence doctor` detect).
// Authority must come from elsewhere (VRRP mastership in the capture
// design); a non-master must not acquire.
//
// That is also why this driver does not run the providertest contract
// suite: the suite assumes one global view of a cloud (an address on one of
// several NICs, Describe seeing all of them, ErrAssignedElsewhere, atomic
// reassignment), which no single host has of a LAN. Its tests check the
// on-premises semantics in a network-namespace lab instead.
//
// # Namespaces
//
// New opens everything the driver uses (a netlink socket, a packet socket
// on the LAN interface, the sysctl files) in the network namespace of the
// thread that calls it, and every later call acts there, whichever thread
// it runs on. The LAN and workload interfaces must exist when New runs and
// for the driver's life; a driver whose interface was removed fails its
// calls and must be built again.
package onprem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
)

// RouteProtocol marks the routes the driver installs (ip route show proto
// 213). The number is in no registry of routing daemons; a route to a
// mobile address with another protocol belongs to someone else and is
// never removed.
const RouteProtocol netlink.RouteProtocol = 213

// Defaults for Options.
const (
	// DefaultGARPCount is keepalived's: five at once, five more later.
	DefaultGARPCount = 5
	// DefaultGARPRepeatAfter is keepalived's delay before its second burst.
	DefaultGARPRepeatAfter = 5 * time.Second
)

// Options configure a Driver.
type Options struct {
	// LAN is the interface that answers ARP for captured addresses (eth0):
	// the member's capture target. Requests name it as their NIC.
	LAN string
	// WorkloadDevice is the interface the captured addresses are routed
	// to. It must differ from LAN: the kernel does not proxy-answer for
	// an address routed back out of the interface the request came in by.
	WorkloadDevice string
	// WorkloadNextHop, when valid, makes the route go via that IPv4
	// address on WorkloadDevice; otherwise the address is on-link there.
	WorkloadNextHop netip.Addr
	// GARPCount is the number of gratuitous ARPs in a burst; zero means
	// DefaultGARPCount.
	GARPCount int
	// GARPRepeatAfter is the delay from the first burst to the second;
	// zero means DefaultGARPRepeatAfter, negative means no second burst.
	GARPRepeatAfter time.Duration
	// GARPInterval spaces the GARPs of one burst; zero sends them back to
	// back, as keepalived does by default.
	GARPInterval time.Duration
	// StillHolder, when set, is asked before each frame of the second
	// burst, which goes out GARPRepeatAfter after the Assign that made
	// it, long after that call's own readiness check: nil means this
	// host still holds addr at the epoch of that Assign and may announce
	// it. An error withholds the rest of the burst: a host whose line
	// moved on (another captured the address while this one was paused
	// or cut off, and its release has not run yet) must not draw the
	// LAN's traffic back. since is when the Assign was made: a host
	// that its peers may have found stale at any moment after it (paused,
	// cut off, and heard again since) is asked to withhold too. Nil sends
	// the second burst as keepalived does.
	StillHolder func(addr netip.Addr, epoch capture.Epoch, since time.Time) error
	// Log receives a line per acquire and release; nil discards them.
	Log *slog.Logger
}

// Driver is the on-premises provider.Provider of one host. It is safe for
// concurrent use.
type Driver struct {
	lan      string
	lanIndex int
	lanMAC   net.HardwareAddr
	wlDev    string
	wlIndex  int
	nextHop  netip.Addr
	count    int
	repeat   time.Duration
	still    func(netip.Addr, capture.Epoch, time.Time) error
	interval time.Duration
	log      *slog.Logger

	nl  *netlink.Handle
	arp *packet.Conn
	// The sysctl files, opened in the driver's namespace: /proc/sys/net
	// resolves a path by the namespace of the thread that opens it.
	ipForward, lanForwarding, proxyDelay *os.File

	mu     sync.Mutex
	closed bool
	// repeats holds the cancel function of each address's pending second
	// burst.
	repeats map[netip.Addr]context.CancelFunc
	wg      sync.WaitGroup
}

var _ provider.Provider = (*Driver)(nil)

// New opens a driver on the current thread's network namespace (see the
// package documentation). It needs CAP_NET_ADMIN and CAP_NET_RAW.
func New(o Options) (*Driver, error) {
	if o.LAN == "" || o.WorkloadDevice == "" {
		return nil, fmt.Errorf("onprem: LAN %q and workload device %q: both are required", o.LAN, o.WorkloadDevice)
	}
	if o.LAN == o.WorkloadDevice {
		return nil, fmt.Errorf("onprem: workload device %s is the LAN interface: the kernel proxy-answers only for addresses routed out of another interface", o.LAN)
	}
	if o.WorkloadNextHop.IsValid() && !o.WorkloadNextHop.Is4() {
		return nil, fmt.Errorf("onprem: workload next hop %s is not an IPv4 address", o.WorkloadNextHop)
	}
	if o.GARPCount < 0 {
		return nil, fmt.Errorf("onprem: GARP count %d is negative", o.GARPCount)
	}
	if o.GARPInterval < 0 {
		return nil, fmt.Errorf("onprem: GARP interval %s is negative", o.GARPInterval)
	}
	d := &Driver{
		lan:      o.LAN,
		wlDev:    o.WorkloadDevice,
		nextHop:  o.WorkloadNextHop,
		count:    o.GARPCount,
		repeat:   o.GARPRepeatAfter,
		still:    o.StillHolder,
		interval: o.GARPInterval,
		log:      o.Log,
		repeats:  map[netip.Addr]context.CancelFunc{},
	}
	if d.count == 0 {
		d.count = DefaultGARPCount
	}
	if d.repeat == 0 {
		d.repeat = DefaultGARPRepeatAfter
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if err := d.open(o); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// open resolves the interfaces and opens the sockets and sysctl files.
func (d *Driver) open(o Options) error {
	var err error
	if d.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		return fmt.Errorf("onprem: netlink socket: %w", err)
	}
	lan, err := d.nl.LinkByName(o.LAN)
	if err != nil {
		return fmt.Errorf("onprem: LAN interface %s: %w", o.LAN, err)
	}
	d.lanIndex = lan.Attrs().Index
	d.lanMAC = lan.Attrs().HardwareAddr
	if len(d.lanMAC) != 6 {
		return fmt.Errorf("onprem: LAN interface %s has hardware address %q: ARP needs an Ethernet one", o.LAN, d.lanMAC)
	}
	wl, err := d.nl.LinkByName(o.WorkloadDevice)
	if err != nil {
		return fmt.Errorf("onprem: workload device %s: %w", o.WorkloadDevice, err)
	}
	d.wlIndex = wl.Attrs().Index
	ifi := &net.Interface{Index: d.lanIndex, Name: o.LAN, HardwareAddr: d.lanMAC, MTU: lan.Attrs().MTU}
	if d.arp, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil); err != nil {
		return fmt.Errorf("onprem: packet socket on %s for gratuitous ARP: %w", o.LAN, err)
	}
	sysctl := func(path string) (*os.File, error) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("onprem: sysctl: %w", err)
		}
		return f, nil
	}
	if d.ipForward, err = sysctl("/proc/sys/net/ipv4/ip_forward"); err != nil {
		return err
	}
	if d.lanForwarding, err = sysctl("/proc/sys/net/ipv4/conf/" + o.LAN + "/forwarding"); err != nil {
		return err
	}
	if d.proxyDelay, err = sysctl("/proc/sys/net/ipv4/neigh/" + o.LAN + "/proxy_delay"); err != nil {
		return err
	}
	return nil
}

// Close stops pending GARP bursts and closes the driver's sockets. It
// leaves captures in place: whether a host keeps answering is for the
// reconcile loop to decide, not for a process that stops.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for a, cancel := range d.repeats {
		cancel()
		delete(d.repeats, a)
	}
	d.mu.Unlock()
	d.wg.Wait()
	return d.release()
}

// release closes whatever New opened.
func (d *Driver) release() error {
	var errs []error
	for _, f := range []*os.File{d.ipForward, d.lanForwarding, d.proxyDelay} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	if d.arp != nil {
		errs = append(errs, d.arp.Close())
	}
	if d.nl != nil {
		d.nl.Close()
	}
	return errors.Join(errs...)
}

// check refuses a request for another NIC or a non-IPv4 address.
func (d *Driver) check(op string, req provider.Request) error {
	if req.NIC != d.lan {
		return fmt.Errorf("onprem: %s %s on %q: %w: this driver acts on its own LAN interface %s only", op, req.Address, req.NIC, provider.ErrUnknownNIC, d.lan)
	}
	if !req.Address.Is4() || req.Address.IsUnspecified() {
		return fmt.Errorf("onprem: %s %s on %s: proxy-ARP needs an IPv4 address", op, req.Address, req.NIC)
	}
	return nil
}

// Assign implements provider.Provider: it acquires the address (see the
// package documentation). Repeating it is harmless: it sends a fresh
// burst of GARPs and moves the second burst later. A failed Assign may
// have done its first steps (the host may answer already); the caller
// repeats it or releases. reassign has no effect: there is no atomic move
// on a LAN.
func (d *Driver) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	if err := d.check("assign", req); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("onprem: assign %s on %s: driver closed", req.Address, d.lan)
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("onprem: assign %s on %s: %s: %w", req.Address, d.lan, what, err)
	}
	// Readiness is asked right before each change, after the driver's
	// own checks above and after any pause of the process in between.
	if err := gate.Ready(ctx); err != nil {
		return fail("nothing changed", err)
	}
	for _, s := range []struct {
		f     *os.File
		value string
	}{{d.ipForward, "1"}, {d.lanForwarding, "1"}, {d.proxyDelay, "0"}} {
		if err := writeSysctl(s.f, s.value); err != nil {
			return fail("sysctl", err)
		}
	}
	if err := d.nl.RouteReplace(d.route(req.Address)); err != nil {
		return fail(fmt.Sprintf("route to %s", d.wlDev), err)
	}
	if err := gate.Ready(ctx); err != nil {
		// Without its proxy entry the host does not answer for the
		// address: the route alone is harmless, and Unassign removes it.
		return fail("before the proxy neighbour entry (the route is in place, the host does not answer)", err)
	}
	answered, err := d.proxied(req.Address)
	if err != nil {
		return fail("listing proxy entries", err)
	}
	if err := d.nl.NeighSet(d.proxyEntry(req.Address)); err != nil {
		return fail("proxy neighbour entry", err)
	}
	d.cancelRepeat(req.Address)
	// The first burst goes out before Assign returns: a success recorded
	// by the caller then means the LAN has been told, not only the
	// kernel.
	sent, err := d.burst(ctx, req.Address, nil)
	if err != nil {
		if errors.Is(err, gate.ErrNotReady) && sent == 0 && !answered {
			// Refused before anything reached the wire: the host
			// stops answering again, as before the call. Taking its
			// own entry out can never make a second holder.
			if derr := d.nl.NeighDel(d.proxyEntry(req.Address)); derr != nil && !errors.Is(derr, unix.ENOENT) {
				return fail("before the gratuitous ARP; taking the proxy entry out again failed too ("+derr.Error()+")", err)
			}
			return fail("before the gratuitous ARP (the proxy entry was taken out again)", err)
		}
		return fail(fmt.Sprintf("gratuitous ARP (%d of %d sent)", sent, d.count), err)
	}
	if d.repeat > 0 {
		rctx, cancel := context.WithCancel(context.Background())
		if still := d.still; still != nil {
			addr, epoch, since := req.Address, req.Epoch, time.Now()
			rctx = gate.WithReady(rctx, func() error { return still(addr, epoch, since) })
		}
		d.repeats[req.Address] = cancel
		d.wg.Add(1)
		go d.repeatBurst(rctx, req.Address)
	}
	d.log.Info("proxy-ARP started", "address", req.Address, "lan", d.lan, "workload", d.wlDev, "epoch", req.Epoch, "garp", sent)
	return nil
}

// repeatBurst sends the second burst after the delay, unless the address
// is released, acquired again or the driver closes first.
func (d *Driver) repeatBurst(ctx context.Context, addr netip.Addr) {
	defer d.wg.Done()
	t := time.NewTimer(d.repeat)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	sent, err := d.burst(ctx, addr, &d.mu)
	switch {
	case errors.Is(err, gate.ErrNotReady) && ctx.Err() == nil:
		d.log.Info("repeated gratuitous ARP withheld", "address", addr, "lan", d.lan, "sent", sent, "why", err)
	case err != nil && ctx.Err() == nil:
		d.log.Warn("repeated gratuitous ARP failed", "address", addr, "lan", d.lan, "sent", sent, "err", err)
	case err == nil:
		d.log.Debug("repeated gratuitous ARP", "address", addr, "lan", d.lan, "sent", sent)
	}
	d.mu.Lock()
	// Only this burst's own entry: a new Assign may have put its own.
	if ctx.Err() == nil {
		delete(d.repeats, addr)
	}
	d.mu.Unlock()
}

// cancelRepeat stops the address's pending second burst; d.mu is held.
func (d *Driver) cancelRepeat(addr netip.Addr) {
	if cancel, ok := d.repeats[addr]; ok {
		cancel()
		delete(d.repeats, addr)
	}
}

// burst sends d.count GARPs for addr, spaced by d.interval, and returns how
// many it sent. It asks the readiness ctx carries (gate.Ready) right
// before each frame and stops, wrapping gate.ErrNotReady, at the first
// refusal. With lock non-nil it takes the lock around each send and
// sends nothing once ctx is done: since cancelling happens under the same
// lock, no GARP of a cancelled burst leaves after the Unassign or Assign
// that cancelled it has returned.
func (d *Driver) burst(ctx context.Context, addr netip.Addr, lock *sync.Mutex) (int, error) {
	frame, err := garp(d.lanMAC, addr)
	if err != nil {
		return 0, err
	}
	dst := &packet.Addr{HardwareAddr: ethernet.Broadcast}
	for i := range d.count {
		if i > 0 && d.interval > 0 {
			t := time.NewTimer(d.interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return i, ctx.Err()
			case <-t.C:
			}
		}
		if lock != nil {
			lock.Lock()
		}
		err := ctx.Err()
		if err == nil {
			err = gate.Ready(ctx)
		}
		if err == nil {
			_, err = d.arp.WriteTo(frame, dst)
		}
		if lock != nil {
			lock.Unlock()
		}
		if err != nil {
			return i, err
		}
	}
	return d.count, nil
}

// garp returns the Ethernet frame of a gratuitous ARP request announcing
// that addr is at mac: sender and target IP both addr, broadcast. The
// target hardware address is zero, as RFC 5227 has ARP announcements.
func garp(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	p, err := arp.NewPacket(arp.OperationRequest, mac, addr, make(net.HardwareAddr, len(mac)), addr)
	if err != nil {
		return nil, fmt.Errorf("gratuitous ARP for %s from %s: %w", addr, mac, err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	return f.MarshalBinary()
}

// Unassign implements provider.Provider: it removes the proxy entry and
// then the route, if the driver made them, and cancels the pending second
// burst. Unassigning an address the host does not answer for succeeds.
// The forwarding sysctls stay: other addresses may need them.
func (d *Driver) Unassign(ctx context.Context, req provider.Request) error {
	if err := d.check("unassign", req); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("onprem: unassign %s on %s: driver closed", req.Address, d.lan)
	}
	d.cancelRepeat(req.Address)
	fail := func(what string, err error) error {
		return fmt.Errorf("onprem: unassign %s on %s: %s: %w", req.Address, d.lan, what, err)
	}
	routes, err := d.ownRoutes(req.Address)
	if err != nil {
		return fail("listing routes", err)
	}
	if len(routes) == 0 {
		return nil
	}
	if err := gate.Ready(ctx); err != nil {
		return fail("nothing removed", err)
	}
	if err := d.nl.NeighDel(d.proxyEntry(req.Address)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fail("proxy neighbour entry", err)
	}
	for _, r := range routes {
		if err := d.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fail("route", err)
		}
	}
	d.log.Info("proxy-ARP stopped", "address", req.Address, "lan", d.lan, "epoch", req.Epoch)
	return nil
}

// SetForwarding implements provider.Provider as a no-op that succeeds:
// on premises forwarding is part of acquiring (Assign turns it on), and
// turning it off on release would cut every other address the host
// forwards. It still refuses another NIC.
func (d *Driver) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	if req.NIC != d.lan {
		return fmt.Errorf("onprem: set forwarding on %q: %w: this driver acts on its own LAN interface %s only", req.NIC, provider.ErrUnknownNIC, d.lan)
	}
	return nil
}

// Describe implements provider.Provider by reading the kernel back: the
// address is on the LAN interface when both the proxy entry and the
// driver's route are there, and forwarding is the LAN interface's
// forwarding sysctl. It sees this host only: an address another host
// answers for is described as on no NIC.
func (d *Driver) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	obs := provider.Observation{Address: addr}
	if !addr.Is4() {
		return obs, fmt.Errorf("onprem: describe %s: proxy-ARP needs an IPv4 address", addr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return obs, fmt.Errorf("onprem: describe %s on %s: driver closed", addr, d.lan)
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("onprem: describe %s on %s: %s: %w", addr, d.lan, what, err)
	}
	proxied, err := d.proxied(addr)
	if err != nil {
		return obs, fail("listing proxy entries", err)
	}
	if !proxied {
		return obs, nil
	}
	routes, err := d.ownRoutes(addr)
	if err != nil {
		return obs, fail("listing routes", err)
	}
	if len(routes) == 0 {
		return obs, nil
	}
	obs.NIC = d.lan
	v, err := readSysctl(d.lanForwarding)
	if err != nil {
		return obs, fail("forwarding sysctl", err)
	}
	obs.Forwarding = v == "1"
	return obs, nil
}

// Announce sends one burst of gratuitous ARP for addr, and reports true,
// if this host captures it now (the proxy entry and the driver's route are
// both there); otherwise it sends nothing and reports false. It changes no
// kernel state, so it needs no fencing token: the daemon calls it when
// keepalived says a lower-priority router was master too (a partition just
// healed), since hosts on the LAN may still send to that router's MAC and
// nothing else would tell them otherwise. A readiness check in ctx
// (gate.WithReady) is still asked before every frame.
func (d *Driver) Announce(ctx context.Context, addr netip.Addr) (bool, error) {
	obs, err := d.Describe(ctx, addr)
	if err != nil || obs.NIC == "" {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, fmt.Errorf("onprem: announce %s on %s: driver closed", addr, d.lan)
	}
	sent, err := d.burst(ctx, addr, nil)
	if err != nil {
		return false, fmt.Errorf("onprem: announce %s on %s: gratuitous ARP (%d of %d sent): %w", addr, d.lan, sent, d.count, err)
	}
	d.log.Info("announced again", "address", addr, "lan", d.lan, "garp", sent)
	return true, nil
}

// proxied says whether the LAN interface has a proxy entry for addr.
func (d *Driver) proxied(addr netip.Addr) (bool, error) {
	proxies, err := d.nl.NeighProxyList(d.lanIndex, unix.AF_INET)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(proxies, func(n netlink.Neigh) bool {
		a, ok := netip.AddrFromSlice(n.IP)
		return n.LinkIndex == d.lanIndex && ok && a.Unmap() == addr
	}), nil
}

// route is the route Assign installs for addr.
func (d *Driver) route(addr netip.Addr) *netlink.Route {
	r := &netlink.Route{
		LinkIndex: d.wlIndex,
		Dst:       &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Protocol:  RouteProtocol,
		Scope:     netlink.SCOPE_LINK,
		Table:     unix.RT_TABLE_MAIN,
	}
	if d.nextHop.IsValid() {
		r.Gw = d.nextHop.AsSlice()
		r.Scope = netlink.SCOPE_UNIVERSE
	}
	return r
}

// ownRoutes lists the driver's routes to addr/32 in the main table: the
// ones marked with RouteProtocol.
func (d *Driver) ownRoutes(addr netip.Addr) ([]netlink.Route, error) {
	filter := &netlink.Route{
		Dst:      &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Protocol: RouteProtocol,
		Table:    unix.RT_TABLE_MAIN,
	}
	return d.nl.RouteListFiltered(unix.AF_INET, filter, netlink.RT_FILTER_DST|netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
}

// proxyEntry is the proxy neighbour entry for addr on the LAN interface.
func (d *Driver) proxyEntry(addr netip.Addr) *netlink.Neigh {
	return &netlink.Neigh{
		LinkIndex: d.lanIndex,
		Family:    unix.AF_INET,
		Flags:     netlink.NTF_PROXY,
		IP:        addr.AsSlice(),
	}
}

// writeSysctl writes value to an open sysctl file; the kernel treats a
// write that does not change the value as a no-op.
func writeSysctl(f *os.File, value string) error {
	if _, err := f.WriteAt([]byte(value), 0); err != nil {
		return fmt.Errorf("writing %s to %s: %w", value, f.Name(), err)
	}
	return nil
}

// readSysctl reads an open sysctl file's value.
func readSysctl(f *os.File) (string, error) {
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return "", fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	return strings.TrimSpace(string(buf[:n])), nil
}
