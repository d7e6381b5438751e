// Package capturesuite is the Jepsen-style test of ipfence's capture: the cloud
// simulator (its EC2, ARM or OCI dialect, with the nodes on the AWS, Azure
// or OCI driver: see Clouds) and N `ipfence serve` nodes run as real
// processes (on loopback, with the harness's proxies on every node-to-node
// link, or in network namespaces), clients drain and undrain members and
// read where the provider says each address is, a nemesis partitions,
// pauses, kills and restarts nodes, skews and strobes their clocks and
// breaks the provider, and the checkers judge: a single holder at every
// instant, no stale action executed (the fence), convergence after the
// final heal, failover latency, the nodes' API calls per move, and
// linearizability of the provider's address register against the
// capture-owner model.
//
// `ipfence-verify test capture` runs it; the planted bug, --unsafe-disable-fence,
// must make it report invalid.
//
// With Options.NodesFile the nodes run on machines the harness did not
// start, reached over SSH through verify/control (remote.go): each a
// control.Daemon, partitions by control.NftNet, pauses and kills by
// control.Procs, every one confirmed beside its fault in the history.
package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/internal/simfault"
	"github.com/ipfence/ipfence/jepsen/capturesuite/ownermodel"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// Nemeses are the fault kinds the test knows, in the order --nemesis lists
// them: the network, processes, clocks and the provider, then a node's
// disk (wipe: its data dir removed; corrupt: its state file damaged; disk:
// full) and a hostile peer (see hostile.go). disk needs root (NeedsRoot).
var Nemeses = []string{"partition", "pause", "kill", "clock", "provider", "wipe", "corrupt", "disk", "hostile"}

// weights say how often the schedule draws each kind, against the others:
// the faults of a disk are rarer than the network's (a run of 60 s has
// about seven faults; a wipe or a corruption in one of two runs).
var weights = map[string]int{
	"partition": 3, "pause": 2, "kill": 2, "clock": 2, "provider": 2,
	"wipe": 1, "corrupt": 1, "disk": 1, "hostile": 2,
}

// Options configure a run. The zero values of the numbers take the
// defaults of `ipfence-verify test capture`.
type Options struct {
	// Binary is the ipfence executable that runs the simulator and the
	// nodes.
	Binary string
	// Nodes (default 3), Addresses (default 4) and Concurrency (client
	// threads, default 2 per node).
	Nodes, Addresses, Concurrency int
	// TimeLimit is the whole run, the final recovery included (default
	// 60s).
	TimeLimit time.Duration
	// Nemesis are the fault kinds to inject (nil: none).
	Nemesis []string
	// Seed seeds the generators: the same seed gives the same operations
	// and faults.
	Seed uint64
	// Store is the store's root folder (default "store").
	Store string
	// Netns runs the nodes in network namespaces with nftables partitions
	// (root) instead of behind proxies.
	Netns bool
	// UnsafeDisableFence starts the nodes with the planted bug.
	UnsafeDisableFence bool
	// Provider is one of Clouds ("aws", the default, "azure", "oci":
	// the cloud simulator's dialect and the driver of that cloud's SDK;
	// "cloud" is another name for "aws") or "onprem" (proxy-ARP under
	// keepalived in an L2 lab; needs Netns).
	Provider string
	// CloudLatency is the simulated cloud's latency profile, one of
	// CloudLatencies: "none" (the default: every call answered at once
	// unless the provider nemesis delays it) or "realistic" (each
	// dialect's published or observed figures; see the Realistic
	// profile of ec2sim, armsim and ocisim). The provider nemesis's
	// faults add to it.
	CloudLatency string
	// Epochs is where the nodes keep the pool's epoch line, one of
	// EpochLines: "federation" (the default: passed between the nodes)
	// or "etcd" (a 3-member etcd the test starts beside the nodes, each
	// node reaching each member through a proxy; the partition, pause
	// and kill nemeses then draw members as well as nodes).
	Epochs string
	// SpareEtcd keeps the etcd members of Epochs "etcd" out of the
	// nemeses: partitions cut nodes from nodes only, every node keeps
	// reaching every member, and no member is paused or killed (a LAN
	// split with etcd elsewhere).
	SpareEtcd bool
	// NodesFile, when set, runs the nodes on the machines it lists
	// (control.ParseNodes), reached over SSH: the binary, each node's
	// configuration and the federation secret uploaded to each, the node
	// started there as a daemon listening on the machine's address,
	// partitions made with nftables on the machines, and every
	// partition, pause and kill confirmed. The simulator stays on this
	// machine, on its address towards the nodes. Nodes is then the
	// file's count. Only the aws provider; RemoteRefused names the
	// nemeses it cannot make.
	NodesFile string
	// KnownHosts are the known_hosts files the nodes' host keys are
	// checked against (default ~/.ssh/known_hosts).
	KnownHosts []string
	// RemoteDir is the folder on each node that holds its files, as
	// RemoteDir/<node> (default DefaultRemoteDir); it is wiped at the
	// start.
	RemoteDir string
	// remote are the nodes of NodesFile, once read.
	remote []control.Node
	// Command is the command line to write beside the history.
	Command []string
	// Progress and TTY: where the progress goes, and whether it is a
	// terminal.
	Progress io.Writer
	TTY      bool
}

