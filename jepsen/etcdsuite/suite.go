// Package etcdsuite is the Jepsen-style test of a system we did not write:
// a real etcd cluster, one process per member on loopback, driven through
// the harness. Clients talk to their member directly with the official Go
// client; peer (raft) traffic goes through the harness's fault-injecting
// proxies, which every member advertises as its peer URL, so partitions
// cut real raft traffic. Nemeses partition, pause (SIGSTOP) and kill
// (SIGKILL, then restart on the same data) members. Two nemeses go through
// etcd's own APIs (members.go): leader moves the leadership to a follower
// (MoveLeader) or pauses whichever member leads; member removes a member
// (MemberRemove), stops it and wipes its data, and at the heal adds it back
// (MemberAdd) on a fresh data folder with --initial-cluster-state
// existing. Both are confirmed wherever the members run. Clock faults do
// not apply: an external binary outside a namespace cannot have its clock
// moved.
//
// Two workloads: register (reads, writes and compare-and-sets on
// independent keys, checked for linearizability key by key) and
// list-append (transactions of appends and reads, each one etcd Txn
// guarded by mod revisions, checked for strict serializability). With
// SerializableReads, reads are served by whichever member the client
// talks to, possibly stale, as etcd documents: the register test must then
// find the stale reads.
//
// With Options.NodesFile the members run on machines the harness did not
// start, reached over SSH through verify/control: the etcd binary is
// uploaded to each node, a member started there as a daemon on the node's
// address with etcd's default ports, clients dial the nodes directly,
// partitions are nftables rules installed on the nodes over SSH, and
// every fault is confirmed after it is made (the process stopped, the pid
// gone, the cut links probed). Each confirmation is written into the
// fault's completion in the history, and a fault that was not confirmed
// makes the run's verdict unknown (the "faults" checker).
package etcdsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
	"github.com/ipfence/ipfence/verify/workload"
)

// Workloads are the workloads the test knows.
var Workloads = []string{"register", "list-append", "set"}

// Nemeses are the fault kinds the test knows, in the order --nemesis lists
// them: partition, pause and kill through the harness (and on remote
// nodes, the control layer); leader and member through etcd's own APIs
// (members.go), confirmed on loopback too.
var Nemeses = []string{"partition", "pause", "kill", "leader", "member"}

// DefaultNemeses are the kinds `ipfence-verify test etcd` injects unless told.
var DefaultNemeses = []string{"partition", "pause", "kill"}

// Options configure a run. Zero numbers take the defaults of
// `ipfence-verify test etcd`.
type Options struct {
	// Binary is the etcd executable (default: etcd on the PATH).
	Binary string
	// Workload is "register" or "list-append".
	Workload string
	// SerializableReads serves reads from the client's member without
	// consulting the leader (clientv3.WithSerializable).
	SerializableReads bool
	// Nodes is the number of members (default 3); Concurrency the client
	// threads (default 2 per member), spread over the members.
	Nodes, Concurrency int
	// Rate is the target rate of client operations per second, all
	// threads together (default 500).
	Rate int
	// TimeLimit is the whole run, the final recovery included (default
	// 60s).
	TimeLimit time.Duration
	// Nemesis are the fault kinds to inject (nil: none).
	Nemesis []string
	// Seed seeds the generators.
	Seed uint64
	// Store is the store's root folder (default "store").
	Store string
	// Command is the command line written beside the history.
	Command []string
	// Progress and TTY: where the progress goes, and whether it is a
	// terminal.
	Progress io.Writer
	TTY      bool

	// NodesFile, when set, runs the members on the machines it lists
	// (control.ParseNodes), reached over SSH, instead of on loopback:
	// Binary is uploaded to each, partitions are nftables rules on the
	// nodes, and every fault is confirmed. Nodes is then the file's count.
	NodesFile string
	// KnownHosts are the known_hosts files the nodes' host keys are
	// checked against (default ~/.ssh/known_hosts).
	KnownHosts []string
	// RemoteDir is the folder on each node that holds its member's binary,
	// data and log, as RemoteDir/<node> (default DefaultRemoteDir); it is
	// wiped at the start of a run.
	RemoteDir string
}

