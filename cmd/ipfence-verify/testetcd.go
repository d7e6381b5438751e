package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/jepsen/etcdsuite"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/linear"
)

func runTestEtcd(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("test etcd", "test etcd --workload register|list-append|set [--serializable-reads] [--nodes N] [--time-limit D] [--nemesis K,...] [--seed S] [--concurrency C] [--rate R] [--store DIR] [--etcd-binary PATH] [--nodes-file FILE [--known-hosts FILE,...] [--remote-dir DIR]]", stderr)
	workload := fs.String("workload", "", "register (reads, writes, compare-and-sets on independent keys; linearizability),\nlist-append (transactions of appends and reads; strict serializability)\nor set (adds and whole-set reads; Jepsen's set-full, stale reads refused)")
	serializable := fs.Bool("serializable-reads", false, "serve reads from the client's own member (clientv3.WithSerializable): possibly stale,\nas etcd documents; the register test must catch it")
	nodes := fs.Int("nodes", 3, "number of etcd members, 1 to 9")
	limit := fs.Duration("time-limit", 0, "how long the test runs, the final recovery included (default 60s)")
	nem := fs.String("nemesis", strings.Join(etcdsuite.DefaultNemeses, ","), "faults to inject, comma-separated: "+strings.Join(etcdsuite.Nemeses, ",")+", or none.\nleader moves the leadership to a follower (MoveLeader) or pauses the leader;\nmember removes a member, wipes it, and adds it back on a fresh data folder.\nClock faults do not apply: etcd is an external binary outside a namespace,\nwhose clock the harness cannot move")
	seed := fs.Uint64("seed", 1, "seed of the operations and faults: the same seed gives the same schedule")
	conc := fs.Int("concurrency", 0, "client threads, spread over the members (default 2 per member)")
	rate := fs.Int("rate", 500, "target client operations per second, all threads together")
	store := fs.String("store", "store", "folder the run is saved under, as DIR/etcd/<time>/ (the members' data too)")
	bin := fs.String("etcd-binary", "", "the etcd executable (default: etcd on the PATH, from Debian's etcd-server);\nwith --nodes-file it is uploaded to every node")
	nodesFile := fs.String("nodes-file", "", "run the members on the machines this file lists, over SSH, one a line:\nNAME address=HOST [port=22] [user=root] [key=FILE] [sudo=false]\n(default: the members on loopback)")
	knownHosts := fs.String("known-hosts", "", "with --nodes-file: known_hosts files the nodes' host keys must be in,\ncomma-separated (default ~/.ssh/known_hosts)")
	remoteDir := fs.String("remote-dir", "", "with --nodes-file: the folder on each node for its member, as DIR/<node>,\nwiped at the start (default "+etcdsuite.DefaultRemoteDir+")")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify test: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(pos) > 0 {
		return fail("unexpected argument %q", pos[0])
	}
	if *nodesFile != "" && set["nodes"] {
		return fail("--nodes and --nodes-file: the nodes file says how many members there are")
	}
	if *nodesFile == "" && (set["known-hosts"] || set["remote-dir"]) {
		return fail("--known-hosts and --remote-dir need --nodes-file")
	}
	var known []string
	if *knownHosts != "" {
		known = strings.Split(*knownHosts, ",")
	}
	// Options read zero as "the default"; here the defaults are filled in,
	// so a zero given on the command line is a mistake.
	if *nodes < 1 {
		return fail("--nodes must be from 1 to 9, not %d", *nodes)
	}
	if *rate < 1 {
		return fail("--rate must be from 1 to 100000 operations per second, not %d", *rate)
	}
	if *conc < 0 {
		return fail("--concurrency must be from 1 to 1000, not %d", *conc)
	}
	if *limit < 0 {
		return fail("--time-limit must be at least 10s, not %v", *limit)
	}
	if *workload == "" {
		fs.Usage()
		return fail("--workload is required: %s", strings.Join(etcdsuite.Workloads, " or "))
	}
	ctx, stop, tty := interruptible(stdout)
	defer stop()
	o := etcdsuite.Options{
		Binary: *bin, Workload: *workload, SerializableReads: *serializable, Nodes: *nodes, Concurrency: *conc,
		Rate: *rate, TimeLimit: *limit, Nemesis: splitKinds(*nem), Seed: *seed, Store: *store,
		Command: append([]string{"ipfence-verify", "test", "etcd"}, args...), Progress: stdout, TTY: tty,
		NodesFile: *nodesFile, KnownHosts: known, RemoteDir: *remoteDir,
	}
	out, err := etcdsuite.Run(ctx, o)
	return finish(out, err, stdout, stderr, printEtcdSummary)
}

// printEtcdSummary prints the verdict, the figures and where the run is.
func printEtcdSummary(w io.Writer, out *harness.Outcome) {
	cs, _ := out.Results.Fields["checkers"].(map[string]checker.Result)
	fmt.Fprintf(w, "\n%d ops in %.1fs", out.Ops, out.Duration.Seconds())
	if out.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w)
	if r, ok := cs["linear"]; ok {
		fmt.Fprintf(w, "  linearizable    %-7s %v ops in %v keys, checked in %.0f ms\n", r.Valid, r.Fields["ops"], r.Fields["partitions"], r.Fields["check_ms"])
	}
	if r, ok := cs["transactional"]; ok {
		line := fmt.Sprintf("  %-15s %-7s %v transactions, checked in %.0f ms", r.Fields["consistency"], r.Valid, r.Fields["txns"], r.Fields["check_ms"])
		if types, _ := r.Fields["anomaly_types"].([]string); len(types) > 0 {
			line += ": " + strings.Join(types, ", ")
		}
		fmt.Fprintln(w, line)
	}
	if r, ok := cs["set"]; ok {
		fmt.Fprintf(w, "  set-full        %-7s %v\n", r.Valid, r.Fields["summary"])
	}
	if r, ok := cs["stats"]; ok {
		fmt.Fprintf(w, "  stats           %-7s\n", r.Valid)
	}
	if r, ok := cs["faults"]; ok {
		// Faults on remote nodes, and the leader and member faults
		// anywhere, are checked after each is made: how many of each
		// kind were found to have taken effect.
		fmt.Fprintf(w, "  faults          %-7s confirmed: %v\n", r.Valid, r.Fields["summary"])
		if missed, _ := r.Fields["not_confirmed"].([]string); len(missed) > 0 {
			for _, m := range missed {
				fmt.Fprintf(w, "    not confirmed: %s\n", m)
			}
		}
	}
	if errs, ok := out.Results.Fields["harness_errors"].([]string); ok {
		for _, e := range errs {
			fmt.Fprintf(w, "  harness error: %s\n", e)
		}
	}
	explain(w, out, []string{"linear", "transactional", "set", "stats"})
	word := map[linear.Verdict]string{linear.True: "VALID", linear.False: "INVALID", linear.Unknown: "UNKNOWN"}[out.Verdict]
	fmt.Fprintf(w, "\n%s  %s\n", word, out.Dir)
}