func (o *Options) defaults() error {
	if o.NodesFile != "" {
		nodes, err := readNodesFile(o.NodesFile)
		if err != nil {
			return err
		}
		if err := o.checkRemote(len(nodes)); err != nil {
			return err
		}
		o.remote, o.Nodes = nodes, len(nodes)
	} else if len(o.KnownHosts) > 0 || o.RemoteDir != "" {
		return errors.New("--known-hosts and --remote-dir need --nodes-file")
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Addresses == 0 {
		o.Addresses = 4
	}
	if o.Concurrency == 0 {
		o.Concurrency = 2 * o.Nodes
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = 60 * time.Second
	}
	if o.Store == "" {
		o.Store = "store"
	}
	// Every path the processes are given is made from Store, and they run
	// in the run's folder: a relative store would name a different place
	// for them than for the harness.
	abs, err := filepath.Abs(o.Store)
	if err != nil {
		return fmt.Errorf("--store %s: %w", o.Store, err)
	}
	o.Store = abs
	switch {
	case o.Nodes < 2 || o.Nodes > 9:
		return fmt.Errorf("--nodes must be from 2 to 9, not %d", o.Nodes)
	case o.Addresses < 1 || o.Addresses > 200:
		return fmt.Errorf("addresses must be from 1 to 200, not %d", o.Addresses)
	case o.Concurrency < 1 || o.Concurrency > 1000:
		return fmt.Errorf("--concurrency must be from 1 to 1000, not %d", o.Concurrency)
	case o.TimeLimit < 10*time.Second:
		return fmt.Errorf("--time-limit must be at least 10s (the run ends with %v of recovery), not %v", recovery(o.TimeLimit), o.TimeLimit)
	case o.Binary == "":
		return errors.New("no ipfence binary to run the nodes with")
	}
	if o.CloudLatency == "" {
		o.CloudLatency = simfault.LatencyNone
	}
	if err := simfault.CheckLatencyName(o.CloudLatency); err != nil {
		return fmt.Errorf("--cloud-latency: %w", err)
	}
	if o.Provider == "onprem" && o.CloudLatency != simfault.LatencyNone {
		return fmt.Errorf("--cloud-latency %s: --provider onprem has no cloud simulator to pace", o.CloudLatency)
	}
	if o.Epochs == "" {
		o.Epochs = EpochLines[0]
	}
	switch {
	case !slices.Contains(EpochLines, o.Epochs):
		return fmt.Errorf("--epochs: %q is not one of %s", o.Epochs, strings.Join(EpochLines, ", "))
	case o.SpareEtcd && o.Epochs != "etcd":
		return fmt.Errorf("--spare-etcd: only with --epochs etcd (the line is %s)", o.Epochs)
	case o.Epochs == "etcd" && o.Netns && o.Provider != "onprem":
		return errors.New("--epochs etcd: not built for --net netns in the cloud dialects yet; it runs there with --net proxy (the harness's proxies also cut nodes off from etcd members), and on premises with --provider onprem --net netns")
	}
	for _, k := range o.Nemesis {
		if !slices.Contains(Nemeses, k) {
			return fmt.Errorf("--nemesis: unknown fault %q; valid: %s", k, strings.Join(Nemeses, ","))
		}
		if why := NeedsRoot[k]; why != "" && os.Geteuid() != 0 && o.Provider != "onprem" && o.NodesFile == "" {
			return fmt.Errorf("--nemesis %s needs root: %s; run as root or leave %s out", k, why, k)
		}
	}
	return nil
}

// recovery is the quiet end of a run, after the final heal, in which the
// system must converge.
func recovery(limit time.Duration) time.Duration { return min(10*time.Second, limit/4) }

// convergenceBound is how long after the run the nodes get to settle
// before convergence is judged false.
const convergenceBound = 30 * time.Second

// Fault schedule: quiet, then a fault for active, and so on.
const (
	faultQuiet  = 3 * time.Second
	faultActive = 4 * time.Second
)

// Membership changes: every flapEvery a node is drained, and undrained
// flapBack later, within the de-provision hold, so that the release the
// drain planned goes stale while it waits. The node drained is the one
// the clients' latest read found holding an address: only a holder's
// drain plans a release, so every flap tests the fence (a drain of a node
// that holds nothing moves nothing).
const (
	flapEvery = 3 * time.Second
	flapBack  = 1 * time.Second
)

// Run runs the capture test and returns the harness's outcome.
func Run(ctx context.Context, o Options) (*harness.Outcome, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	cloud := o.Provider
	switch {
	case cloud == "" || cloud == CloudAlias:
		cloud = Clouds[0]
	case slices.Contains(Clouds, cloud):
	case cloud == "onprem":
		return runOnPrem(ctx, o)
	default:
		return nil, fmt.Errorf("--provider: %q is not one of %s, %s (another name for %s) or onprem", o.Provider, strings.Join(Clouds, ", "), CloudAlias, Clouds[0])
	}
	dir, err := harness.NewRunDir(o.Store, "capture", time.Now())
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	absBin, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, err
	}
	var line *etcdLine
	if o.Epochs == "etcd" {
		names := make([]string, o.Nodes)
		for i := range names {
			names[i] = nodeName(i)
		}
		if line, err = startEtcdLine(ctx, filepath.Join(dir, "etcd"), names, nil); err != nil {
			return &harness.Outcome{Dir: dir}, err
		}
		defer line.stop()
	}
	var remote *remoteOptions
	if o.remote != nil {
		remote = &remoteOptions{nodes: o.remote, knownHosts: o.KnownHosts, dir: o.RemoteDir}
	}
	c, err := startCluster(ctx, clusterOptions{bin: absBin, dir: dir, nodes: o.Nodes, addrs: o.Addresses, unfenced: o.UnsafeDisableFence,
		netns: o.Netns, disks: slices.Contains(o.Nemesis, "disk"), cloud: cloud,
		latency: o.CloudLatency, seed: o.Seed, line: line, remote: remote})
	if err != nil {
		return &harness.Outcome{Dir: dir}, fmt.Errorf("starting the cluster: %w", err)
	}
	defer c.stop()

	damaged, hostile := &damageLog{}, &hostileLog{}
	var net nemesis.Net
	switch {
	case c.remote != nil:
		net = c.remote.net
	case c.ns != nil:
		net = nemesis.NetnsNet(c.ns)
	default:
		net = nemesis.MeshNet(c.mesh, netfault.Drop)
	}
	// targets are what the partition, pause and kill nemeses draw from:
	// the nodes, and the etcd members when the epoch line is there.
	targets := c.nodes
	var procs nemesis.Processes = c
	if line != nil && !o.SpareEtcd {
		targets = append(slices.Clone(c.nodes), line.members.Members()...)
		net = lineNet{nodes: c.nodes, net: net, line: line, mode: netfault.Drop}
		procs = lineProcs{nodes: c, line: line}
	}
	faults := map[string]nemesis.Fault{
		"partition": nemesis.Partition(net, targets),
		"pause":     nemesis.Pause(procs, targets),
		"kill":      nemesis.Kill(procs, targets),
		"clock":     clockFault(c),
		"provider":  providerFault(c),
		"wipe":      wipeFault(c, damaged),
		"corrupt":   corruptFault(c, damaged),
		"disk":      diskFault(c, damaged),
		"hostile":   hostileFault(c, hostile),
	}
	if c.remote != nil {
		// On the nodes file's machines every partition, pause and kill
		// is confirmed there, and the confirmation written beside it.
		l := c.remote.ledger
		faults["partition"] = control.Confirmed(nemesis.Partition(net, targets), l)
		faults["pause"] = control.Confirmed(nemesis.Pause(c.remote.procs, targets), l)
		faults["kill"] = control.Confirmed(nemesis.Kill(c.remote.procs, targets), l)
	}
	choices, kinds := faultChoices(c.nodes, targets, o.Nemesis)
	used := map[string]nemesis.Fault{}
	for _, k := range kinds {
		used[k] = faults[k]
	}

	col := &collected{bound: convergenceBound}
	checks := map[string]checker.Checker{
		"single-holder": singleHolder(col),
		"fence":         fence(col),
		"convergence":   convergence(col),
		"failover":      failover(col),
		"calls":         callsPerMove(col),
		"availability":  availability(col),
		"damage":        damageChecker(damaged),
		"hostile":       hostileChecker(hostile),
		"linear": checker.Linearizable(checker.LinearOptions{
			Model: ownermodel.Model{}, History: ownerHistory(col), Timeout: time.Minute}),
		"stats":  checker.Stats(),
		"errors": checker.UnhandledErrors(),
		"perf":   checker.Perf(),
	}
	if c.remote != nil {
		checks["faults"] = control.FaultsChecker(c.remote.ledger)
	}
	if line != nil {
		checks["etcd-line"] = etcdAgrees(col)
		checks["line-token"] = lineTokens(col)
	}
	test := harness.Test{
		Name:        "capture",
		Dir:         dir,
		Nodes:       c.nodes,
		Concurrency: o.Concurrency,
		Client:      &client{c: c},
		Nemesis:     nemesis.Compose(used),
		Generator:   workload(o, c.nodes, c.addrs, choices, kinds, targets[len(c.nodes):]),
		Checker:     withTimeline(col, o.Concurrency, checker.Compose(checks)),
		Seed:        o.Seed,
		Command:     o.Command,
		Progress:    o.Progress,
		TTY:         o.TTY,
		TimeLimit:   o.TimeLimit,
		Teardown:    func(ctx context.Context, dir string) error { return collect(ctx, c, col, dir) },
	}
	return harness.Run(ctx, test)
}