// ErrNoEtcd says no etcd binary was found.
var ErrNoEtcd = errors.New("no etcd binary: install Debian's etcd-server (apt-get install etcd-server) or pass --etcd-binary")

// FindEtcd returns the etcd binary to run: bin when set, else etcd on the
// PATH.
func FindEtcd(bin string) (string, error) {
	if bin == "" {
		p, err := exec.LookPath("etcd")
		if err != nil {
			return "", ErrNoEtcd
		}
		return p, nil
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("--etcd-binary %s: %w", bin, err)
	}
	return filepath.Abs(p)
}

func (o *Options) defaults() error {
	if o.NodesFile != "" {
		nodes, err := readNodesFile(o.NodesFile)
		if err != nil {
			return err
		}
		o.Nodes = len(nodes)
		if o.RemoteDir == "" {
			o.RemoteDir = DefaultRemoteDir
		}
		if !path.IsAbs(o.RemoteDir) || path.Clean(o.RemoteDir) == "/" {
			return fmt.Errorf("--remote-dir must be an absolute folder other than /, not %q", o.RemoteDir)
		}
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Concurrency == 0 {
		o.Concurrency = 2 * o.Nodes
	}
	if o.Rate == 0 {
		o.Rate = 500
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
	case !slices.Contains(Workloads, o.Workload):
		return fmt.Errorf("--workload: %q is not one of %s", o.Workload, strings.Join(Workloads, ", "))
	case o.Nodes < 1 || o.Nodes > 9:
		return fmt.Errorf("--nodes must be from 1 to 9, not %d", o.Nodes)
	case o.Concurrency < 1 || o.Concurrency > 1000:
		return fmt.Errorf("--concurrency must be from 1 to 1000, not %d", o.Concurrency)
	case o.Rate < 1 || o.Rate > 100_000:
		return fmt.Errorf("--rate must be from 1 to 100000 operations per second, not %d", o.Rate)
	case o.TimeLimit < 10*time.Second:
		return fmt.Errorf("--time-limit must be at least 10s (the run ends with %v of recovery), not %v", recovery(o.TimeLimit), o.TimeLimit)
	}
	for _, k := range o.Nemesis {
		if !slices.Contains(Nemeses, k) {
			return fmt.Errorf("--nemesis: unknown fault %q; valid: %s", k, strings.Join(Nemeses, ","))
		}
	}
	// A member's removal must leave a cluster that can add it back (etcd
	// refuses a change that would lose the quorum); a move needs a
	// follower.
	if slices.Contains(o.Nemesis, "member") && o.Nodes < 3 {
		return fmt.Errorf("--nemesis member needs at least 3 members, not %d", o.Nodes)
	}
	if slices.Contains(o.Nemesis, "leader") && o.Nodes < 2 {
		return fmt.Errorf("--nemesis leader needs at least 2 members, not %d", o.Nodes)
	}
	bin, err := FindEtcd(o.Binary)
	if err != nil {
		return err
	}
	o.Binary = bin
	return nil
}

// recovery is the quiet end of a run, after the final heal.
func recovery(limit time.Duration) time.Duration { return min(10*time.Second, limit/4) }

// Fault schedule: quiet, then a fault for active, and so on.
const (
	faultQuiet  = 3 * time.Second
	faultActive = 4 * time.Second
)

// Register keys: one key takes opsPerKey operations, then the next key
// does, so that each key's history stays small enough to check while the
// run is long. Values are drawn from a few, so that compare-and-sets hit.
const (
	opsPerKey      = 200
	registerValues = 5
)

// List-append keys: activeKeys are in use at a time; a key takes
// writesPerKey appends, then a fresh key replaces it; transactions have 1
// to maxTxnLen micro-operations.
const (
	activeKeys   = 8
	writesPerKey = 32
	maxTxnLen    = 4
)

// Run runs the etcd test and returns the harness's outcome.
func Run(ctx context.Context, o Options) (*harness.Outcome, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	dir, err := harness.NewRunDir(o.Store, "etcd", time.Now())
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	token := fmt.Sprintf("ipfence-%d-%d", o.Seed, time.Now().UnixNano())
	var (
		nodes  []string
		faults map[string]nemesis.Fault
		dial   dialer
		ledger *control.Ledger
	)
	if o.NodesFile != "" {
		c, err := startRemote(ctx, o, dir, token)
		if err != nil {
			return &harness.Outcome{Dir: dir}, fmt.Errorf("starting etcd on the nodes: %w", err)
		}
		defer c.stop()
		if err := writeClusterFile(dir, o, c.version, c.names, c.args); err != nil {
			return &harness.Outcome{Dir: dir}, err
		}
		nodes, dial, ledger = c.names, c, c.ledger
		faults = map[string]nemesis.Fault{
			"partition": control.Confirmed(nemesis.Partition(c.net, nodes), ledger),
			"pause":     control.Confirmed(nemesis.Pause(c.procs, nodes), ledger),
			"kill":      control.Confirmed(nemesis.Kill(c.procs, nodes), ledger),
			"leader":    control.Confirmed(leaderFault(c, nodes, ledger), ledger),
			"member":    control.Confirmed(memberFault(c, nodes, ledger), ledger),
		}
	} else {
		c, err := startCluster(ctx, o.Binary, dir, o.Nodes, token)
		if err != nil {
			return &harness.Outcome{Dir: dir}, fmt.Errorf("starting etcd: %w", err)
		}
		defer c.stop()
		if err := writeClusterFile(dir, o, c.version, c.nodes, c.args); err != nil {
			return &harness.Outcome{Dir: dir}, err
		}
		nodes, dial = c.nodes, c
		// On loopback the pause, resume and kill of the members (children
		// of this process) are confirmed as over SSH, by the kernel's
		// view of the pid; the partition acts on the harness's own
		// proxies, which drop what they carry once told, so there is
		// nothing outside this process to probe.
		l := &control.Ledger{}
		procs := confirmedProcs{c, l}
		faults = map[string]nemesis.Fault{
			"partition": nemesis.Partition(meshNet{c.mesh, netfault.Drop}, nodes),
			"pause":     control.Confirmed(nemesis.Pause(procs, nodes), l),
			"kill":      control.Confirmed(nemesis.Kill(procs, nodes), l),
			"leader":    control.Confirmed(leaderFault(c, nodes, l), l),
			"member":    control.Confirmed(memberFault(c, nodes, l), l),
		}
		if slices.ContainsFunc(o.Nemesis, func(n string) bool { return n != "partition" }) {
			ledger = l
		}
	}
	choices := nemesis.Choices{Values: map[string]nemesis.Choose{
		"partition": nemesis.PartitionChoice(nodes),
		"pause":     nemesis.NodeChoice(nodes),
		"kill":      nemesis.NodeChoice(nodes),
		"leader":    leaderChoice,
		"member":    nemesis.NodeChoice(nodes),
	}}
	used := map[string]nemesis.Fault{}
	for _, k := range Nemeses {
		if slices.Contains(o.Nemesis, k) {
			choices.Kinds = append(choices.Kinds, k)
			used[k] = faults[k]
		}
	}

	checks := map[string]checker.Checker{
		"stats":  checker.Stats(),
		"errors": checker.UnhandledErrors(),
		"perf":   checker.Perf(),
	}
	if ledger != nil {
		checks["faults"] = control.FaultsChecker(ledger)
	}
	var ops gen.Generator
	if o.Workload == "register" {
		m, err := model.Lookup("independent-cas-register")
		if err != nil {
			return nil, err
		}
		checks["linear"] = checker.Linearizable(checker.LinearOptions{Model: m, Timeout: 2 * time.Minute})
		ops = &registers{r: gen.NewRand(o.Seed + 1)}
	} else if o.Workload == "list-append" {
		checks["transactional"] = explained(checker.Transactional(checker.TransactionalOptions{
			Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "strict-serializable"},
			Timeout:   2 * time.Minute,
		}))
		ops = newAppends(o.Seed + 1)
	} else {
		checks["set"] = setChecker()
		ops = &setOps{r: gen.NewRand(o.Seed + 1)}
	}
	test := harness.Test{
		Name: "etcd", Dir: dir, Nodes: nodes, Concurrency: o.Concurrency,
		Client:    &client{c: dial, workload: o.Workload, serializable: o.SerializableReads},
		Nemesis:   nemesis.Compose(used),
		Generator: schedule(o, ops, choices),
		Checker:   withStory(o.Concurrency, checker.Compose(checks)),
		Seed:      o.Seed, Command: o.Command, Progress: o.Progress, TTY: o.TTY, TimeLimit: o.TimeLimit,
	}
	return harness.Run(ctx, test)
}

