//go:build linux

package l2lab

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Fetch connects from the observer to the mobile address on port and
// returns what the workload behind the holder wrote: its host's name.
func (l *Lab) Fetch(port int, timeout time.Duration) (string, error) {
	var got string
	err := l.Do(l.Observer(), func() error {
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(l.Address(), uint16(port)).String(), timeout)
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

// Neighbours reads the observer's neighbour entry for the mobile address
// through a netlink socket opened in the observer's namespace, so that it
// can be polled often and cheaply.
type Neighbours struct {
	h     *netlink.Handle
	index int
	addr  net.IP
}

// ObserverNeighbours opens the observer's neighbour table; Close it.
func (l *Lab) ObserverNeighbours() (*Neighbours, error) {
	n := &Neighbours{addr: l.Address().AsSlice()}
	err := l.Do(l.Observer(), func() error {
		var err error
		if n.h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return err
		}
		link, err := n.h.LinkByName(l.LANDevice())
		if err != nil {
			n.h.Close()
			return err
		}
		n.index = link.Attrs().Index
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("l2lab: netlink in the observer: %w", err)
	}
	return n, nil
}

// MAC returns the hardware address the observer has for the mobile
// address, or nil when it has none (or only a failed or incomplete entry).
func (n *Neighbours) MAC() (net.HardwareAddr, error) {
	list, err := n.h.NeighList(n.index, unix.AF_INET)
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		if e.IP.Equal(n.addr) && len(e.HardwareAddr) == 6 && e.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) == 0 {
			return e.HardwareAddr, nil
		}
	}
	return nil, nil
}

// Close closes the netlink socket.
func (n *Neighbours) Close() { n.h.Close() }