// faultChoices are the schedule's choices for the kinds of Nemeses in
// want: each kind listed as often as its weight, so that the seeded draw
// picks it that much more often. kinds are the kinds once each, in the
// order of Nemeses. Partitions, pauses and kills draw among targets (the
// nodes, and the etcd members of --epochs etcd), the others among nodes.
func faultChoices(nodes, targets, want []string) (nemesis.Choices, []string) {
	choices := nemesis.Choices{Values: map[string]nemesis.Choose{
		"partition": nemesis.PartitionChoice(targets),
		"pause":     nemesis.NodeChoice(targets),
		"kill":      nemesis.NodeChoice(targets),
		"clock":     clockChoice(nodes),
		"provider":  providerChoice,
		"wipe":      nemesis.NodeChoice(nodes),
		"corrupt":   corruptChoice(nodes),
		"disk":      nemesis.NodeChoice(nodes),
		"hostile":   hostileChoice(nodes),
	}}
	var kinds []string
	for _, k := range Nemeses {
		if slices.Contains(want, k) {
			kinds = append(kinds, k)
			for range weights[k] {
				choices.Kinds = append(choices.Kinds, k)
			}
		}
	}
	return choices, kinds
}

// workload is the whole schedule: clients and faults until the recovery,
// then every fault healed and every node undrained, then reads while the
// system settles. members are the etcd members among the fault targets
// (--epochs etcd): a fault drawn for one of them is not moved to the
// holder.
func workload(o Options, nodes []string, addrs []netip.Addr, choices nemesis.Choices, kinds, members []string) gen.Generator {
	main := o.TimeLimit - recovery(o.TimeLimit)
	clients := gen.Stagger(o.Seed, 20*time.Millisecond, gen.Fn(o.Seed+1, func(_ gen.Context, r *gen.Rand) gen.Op {
		if r.IntN(20) == 0 {
			return gen.F("status", nil)
		}
		return gen.F("read", map[string]any{"address": addrs[r.IntN(len(addrs))].String()})
	}))
	// The flaps and the nemesis sit outside the client and nemesis
	// routes, which pass on only their own threads' events: the flaps
	// hear the faults, and the faults hear the reads. The flaps hand
	// their ops to client threads themselves.
	phases := []gen.Generator{
		gen.TimeLimit(main, gen.Any(gen.Clients(clients), flaps(o.Seed+2, nodes),
			targetHolder(gen.Nemesis(nemesis.Schedule(o.Seed+3, choices, faultQuiet, faultActive)), members...))),
	}
	var undrains []gen.Generator
	for _, n := range nodes {
		undrains = append(undrains, gen.Once(gen.F("undrain", map[string]any{"node": n})))
	}
	phases = append(phases,
		gen.Any(gen.Nemesis(nemesis.Heal(kinds)), gen.Clients(gen.Seq(undrains...))),
		gen.TimeLimit(recovery(o.TimeLimit), gen.Clients(gen.Stagger(o.Seed+4, 20*time.Millisecond, gen.Fn(o.Seed+5, func(_ gen.Context, r *gen.Rand) gen.Op {
			return gen.F("read", map[string]any{"address": addrs[r.IntN(len(addrs))].String()})
		})))),
	)
	return gen.Phases(phases...)
}