// writeClusterFile records what ran: the etcd version and each member's
// command line.
func writeClusterFile(dir string, o Options, version string, nodes []string, args map[string][]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nbinary: %s\nworkload: %s\nserializable reads: %v\n", version, o.Binary, o.Workload, o.SerializableReads)
	if o.NodesFile != "" {
		fmt.Fprintf(&b, "nodes file: %s (the binary uploaded to %s/<node>/etcd)\n", o.NodesFile, o.RemoteDir)
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s: %s %s\n", n, o.Binary, strings.Join(args[n], " "))
	}
	return os.WriteFile(filepath.Join(dir, "etcd.txt"), []byte(b.String()), 0o644)
}

// schedule is the whole run: client operations at the rate throughout,
// one generator from start to end so that no key or value is handed out
// twice, and beside them faults until the recovery, then every fault
// healed.
func schedule(o Options, ops gen.Generator, choices nemesis.Choices) gen.Generator {
	dt := time.Second / time.Duration(o.Rate)
	main := o.TimeLimit - recovery(o.TimeLimit)
	return gen.TimeLimit(o.TimeLimit, gen.Any(
		gen.Clients(gen.Stagger(o.Seed, dt, ops)),
		gen.Nemesis(gen.Phases(
			gen.TimeLimit(main, nemesis.Schedule(o.Seed+2, choices, faultQuiet, faultActive)),
			nemesis.Heal(choices.Kinds)))))
}

