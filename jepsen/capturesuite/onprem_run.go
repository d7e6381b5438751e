//go:build linux

package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/etcdline"
	onpremdrv "github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/internal/monotime"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// OnPremNemeses are the faults of the on-premises test: clock faults and
// provider faults have nothing to act on there.
var OnPremNemeses = []string{"partition", "pause", "kill"}

// observeInterval is how often the observer asks who answers ARP for the
// address.
const observeInterval = 50 * time.Millisecond

// observeSenders is how many addresses the observer's requests come from,
// in turn: a reply is told from a current one unless it is that many
// rounds late (250 ms).
const observeSenders = 5

// runOnPrem is the capture test on premises: hosts in an L2 lab of network
// namespaces, each with keepalived (VRRPv3, adverts every 100 ms) and an
// ipfence node capturing the lab's address by proxy-ARP under
// keepalived's authority; an observer host asks every 50 ms who answers
// ARP for the address (the single-holder checker reads that), and clients
// connect to the address and note whose workload answers. With --epochs
// etcd the pool's epoch line is in a 3-member etcd on this namespace's
// loopback, which each node reaches through a proxy per member listening
// on its own namespace's loopback: partitions cut those proxies as they
// cut the hosts (nftables), pauses and kills take members too, and the
// etcd-line checker compares etcd's record with the host answering ARP.
func runOnPrem(ctx context.Context, o Options) (*harness.Outcome, error) {
	for _, k := range o.Nemesis {
		if !slices.Contains(OnPremNemeses, k) {
			return nil, fmt.Errorf("--nemesis: %q does not apply on premises; valid: %s", k, strings.Join(OnPremNemeses, ","))
		}
	}
	if !o.Netns {
		return nil, errors.New("--provider onprem needs --net netns: the hosts are network namespaces on one L2 segment")
	}
	if o.UnsafeDisableFence {
		return nil, errors.New("--unsafe-disable-fence tests the cloud fence; it does not apply on premises")
	}
	dir, err := harness.NewRunDir(o.Store, "capture", time.Now())
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	absBin, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, err
	}
	oo := onpremOptions{bin: absBin, dir: dir, hosts: o.Nodes, version: 3, advert: 100 * time.Millisecond,
		garpRepeat: 5 * time.Second, prefix: "hc"}
	if o.Epochs == "etcd" {
		oo.etcdDir = filepath.Join(dir, "etcd")
	}
	c, err := startOnPrem(ctx, oo)
	if err != nil {
		return &harness.Outcome{Dir: dir}, fmt.Errorf("starting the on-premises cluster: %w", err)
	}
	defer c.stop()
	var ob *arpwatch.Observer
	rec := &onpremRecord{hosts: map[string]string{}}
	for _, h := range c.hosts {
		rec.hosts[c.lab.MAC(h).String()] = h
	}
	obsCtx, stopObs := context.WithCancel(context.Background())
	defer stopObs()
	// Requests from spare addresses in turn tie each reply to the round
	// it answers: a host's reply delayed past its round (a loaded
	// machine) then counts for that round, not beside the next holder's
	// in the next one as a split brain nobody had.
	senders, err := c.lab.SpareAddresses(observeSenders)
	if err != nil {
		return &harness.Outcome{Dir: dir}, fmt.Errorf("starting the ARP observer: %w", err)
	}
	err = c.lab.Do(c.lab.Observer(), func() error {
		var err error
		// The observer's offsets count from its start, taken as it
		// starts: within microseconds of this reading.
		rec.startMono = monotime.Now()
		ob, err = arpwatch.Observe(obsCtx, c.lab.LANDevice(), []netip.Addr{c.lab.Address()},
			arpwatch.ObserveOptions{Interval: observeInterval, Senders: senders})
		return err
	})
	if err != nil {
		return &harness.Outcome{Dir: dir}, fmt.Errorf("starting the ARP observer: %w", err)
	}
	defer ob.Close()

	// targets are what the nemeses draw from: the hosts, and the etcd
	// members when the epoch line is there (a member partitioned away
	// from a host is cut off from the host's node, not from keepalived).
	targets := c.hosts
	var net nemesis.Net = labNet{c}
	var procs nemesis.Processes = hostProcs{c}
	if c.line != nil && !o.SpareEtcd {
		targets = append(slices.Clone(c.hosts), c.line.members.Members()...)
		net = lineNet{nodes: c.hosts, net: net, line: c.line, mode: netfault.Drop}
		procs = lineProcs{nodes: procs, line: c.line}
	}
	faults := map[string]nemesis.Fault{
		"partition": nemesis.Partition(net, targets),
		"pause":     nemesis.Pause(procs, targets),
		"kill":      nemesis.Kill(procs, targets),
	}
	choices := nemesis.Choices{Values: map[string]nemesis.Choose{
		"partition": nemesis.PartitionChoice(targets),
		"pause":     nemesis.NodeChoice(targets),
		"kill":      nemesis.NodeChoice(targets),
	}}
	used := map[string]nemesis.Fault{}
	for _, k := range OnPremNemeses {
		if slices.Contains(o.Nemesis, k) {
			choices.Kinds = append(choices.Kinds, k)
			used[k] = faults[k]
		}
	}
	var report arpwatch.Report
	var settled time.Duration
	settledOK := false
	var line map[string]etcdline.Record
	var lineErr error
	checks := map[string]checker.Checker{
		"single-holder": checker.Func(func(context.Context, *checker.Run) checker.Result { return responders(report, c) }),
		"convergence": checker.Func(func(context.Context, *checker.Run) checker.Result {
			return checker.Result{Valid: verdict(settledOK), Fields: map[string]any{"settled_s": settled.Seconds(), "bound_s": convergenceBound.Seconds()}}
		}),
		"stats":  checker.Stats(),
		"errors": checker.UnhandledErrors(),
		"perf":   checker.Perf(),
	}
	if c.line != nil {
		checks["etcd-line"] = checker.Func(func(context.Context, *checker.Run) checker.Result {
			return lineAgreesOnPrem(c, report, line, lineErr)
		})
	}
	test := harness.Test{
		Name: "capture", Dir: dir, Nodes: c.hosts, Concurrency: o.Concurrency,
		Client: &onpremClient{c: c}, Nemesis: nemesis.Compose(used),
		Generator: onpremWorkload(o, choices),
		Checker:   withOnPremStory(rec, o.Concurrency, checker.Compose(checks)),
		Seed:      o.Seed, Command: o.Command, Progress: o.Progress, TTY: o.TTY, TimeLimit: o.TimeLimit,
		Teardown: func(ctx context.Context, dir string) error {
			// After the final heal one host, and only one, must answer
			// for a second on end.
			start := time.Now()
			for time.Since(start) < convergenceBound && ctx.Err() == nil {
				time.Sleep(time.Second)
				a, ok := ob.Report().Address(c.lab.Address())
				if ok && len(a.Last) == 1 && len(a.Intervals) > 0 {
					last := a.Intervals[len(a.Intervals)-1]
					if len(last.Responders) == 1 && last.End-last.Start >= time.Second {
						settledOK = true
						break
					}
				}
			}
			settled = time.Since(start)
			report = ob.Report()
			rec.report = report
			if c.line != nil {
				if line, lineErr = c.line.records(ctx); lineErr == nil {
					if err := writeJSONFile(filepath.Join(dir, "etcd-records.json"), line); err != nil {
						return err
					}
				}
			}
			return writeJSONFile(filepath.Join(dir, "responders.json"), report)
		},
	}
	return harness.Run(ctx, test)
}