// flap drains a node, then undrains it flapBack later, every flapEvery:
// the holder the latest completed read saw, or, before any read saw one,
// a node drawn from the seed.
//
// A flap never drains a node that a kill, pause or isolation has taken
// out: the drain would move its addresses at once, and the failover
// measured would be the drain's, not the detection's. It waits until the
// fault ends or the reads find another holder (the detection's move),
// and then drains that one.
type flap struct {
	r      gen.Rand
	nodes  []string
	at     time.Duration // next op due; <0 before the first ask
	undo   string        // the node to undrain next; "" to drain one
	holder string        // the node the latest read found holding an address
	out    string        // the node a running kill, pause or isolation took out
}

// flapRecheck is how often a flap held back by a fault looks again.
const flapRecheck = 100 * time.Millisecond

func flaps(seed uint64, nodes []string) gen.Generator {
	return &flap{r: gen.NewRand(seed), nodes: nodes, at: -1}
}

func (f *flap) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	if f.at < 0 {
		first := *f
		first.at = ctx.Time + flapEvery
		f = &first
	}
	if ctx.Time < f.at {
		return gen.Op{Time: f.at}, f, gen.Pending
	}
	var free []int
	for _, t := range ctx.Free {
		if t >= 0 {
			free = append(free, t)
		}
	}
	if len(free) == 0 {
		return gen.Op{}, f, gen.Pending
	}
	n := *f
	var op gen.Op
	if f.undo != "" {
		op = gen.F("undrain", map[string]any{"node": f.undo})
		n.undo = ""
		n.at = ctx.Time + flapEvery - flapBack
	} else {
		drawn := n.r
		node := f.nodes[drawn.IntN(len(f.nodes))]
		if slices.Contains(f.nodes, f.holder) {
			node = f.holder
		}
		if node == f.out {
			return gen.Op{Time: ctx.Time + flapRecheck}, f, gen.Pending
		}
		n.r = drawn
		op = gen.F("drain", map[string]any{"node": node})
		n.undo = node
		n.at = ctx.Time + flapBack
	}
	th, ok := f.thread(ctx.Threads, free)
	if !ok {
		return gen.Op{}, f, gen.Pending
	}
	op.Thread, op.Time = th, ctx.Time
	return op, &n, gen.Ready
}