// freeClient returns the lowest free client thread, or false.
func freeClient(ctx gen.Context) (int, bool) {
	for _, t := range ctx.Free {
		if t >= 0 {
			return t, true
		}
	}
	return 0, false
}

// registers hands out register operations, opsPerKey on each key in turn:
// half reads, a quarter writes, a quarter compare-and-sets.
type registers struct {
	r gen.Rand
	n int // operations handed out
}

func (g *registers) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	t, ok := freeClient(ctx)
	if !ok {
		return gen.Op{}, g, gen.Pending
	}
	n := *g
	key := int64(n.n / opsPerKey)
	n.n++
	var op gen.Op
	switch n.r.IntN(4) {
	case 0, 1:
		op = gen.F("read", []any{key, nil})
	case 2:
		op = gen.F("write", []any{key, int64(n.r.IntN(registerValues))})
	default:
		op = gen.F("cas", []any{key, []any{int64(n.r.IntN(registerValues)), int64(n.r.IntN(registerValues))}})
	}
	op.Thread, op.Time = t, ctx.Time
	return op, &n, gen.Ready
}

func (g *registers) Update(gen.Context, gen.Event) gen.Generator { return g }

// appends hands out list-append transactions over activeKeys keys; each
// key's appended values are 1, 2, 3, ... so that every append is unique.
type appends struct {
	r     gen.Rand
	keys  [activeKeys]int64 // the active keys
	next  [activeKeys]int64 // the last value appended to each
	fresh int64             // the next new key
}