// lineAgreesOnPrem checks the line in etcd against the LAN after the run:
// there is no provider's log of mutations on premises, so the LAN's last
// word stands in for it. The address has a record in etcd at an epoch
// above zero (the nodes kept their line there, not among themselves), and
// the one host that answered ARP for it in the observer's last round is
// the holder etcd names: a host answering that etcd does not name acted
// outside the line.
func lineAgreesOnPrem(c *onprem, r arpwatch.Report, line map[string]etcdline.Record, lineErr error) checker.Result {
	if lineErr != nil {
		return checker.Errorf("reading the line from etcd: %v", lineErr)
	}
	addr := c.lab.Address().String()
	name := map[string]string{}
	for _, h := range c.hosts {
		name[c.lab.MAC(h).String()] = h
	}
	var last []string
	if a, ok := r.Address(c.lab.Address()); ok {
		for _, m := range a.Last {
			last = append(last, name[m.String()])
		}
	}
	var findings []string
	rec, ok := line[addr]
	switch {
	case !ok:
		findings = append(findings, fmt.Sprintf("%s: no record in etcd", addr))
	case rec.Epoch == 0:
		findings = append(findings, fmt.Sprintf("%s: etcd holds epoch 0 for %s", addr, rec.Holder))
	case len(last) != 1:
		findings = append(findings, fmt.Sprintf("%s: the last round had %d responders %v; etcd names %s", addr, len(last), last, rec.Holder))
	case last[0] != rec.Holder:
		findings = append(findings, fmt.Sprintf("%s: %s answers ARP, etcd names %s at epoch %d", addr, last[0], rec.Holder, rec.Epoch))
	}
	recs := map[string]string{}
	for a, r := range line {
		recs[a] = fmt.Sprintf("epoch %d for %s at revision %d", r.Epoch, r.Holder, r.Rev)
	}
	return checker.Result{Valid: verdict(len(findings) == 0), Fields: map[string]any{
		"records": recs, "last_responders": last, "findings": findings}}
}