// thread picks the free thread to send a flap through: the first whose
// node (the harness binds thread t to nodes[t % len(nodes)]) is not the
// one a kill, pause or isolation has taken out. Sent through that node,
// a drain would wait out the fault and fail; a run whose every drain
// went that way has tested no drain at all (stats: "no drain operation
// succeeded"). When only such threads are free, it waits (false) for
// another to come free; when every thread is bound to that node (fewer
// threads than nodes), the first free one is used.
func (f *flap) thread(threads int, free []int) (int, bool) {
	for _, t := range free {
		if f.nodes[t%len(f.nodes)] != f.out {
			return t, true
		}
	}
	for t := range threads {
		if f.nodes[t%len(f.nodes)] != f.out {
			return 0, false
		}
	}
	return free[0], true
}

// Update notes the holder each completed read found, and the node a
// kill, pause or isolation takes out while it runs.
func (f *flap) Update(_ gen.Context, ev gen.Event) gen.Generator {
	if ev.Thread == gen.NemesisThread && ev.Kind == gen.Invoked {
		out := f.out
		switch v, _ := ev.Value.(map[string]any); {
		case ev.F == "start-kill" || ev.F == "start-pause" || ev.F == "start-partition" && v["shape"] == "isolate":
			out, _ = v["node"].(string)
		case strings.HasPrefix(ev.F, "stop-"):
			out = ""
		}
		if out == f.out {
			return f
		}
		n := *f
		n.out = out
		return &n
	}
	if ev.Kind == gen.Completed && ev.F == "undrain" && !ev.OK && f.undo == "" {
		// An undrain that failed or timed out (its node paused, or out
		// of contact and refusing intents) is sent again: a node left
		// drained for the rest of the run takes no more captures, and
		// the faults that take out a holder then test no failover.
		v, _ := ev.Value.(map[string]any)
		if node, _ := v["node"].(string); node != "" {
			n := *f
			n.undo = node
			n.at = ev.Time + flapRecheck
			return &n
		}
	}
	if ev.Kind != gen.Completed || ev.F != "read" {
		return f
	}
	v, _ := ev.Value.(map[string]any)
	h, _ := v["holder"].(string)
	if h == "" || nodeOf(h) == f.holder {
		return f
	}
	n := *f
	n.holder = nodeOf(h)
	return &n
}

