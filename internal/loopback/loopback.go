// Package loopback finds free ports on 127.0.0.1 for processes that must
// be told their port before they start (a node's peers are configured with
// it).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowestPort is where FreePorts starts looking below the ephemeral range.
const lowestPort = 10000

// FreePorts returns n free loopback ports, distinct, each free when it
// returns. They are taken below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range) where it leaves room: a port the kernel
// hands out for ":0" is one it may hand out again at once as the source
// port of any outgoing connection, so a node restarted on it after a kill
// found it taken ("bind: address already in use", seen in CI on a busy
// machine). Below the range only another program choosing the same port
// can take it. Without room there, or without the range to read, the
// kernel picks.
func FreePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	low := ephemeralLow()
	for len(out) < n {
		addr := "127.0.0.1:0"
		if low-lowestPort >= 1000 {
			addr = fmt.Sprintf("127.0.0.1:%d", lowestPort+rand.IntN(low-lowestPort))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: draw again
			}
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ephemeralLow is the bottom of the kernel's ephemeral port range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