func verdict(ok bool) linear.Verdict {
	if ok {
		return linear.True
	}
	return linear.False
}

// responders judges the observer's record: any time with two hosts
// answering ARP for the address is a violation of single holder, the
// documented limit of on-premises capture under partitions.
func responders(r arpwatch.Report, c *onprem) checker.Result {
	a, ok := r.Address(c.lab.Address())
	if !ok || a.Rounds == 0 {
		return checker.Errorf("the observer recorded no round")
	}
	name := map[string]string{}
	for _, h := range c.hosts {
		name[c.lab.MAC(h).String()] = h
	}
	var episodes []string
	for _, iv := range a.Intervals {
		if len(iv.Responders) > 1 {
			var hs []string
			for _, m := range iv.Responders {
				hs = append(hs, name[m.String()])
			}
			episodes = append(episodes, fmt.Sprintf("%s from %.2fs to %.2fs", strings.Join(hs, "+"), iv.Start.Seconds(), iv.End.Seconds()))
		}
	}
	var none time.Duration
	for _, iv := range a.Intervals {
		if len(iv.Responders) == 0 {
			none += iv.End - iv.Start
		}
	}
	fields := map[string]any{
		"dual_responder_ms": a.DualResponder.Milliseconds(), "no_responder_ms": none.Milliseconds(),
		"rounds": a.Rounds, "observed_s": a.Observed.Seconds(), "changes": len(a.Changes),
		// Replies credited to the round they answered after it ended, and
		// replies that answered neither open round (dropped): how slow the
		// machine was, beside a verdict the tying keeps honest.
		"late_replies": a.LateReplies, "unmatched_replies": a.UnmatchedReplies,
	}
	if len(episodes) > 0 {
		fields["dual_responder_episodes"] = episodes
	}
	return checker.Result{Valid: verdict(a.DualResponder == 0), Fields: fields}
}

// onpremWorkload: clients connect to the address until the recovery,
// with the nemesis schedule beside them; then every fault is healed and
// clients go on while the hosts settle.
func onpremWorkload(o Options, choices nemesis.Choices) gen.Generator {
	main := o.TimeLimit - recovery(o.TimeLimit)
	read := func(seed uint64) gen.Generator {
		return gen.Stagger(seed, 20*time.Millisecond, gen.Repeat(gen.F("read", nil)))
	}
	return gen.Phases(
		gen.TimeLimit(main, gen.Any(gen.Clients(read(o.Seed)), gen.Nemesis(nemesis.Schedule(o.Seed+3, choices, faultQuiet, faultActive)))),
		gen.Nemesis(nemesis.Heal(choices.Kinds)),
		gen.TimeLimit(recovery(o.TimeLimit), gen.Clients(read(o.Seed+4))),
	)
}