// clockFault skews one node's clock, or strobes it when the value has a
// period.
func clockFault(c *cluster) nemesis.Fault {
	skew, strobe := nemesis.Skew(c, c.nodes), nemesis.Strobe(c, c.nodes)
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			if m, _ := v.(map[string]any); m != nil && m["period"] != nil {
				d, err := strobe.Start(ctx, v)
				return "strobe " + d, err
			}
			d, err := skew.Start(ctx, v)
			return "skew " + d, err
		},
		Stop: func(ctx context.Context) (string, error) {
			_, err1 := strobe.Stop(ctx)
			_, err2 := skew.Stop(ctx)
			return "reset", errors.Join(err1, err2)
		},
	}
}

func clockChoice(nodes []string) nemesis.Choose {
	skew := nemesis.SkewChoice(nodes, 5*time.Second)
	strobe := nemesis.StrobeChoice(nodes, 3*time.Second, 150*time.Millisecond)
	return func(r *gen.Rand) any {
		if r.IntN(3) == 0 {
			return strobe(r)
		}
		return skew(r)
	}
}

// providerKinds are what the provider nemesis does, by name; each
// cloud's simulator does it in its own faults (cloudFaults).
var providerKinds = []string{"errors", "latency", "remap-delay"}

func providerChoice(r *gen.Rand) any {
	return map[string]any{"kind": providerKinds[r.IntN(len(providerKinds))]}
}

