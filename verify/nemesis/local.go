package nemesis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ipfence/ipfence/internal/loopback"
)

// Local runs a system's nodes as processes on this machine, one per node,
// and is the Processes of the Pause and Kill faults: it adds to Procs the
// Restart only a system's test knows how to do, from Command.
type Local struct {
	Procs
	// Command builds the command that runs node; Restart starts it.
	Command func(node string) *exec.Cmd
	// Addrs are where the nodes accept connections: a node is up once
	// its address does.
	Addrs map[string]string
}

// LoopbackAddrs picks a free loopback address for each node. The ports
// are free when it returns, and below the kernel's ephemeral range where
// it leaves room, so that a node restarted after a kill does not find its
// port taken as the source port of some outgoing connection.
func LoopbackAddrs(nodes ...string) (map[string]string, error) {
	ports, err := loopback.FreePorts(len(nodes))
	if err != nil {
		return nil, fmt.Errorf("loopback ports for %s: %w", strings.Join(nodes, ", "), err)
	}
	out := make(map[string]string, len(nodes))
	for i, n := range nodes {
		out[n] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))
	}
	return out, nil
}

// Start starts every node in turn and waits until each accepts
// connections.
func (l *Local) Start(ctx context.Context, nodes ...string) error {
	for _, n := range nodes {
		if err := l.Restart(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// Restart starts node's command and waits until the node accepts
// connections at its address, or ctx ends.
func (l *Local) Restart(ctx context.Context, node string) error {
	addr, ok := l.Addrs[node]
	if !ok {
		return fmt.Errorf("%s has no address", node)
	}
	cmd := l.Command(node)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", node, err)
	}
	l.Add(node, cmd)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if !l.Running(node) {
			return fmt.Errorf("%s exited before it accepted connections at %s", node, addr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not accept connections at %s: %w", node, addr, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