// onpremClient connects from the observer to the address and reads whose
// workload answered: {"holder": host}.
type onpremClient struct{ c *onprem }

func (cl *onpremClient) Open(context.Context, string) (harness.Client, error) { return cl, nil }
func (cl *onpremClient) Setup(context.Context) error                          { return nil }
func (cl *onpremClient) Teardown(context.Context) error                       { return nil }
func (cl *onpremClient) Close(context.Context) error                          { return nil }

func (cl *onpremClient) Invoke(_ context.Context, op harness.Op) harness.Completion {
	if op.F != "read" {
		return harness.Fail(op.Value, "unknown operation "+op.F)
	}
	host, err := cl.c.lab.Fetch(workloadPort, 500*time.Millisecond)
	if err != nil {
		// A connection that failed changed nothing.
		return harness.Fail(op.Value, err.Error())
	}
	return harness.OK(map[string]any{"holder": host})
}

// labNet partitions the hosts through the lab (nftables in each host's
// namespace); the observer is never cut.
type labNet struct{ c *onprem }

func (n labNet) Partition(_ context.Context, g netfault.Grudge) error { return n.c.lab.Partition(g) }
func (n labNet) Heal(context.Context) error                           { return n.c.lab.Heal() }

// hostProcs pauses and kills hosts. Pause stops keepalived and ipfence
// (SIGSTOP to their process groups) while the host's kernel goes on
// answering ARP, as a hung daemon's would. Kill is a host crash: the
// processes are killed and the LAN interface goes down; the restart is a
// reboot, which forgets the kernel's proxy entries and routes, brings the
// interface up and starts ipfence, then keepalived.
type hostProcs struct{ c *onprem }

func (p hostProcs) signal(h string, sig syscall.Signal) error {
	p.c.mu.Lock()
	ka := p.c.kas[h]
	p.c.mu.Unlock()
	var errs []error
	if ka != nil {
		errs = append(errs, syscall.Kill(-ka.Pid(), sig))
	}
	if pid, ok := p.c.nodes.Pid(h); ok {
		errs = append(errs, syscall.Kill(-pid, sig))
	}
	return errors.Join(errs...)
}

func (p hostProcs) Pause(h string) error  { return p.signal(h, syscall.SIGSTOP) }
func (p hostProcs) Resume(h string) error { return p.signal(h, syscall.SIGCONT) }

func (p hostProcs) Kill(h string) error {
	p.c.mu.Lock()
	ka := p.c.kas[h]
	delete(p.c.kas, h)
	p.c.mu.Unlock()
	if ka == nil && !p.c.nodes.Running(h) {
		return fmt.Errorf("host %s is down already", h)
	}
	if err := p.c.lab.Command(h, "ip", "link", "set", p.c.lab.LANDevice(), "down").Run(); err != nil {
		return fmt.Errorf("taking %s's LAN down: %w", h, err)
	}
	if ka != nil {
		_ = ka.Kill()
	}
	if pid, ok := p.c.nodes.Pid(h); ok {
		// The whole group, as a crash takes every process of the host.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = p.c.nodes.Kill(h)
	}
	return nil
}

func (p hostProcs) Restart(ctx context.Context, h string) error {
	if p.c.nodes.Running(h) {
		return nil
	}
	// What a reboot forgets: the proxy entry and the driver's route.
	addr := p.c.lab.Address().String()
	_ = p.c.lab.Command(h, "ip", "neigh", "del", "proxy", addr, "dev", p.c.lab.LANDevice()).Run()
	_ = p.c.lab.Command(h, "ip", "route", "del", addr+"/32", "proto", fmt.Sprint(onpremdrv.RouteProtocol)).Run()
	if err := p.c.lab.Command(h, "ip", "link", "set", p.c.lab.LANDevice(), "up").Run(); err != nil {
		return fmt.Errorf("bringing %s's LAN up: %w", h, err)
	}
	if err := p.c.startNode(ctx, h); err != nil {
		return err
	}
	return p.c.startKeepalived(h)
}
