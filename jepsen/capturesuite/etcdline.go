package capturesuite

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/jepsen/etcdsuite"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// EpochLines are where the nodes may keep their pool's epoch line, as
// --epochs names them: passed between the nodes (the default) or in a
// 3-member etcd the test starts beside them.
var EpochLines = []string{"federation", "etcd"}

// etcdMembers is the size of the etcd cluster of --epochs etcd: the
// smallest that survives the loss of a member.
const etcdMembers = 3

// etcdSessionTTL is the nodes' session in etcd: short, so that a node cut
// off from etcd and back again acts within seconds, long enough for two
// cores under the race detector to renew it (every third of it).
const etcdSessionTTL = "2s"

// etcdPrefix is the nodes' key prefix in etcd.
const etcdPrefix = "/ipfence/"

// etcdLine is the epoch line in etcd under test: the members, and a proxy
// on every link from a node to a member so that partitions cut nodes off
// from members as they cut nodes off from each other.
type etcdLine struct {
	members *etcdsuite.Cluster
	links   map[[2]string]*netfault.Proxy // (node, member) → the proxy node dials
}

// startEtcdLine starts the members in dir and a proxy per node and member.
// listen opens the listener of a proxy node dials (on premises, on the
// loopback of node's namespace, where the node runs); nil listens on this
// namespace's loopback.
func startEtcdLine(ctx context.Context, dir string, nodes []string, listen func(node string) (net.Listener, error)) (l *etcdLine, err error) {
	bin, err := etcdsuite.FindEtcd("")
	if err != nil {
		return nil, fmt.Errorf("--epochs etcd: %w", err)
	}
	members, err := etcdsuite.StartCluster(ctx, bin, dir, "e", etcdMembers)
	if err != nil {
		return nil, fmt.Errorf("--epochs etcd: starting etcd: %w", err)
	}
	l = &etcdLine{members: members, links: map[[2]string]*netfault.Proxy{}}
	defer func() {
		if err != nil {
			l.stop()
		}
	}()
	for _, n := range nodes {
		for _, m := range members.Members() {
			var p *netfault.Proxy
			if listen == nil {
				p, err = netfault.NewProxy(members.ClientAddr(m))
			} else {
				var ln net.Listener
				if ln, err = listen(n); err == nil {
					p, err = netfault.NewProxyOn(ln, members.ClientAddr(m))
				}
			}
			if err != nil {
				return l, fmt.Errorf("--epochs etcd: a proxy from %s to %s: %w", n, m, err)
			}
			l.links[[2]string{n, m}] = p
		}
	}
	return l, nil
}

// endpoints are the client URLs node n is configured with: its proxies to
// every member.
func (l *etcdLine) endpoints(n string) []string {
	var out []string
	for _, m := range l.members.Members() {
		out = append(out, "http://"+l.links[[2]string{n, m}].Addr())
	}
	return out
}

// yaml is node n's etcd section.
func (l *etcdLine) yaml(n string) string {
	return fmt.Sprintf("etcd:\n  endpoints: [%s]\n  prefix: %s\n  session_ttl: %s\n",
		strings.Join(l.endpoints(n), ", "), etcdPrefix, etcdSessionTTL)
}

func (l *etcdLine) stop() {
	for _, p := range l.links {
		_ = p.Close()
	}
	l.members.Stop()
}

// lineNet partitions nodes and members together: the nodes' links through
// the nodes' network, the links from nodes to members through the line's
// proxies (cut when either direction is: a request needs its answer), and
// the members' peer links through their mesh.
type lineNet struct {
	nodes []string
	net   nemesis.Net
	line  *etcdLine
	mode  netfault.Mode
}

func (n lineNet) Partition(ctx context.Context, g netfault.Grudge) error {
	if err := n.net.Partition(ctx, etcdsuite.Restrict(g, n.nodes)); err != nil {
		return err
	}
	for link, p := range n.line.links {
		if g.Cuts(link[0], link[1]) || g.Cuts(link[1], link[0]) {
			p.Cut(n.mode)
		} else {
			p.Heal()
		}
	}
	n.line.members.Partition(g, n.mode)
	return nil
}

func (n lineNet) Heal(ctx context.Context) error {
	for _, p := range n.line.links {
		p.Heal()
	}
	n.line.members.Heal()
	return n.net.Heal(ctx)
}

// lineProcs pauses, kills and restarts nodes and members alike, each by
// its own means.
type lineProcs struct {
	nodes nemesis.Processes
	line  *etcdLine
}

func (p lineProcs) of(name string) nemesis.Processes {
	if slices.Contains(p.line.members.Members(), name) {
		return p.line.members
	}
	return p.nodes
}

func (p lineProcs) Pause(n string) error  { return p.of(n).Pause(n) }
func (p lineProcs) Resume(n string) error { return p.of(n).Resume(n) }
func (p lineProcs) Kill(n string) error   { return p.of(n).Kill(n) }
func (p lineProcs) Restart(ctx context.Context, n string) error {
	return p.of(n).Restart(ctx, n)
}

// records reads every record of the line from etcd once the run has
// settled (through a member the harness reaches directly: the proxies are
// healed by then, but a member killed last may still be restarting).
func (l *etcdLine) records(ctx context.Context) (map[string]etcdline.Record, error) {
	var eps []string
	for _, m := range l.members.Members() {
		eps = append(eps, "http://"+l.members.ClientAddr(m))
	}
	cl := &etcdline.Client{Endpoints: eps, Prefix: etcdPrefix, Node: "harness"}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	snap, err := cl.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]etcdline.Record{}
	for k, r := range snap.Records {
		out[k.Address.String()] = r
	}
	return out, nil
}

// etcdAgrees checks the line in etcd against the provider after the run:
// every address has a record, held by the node whose NIC has the address,
// at an epoch no lower than any the provider applied for it. A line that
// fell behind the provider, or a holder etcd does not name, means the
// nodes acted outside the line.
func etcdAgrees(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, _ *checker.Run) checker.Result {
		if col.lineErr != nil {
			return checker.Errorf("reading the line from etcd: %v", col.lineErr)
		}
		high := map[string]uint64{}
		for _, m := range col.mutations {
			if m.Address != "" {
				high[m.Address] = max(high[m.Address], m.Epoch)
			}
		}
		var findings []string
		for _, a := range slices.Sorted(maps.Keys(col.actual)) {
			r, ok := col.line[a]
			switch {
			case !ok:
				findings = append(findings, fmt.Sprintf("%s: no record in etcd, on %s at the provider", a, col.actual[a]))
			case r.Holder != col.actual[a]:
				findings = append(findings, fmt.Sprintf("%s: etcd names %s at epoch %d, the provider has it on %s", a, r.Holder, r.Epoch, col.actual[a]))
			case uint64(r.Epoch) < high[a]:
				findings = append(findings, fmt.Sprintf("%s: etcd holds epoch %d, below epoch %d the provider applied", a, r.Epoch, high[a]))
			}
		}
		valid := linear.True
		if len(findings) > 0 {
			valid = linear.False
		}
		recs := map[string]string{}
		for a, r := range col.line {
			recs[a] = fmt.Sprintf("epoch %d for %s at revision %d", r.Epoch, r.Holder, r.Rev)
		}
		return checker.Result{Valid: valid, Fields: map[string]any{
			"records": recs, "findings": first(findings, 10), "findings_total": len(findings)}}
	})
}
