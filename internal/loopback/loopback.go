// Package loopback finds free ports on 127.0.0.1 for processes that must
// be told their port before they start (a node's peers are configured with
// it).
package loopback

import "net"

// FreePorts asks the kernel for n free loopback ports. Another program
// could take one before it is bound; for test and development clusters
// that is an acceptable race.
func FreePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