func newAppends(seed uint64) *appends {
	g := &appends{r: gen.NewRand(seed)}
	for i := range g.keys {
		g.keys[i] = int64(i)
	}
	g.fresh = activeKeys
	return g
}

func (g *appends) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	t, ok := freeClient(ctx)
	if !ok {
		return gen.Op{}, g, gen.Pending
	}
	n := *g
	mops := make([]any, 1+n.r.IntN(maxTxnLen))
	for i := range mops {
		s := n.r.IntN(activeKeys)
		if n.r.IntN(2) == 0 {
			mops[i] = []any{"r", n.keys[s], nil}
			continue
		}
		n.next[s]++
		mops[i] = []any{"append", n.keys[s], n.next[s]}
		if n.next[s] >= writesPerKey {
			n.keys[s], n.next[s] = n.fresh, 0
			n.fresh++
		}
	}
	op := gen.F("txn", mops)
	op.Thread, op.Time = t, ctx.Time
	return op, &n, gen.Ready
}

func (g *appends) Update(gen.Context, gen.Event) gen.Generator { return g }

// readEvery is how often, among set operations, one is a read of the
// whole set: reads grow with the set, adds do not.
const readEvery = 10

// setOps hands out adds of 0, 1, 2, ... to the set, with a read of the
// whole set in place of every readEvery-th.
type setOps struct {
	r gen.Rand
	n int64 // the next element
}

func (g *setOps) Next(ctx gen.Context) (gen.Op, gen.Generator, gen.Status) {
	t, ok := freeClient(ctx)
	if !ok {
		return gen.Op{}, g, gen.Pending
	}
	n := *g
	var op gen.Op
	if n.r.IntN(readEvery) == 0 {
		op = gen.F("read", nil)
	} else {
		op = gen.F("add", n.n)
		n.n++
	}
	op.Thread, op.Time = t, ctx.Time
	return op, &n, gen.Ready
}

func (g *setOps) Update(gen.Context, gen.Event) gen.Generator { return g }

// setChecker is Jepsen's set-full check with linearizable reads demanded:
// an element known to be in the set must be in every read that begins
// after that.
func setChecker() checker.Checker {
	return checker.Func(func(_ context.Context, r *checker.Run) checker.Result {
		rep, err := workload.Check(workload.SetFull, &history.History{Format: history.JSONL, Events: r.Events},
			workload.Options{SetFullLinearizable: true})
		if err != nil {
			return checker.Errorf("%v", err)
		}
		fields := maps.Clone(rep.Fields)
		if fields == nil {
			fields = map[string]any{}
		}
		fields["summary"] = rep.Summary()
		return checker.Result{Valid: rep.Valid, Fields: fields}
	})
}

// explained adds to the transactional checker's result the explanation of
// each anomaly it kept, in words, as "findings" (the terminal shows the
// first few): the checker writes them to anomalies.json only.
func explained(inner checker.Checker) checker.Checker {
	return checker.Func(func(ctx context.Context, r *checker.Run) checker.Result {
		res := inner.Check(ctx, r)
		if r.Dir == "" || res.Valid != linear.False {
			return res
		}
		b, err := os.ReadFile(filepath.Join(r.Dir, "anomalies.json"))
		if err != nil {
			return res
		}
		var a struct {
			Types     []string `json:"anomaly_types"`
			Anomalies map[string][]struct {
				Explanation string `json:"explanation"`
			} `json:"anomalies"`
			Counts map[string]int `json:"counts"`
		}
		if json.Unmarshal(b, &a) != nil {
			return res
		}
		var findings []string
		total := 0
		for _, typ := range a.Types {
			for _, an := range a.Anomalies[typ] {
				findings = append(findings, typ+": "+an.Explanation)
			}
			total += max(a.Counts[typ], len(a.Anomalies[typ]))
		}
		if res.Fields == nil {
			res.Fields = map[string]any{}
		}
		res.Fields["findings"], res.Fields["findings_total"] = findings, total
		return res
	})
}
