package etcdsuite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/netfault"
)

// Cluster is an etcd cluster on loopback that another suite runs beside
// the system it tests (the capture test's epoch line in etcd): the same
// members, with etcd's default timing and peer links through a proxy mesh,
// as the etcd test starts, but named by the caller and driven by the
// caller's nemeses.
type Cluster struct{ c *cluster }

// StartCluster starts n members named prefix1 … prefixN in dir (their data
// under dir/data, their logs under dir/logs) and waits until each answers
// a linearizable read. bin is the etcd binary (FindEtcd). On error it stops
// whatever it started.
func StartCluster(ctx context.Context, bin, dir, prefix string, n int) (*Cluster, error) {
	if err := os.MkdirAll(filepath.Join(dir, harness.LogDir), 0o755); err != nil {
		return nil, err
	}
	c, err := startNamed(ctx, bin, dir, prefix, n, fmt.Sprintf("%s-%d", prefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	return &Cluster{c}, nil
}

// Members are the members' names.
func (m *Cluster) Members() []string { return slices.Clone(m.c.nodes) }

// ClientAddr is member's client host:port (its client URL without the
// scheme).
func (m *Cluster) ClientAddr(member string) string {
	return strings.TrimPrefix(m.c.client[member], "http://")
}

// Version is the first line of the binary's --version.
func (m *Cluster) Version() string { return m.c.version }

// Pause stops member's process (SIGSTOP).
func (m *Cluster) Pause(member string) error { return m.c.Pause(member) }

// Resume continues member's process (SIGCONT).
func (m *Cluster) Resume(member string) error { return m.c.Resume(member) }

// Kill kills member's process and waits until it is gone.
func (m *Cluster) Kill(member string) error { return m.c.Kill(member) }

// Restart starts member again on its data and waits until its client port
// accepts connections.
func (m *Cluster) Restart(ctx context.Context, member string) error { return m.c.Restart(ctx, member) }

// Running says whether member's process runs.
func (m *Cluster) Running(member string) bool { return m.c.Running(member) }

// Partition cuts the links between members that g cuts and heals the
// others; links to or from names that are not members are left to the
// caller.
func (m *Cluster) Partition(g netfault.Grudge, mode netfault.Mode) {
	m.c.mesh.Apply(Restrict(g, m.c.nodes), mode)
}

// Heal heals every link between members.
func (m *Cluster) Heal() { m.c.mesh.Heal() }

// Stop stops every member (continued first, should one be paused) and
// closes the proxies and logs.
func (m *Cluster) Stop() { m.c.stop() }

// Restrict is g with only the links between names in keep.
func Restrict(g netfault.Grudge, keep []string) netfault.Grudge {
	out := netfault.Grudge{}
	for from, tos := range g {
		if !slices.Contains(keep, from) {
			continue
		}
		for _, to := range tos {
			if slices.Contains(keep, to) {
				out[from] = append(out[from], to)
			}
		}
	}
	return out
}