// providerFault breaks the simulator through its admin API; the stop
// resets every fault.
func providerFault(c *cluster) nemesis.Fault {
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			m, _ := v.(map[string]any)
			kind, _ := m["kind"].(string)
			f, ok := cloudFaults[c.cloud][kind]
			if !ok {
				return "", fmt.Errorf("provider fault %q is not one of %s", kind, strings.Join(providerKinds, ", "))
			}
			return kind, c.simSend(ctx, "PUT", "/admin/faults", f)
		},
		Stop: func(ctx context.Context) (string, error) {
			return "reset", c.simSend(ctx, "POST", "/admin/reset", nil)
		},
	}
}

// collect runs after the final heal: it waits until every node agrees on
// each address's desired holder and the provider shows it there (up to
// the bound), then saves the simulator's record as mutations.json.
func collect(ctx context.Context, c *cluster, col *collected, dir string) error {
	start := time.Now()
	var lastErr error
	for {
		desired, actual, ok, err := c.settled(ctx)
		col.desired, col.actual = desired, actual
		lastErr = err
		if ok {
			col.converged = true
			break
		}
		if time.Since(start) > col.bound || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	col.waited = time.Since(start)
	var raw []mutationRecord
	if err := c.simGet(ctx, "/admin/mutations", &raw); err != nil {
		col.err = err
		return err
	}
	col.mutations = raw
	if err := writeJSONFile(filepath.Join(dir, "mutations.json"), raw); err != nil {
		return err
	}
	col.calls, col.callsCounted, col.callsErr = c.nodeCalls(ctx)
	if c.remote != nil {
		// The cloud's refusals are read from the nodes' logs.
		c.remote.fetchLogs(ctx)
	}
	col.wall = c.countWall(ctx)
	if c.line != nil {
		col.line, col.lineErr = c.line.records(ctx)
		if col.lineErr == nil {
			if err := writeJSONFile(filepath.Join(dir, "etcd-records.json"), col.line); err != nil {
				return err
			}
		}
		col.tokens = c.line.readTokens(ctx, col.mutations)
	}
	if !col.converged && lastErr != nil {
		col.err = lastErr
	}
	return nil
}

// settled reads every node's status and the provider's state.
func (c *cluster) settled(ctx context.Context) (desired, actual map[string]string, ok bool, err error) {
	desired, actual = map[string]string{}, map[string]string{}
	ok = true
	for _, n := range c.nodes {
		st, err := c.status(ctx, n)
		if err != nil {
			return desired, actual, false, fmt.Errorf("status of %s: %w", n, err)
		}
		for _, a := range st.Addresses {
			if d, seen := desired[a.Address]; seen && d != a.DesiredHolder {
				ok = false
				desired[a.Address] = d + " or " + a.DesiredHolder
				continue
			}
			desired[a.Address] = a.DesiredHolder
		}
	}
	placed, err := c.placement(ctx)
	if err != nil {
		return desired, actual, false, err
	}
	maps.Copy(actual, placed)
	for _, a := range c.addrs {
		if desired[a.String()] == "" || actual[a.String()] != desired[a.String()] {
			ok = false
		}
	}
	return desired, actual, ok, nil
}

func writeJSONFile(path string, v any) error {
	b, err := jsonIndent(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
