package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/simfault"
	"github.com/ipfence/ipfence/jepsen/capturesuite"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/linear"
)

// defaultNemeses are the nemeses a plain `ipfence-verify test capture` runs: every
// one this user can (partitions go through the harness's proxies; only
// disk, which mounts a tmpfs per node, needs root and is left out for
// others).
var defaultNemeses = capturesuite.Available()

// nemesisHelp is --nemesis's help: the kinds, and those that need root.
func nemesisHelp() string {
	var root []string
	for _, k := range capturesuite.Nemeses {
		if why := capturesuite.NeedsRoot[k]; why != "" {
			root = append(root, k+" needs root: "+why)
		}
	}
	return "faults to inject, comma-separated: " + strings.Join(capturesuite.Nemeses, ",") + ", or none;\nthe default is every one this user may run (" + strings.Join(root, "; ") + ")"
}

// tests are the tests `ipfence-verify test` runs, by name.
var tests = []string{"capture", "etcd"}

func runTest(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "capture":
			return runTestCapture(args[1:], stdout, stderr)
		case "etcd":
			return runTestEtcd(args[1:], stdout, stderr)
		case "-h", "-help", "--help":
			fmt.Fprintf(stderr, "Usage: ipfence-verify test capture|etcd [flags]\n\n  capture  ipfence's own nodes on the cloud simulator under faults\n  etcd     a real etcd cluster under faults\n\nipfence-verify test NAME --help lists a test's flags.\n")
			return cli.ExitValid
		}
		if !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "ipfence-verify test: unknown test %q; the tests are: %s\n", args[0], strings.Join(tests, ", "))
			return cli.ExitError
		}
	}
	fmt.Fprintf(stderr, "Usage: ipfence-verify test capture|etcd [flags]\nipfence-verify test: name the test to run first: %s\n", strings.Join(tests, ", "))
	return cli.ExitError
}

// interruptible is the context a test runs in, cancelled by Ctrl-C or
// SIGTERM (the harness then heals and checks what happened so far), and
// whether stdout is a terminal (a live progress line rather than log
// lines).
func interruptible(stdout io.Writer) (context.Context, context.CancelFunc, bool) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	f, ok := stdout.(*os.File)
	return ctx, stop, ok && harness.IsTerminal(f)
}

// splitKinds reads a --nemesis value: comma-separated kinds, or none.
func splitKinds(s string) []string {
	var kinds []string
	if s == "none" || s == "" {
		return nil
	}
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

func runTestCapture(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("test capture", "test capture [--provider aws|azure|oci|onprem] [--cloud-latency none|realistic] [--epochs federation|etcd [--spare-etcd]] [--nodes N] [--time-limit D] [--nemesis K,...] [--seed S] [--concurrency C] [--store DIR] [--net proxy|netns] [--unsafe-disable-fence] [--nodes-file FILE [--known-hosts FILE,...] [--remote-dir DIR]]", stderr)
	nodes := fs.Int("nodes", 3, "number of ipfence serve nodes, 2 to 9")
	limit := fs.Duration("time-limit", 0, "how long the test runs, the final recovery included (default 60s)")
	nem := fs.String("nemesis", strings.Join(defaultNemeses, ","), nemesisHelp())
	seed := fs.Uint64("seed", 1, "seed of the operations and faults: the same seed gives the same schedule")
	conc := fs.Int("concurrency", 0, "client threads (default 2 per node)")
	store := fs.String("store", "store", "folder the run is saved under, as DIR/capture/<time>/")
	netMode := fs.String("net", "proxy", "how partitions cut links: proxy (a TCP proxy on every node-to-node link,\nunprivileged) or netns (network namespaces and nftables; root)")
	unfenced := fs.Bool("unsafe-disable-fence", false, "start the nodes with the gate turned off: the planted bug the test must catch")
	prov := fs.String("provider", "aws", "aws (the cloud simulator's EC2 dialect, the AWS driver), azure (its ARM dialect, the Azure\ndriver), oci (its OCI dialect, the OCI driver); cloud is another name for aws; or onprem\n(proxy-ARP under keepalived in an L2 lab of network namespaces; needs --net netns and root;\nnemeses: "+strings.Join(capturesuite.OnPremNemeses, ",")+")")
	latency := fs.String("cloud-latency", simfault.LatencyNone, "the simulated cloud's own pace, whichever --provider runs: none (every call answered at\nonce unless the provider nemesis delays it) or realistic (the figures cloudsim --latency\nrealistic waits, jittered by --seed; the provider nemesis's faults add to them)")
	epochs := fs.String("epochs", "federation", "where the nodes keep the pool's epoch line: federation (passed between the nodes)\nor etcd (a 3-member etcd started beside them, from Debian's etcd-server; the partition,\npause and kill nemeses then take members too; the cloud providers with --net proxy, or\n--provider onprem --net netns)")
	spare := fs.Bool("spare-etcd", false, "with --epochs etcd: the nemeses leave etcd's members alone (partitions cut nodes from nodes\nonly, every node keeps reaching every member): a LAN split with etcd elsewhere")
	nodesFile := fs.String("nodes-file", "", "run the nodes on the machines this file lists, over SSH, one a line:\nNAME address=HOST [port=22] [user=root] [key=FILE] [sudo=false]\n(aws only; partitions with nftables on the machines; wipe, corrupt and disk are left out)")
	knownHosts := fs.String("known-hosts", "", "with --nodes-file: known_hosts files the nodes' host keys must be in,\ncomma-separated (default ~/.ssh/known_hosts)")
	remoteDir := fs.String("remote-dir", "", "with --nodes-file: the folder on each node for its files, as DIR/<node>,\nwiped at the start (default "+capturesuite.DefaultRemoteDir+")")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify test: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(pos) > 0 {
		return fail("unexpected argument %q", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *nodesFile == "" && (set["known-hosts"] || set["remote-dir"]) {
		return fail("--known-hosts and --remote-dir need --nodes-file")
	}
	if *nodesFile != "" {
		switch {
		case set["nodes"]:
			return fail("--nodes and --nodes-file: the nodes file says how many nodes there are")
		case *netMode == "netns":
			return fail("--nodes-file and --net netns: the nodes file's machines are the network; partitions are made with nftables on them")
		case *prov == "onprem":
			return fail("--nodes-file and --provider onprem: the on-premises lab is built of namespaces on this machine; --nodes-file runs the aws provider")
		case *epochs == "etcd":
			return fail("--nodes-file and --epochs etcd: the etcd line is started on this machine, out of the nodes' reach; run it with --net proxy")
		}
	}
	if !slices.Contains(capturesuite.EpochLines, *epochs) {
		return fail("--epochs: %q is not one of %s", *epochs, strings.Join(capturesuite.EpochLines, ", "))
	}
	if *epochs == "etcd" && *netMode == "netns" && *prov != "onprem" {
		return fail("--epochs etcd: not built for --net netns in the cloud dialects yet; it runs there with --net proxy, and on premises with --provider onprem --net netns")
	}
	if err := simfault.CheckLatencyName(*latency); err != nil {
		return fail("--cloud-latency: %v", err)
	}
	// Options read zero as "the default"; here the defaults are filled in,
	// so a zero given on the command line is a mistake.
	if *nodes < 1 {
		return fail("--nodes must be from 2 to 9, not %d", *nodes)
	}
	if *limit < 0 {
		return fail("--time-limit must be at least 10s, not %v", *limit)
	}
	kinds := splitKinds(*nem)
	nemSet := set["nemesis"]
	if *nodesFile != "" && !nemSet {
		// The default set is every nemesis this user may run; on the
		// nodes file's machines some cannot be made, and are left out
		// in plain sight.
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return capturesuite.RemoteRefused[k] != "" })
		var out []string
		for _, k := range capturesuite.Nemeses {
			if why := capturesuite.RemoteRefused[k]; why != "" {
				out = append(out, k+" ("+why+")")
			}
		}
		fmt.Fprintf(stdout, "--nodes-file: leaving out the nemeses %s\n", strings.Join(out, ", "))
	}
	switch {
	case *prov == capturesuite.CloudAlias || slices.Contains(capturesuite.Clouds, *prov):
	case *prov == "onprem":
		if !nemSet {
			kinds = capturesuite.OnPremNemeses
		}
		if *netMode != "netns" {
			return fail("--provider onprem needs --net netns: its hosts are network namespaces on one L2 segment")
		}
		if *latency != simfault.LatencyNone {
			return fail("--cloud-latency %s: --provider onprem has no cloud simulator to pace", *latency)
		}
	default:
		return fail("--provider: %q is not one of %s, %s (another name for %s) or onprem", *prov, strings.Join(capturesuite.Clouds, ", "), capturesuite.CloudAlias, capturesuite.Clouds[0])
	}
	if *netMode != "proxy" && *netMode != "netns" {
		return fail("--net: %q is not proxy or netns", *netMode)
	}
	if *netMode == "netns" && os.Geteuid() != 0 {
		return fail("--net netns needs root (network namespaces and nftables); the default --net proxy does not")
	}
	var known []string
	if *knownHosts != "" {
		known = strings.Split(*knownHosts, ",")
	}
	if *nodesFile != "" {
		// The file says how many nodes there are.
		*nodes = 0
	}
	bin, err := os.Executable()
	if err != nil {
		return fail("finding the ipfence binary to run the nodes with: %v", err)
	}
	ctx, stop, tty := interruptible(stdout)
	defer stop()
	o := capturesuite.Options{
		Binary: bin, Nodes: *nodes, Concurrency: *conc, TimeLimit: *limit, Nemesis: kinds, Seed: *seed,
		Store: *store, Netns: *netMode == "netns", UnsafeDisableFence: *unfenced, Provider: *prov,
		CloudLatency: *latency, Epochs: *epochs, SpareEtcd: *spare,
		NodesFile: *nodesFile, KnownHosts: known, RemoteDir: *remoteDir,
		Command: append([]string{"ipfence-verify", "test", "capture"}, args...), Progress: stdout, TTY: tty,
	}
	out, err := capturesuite.Run(ctx, o)
	return finish(out, err, stdout, stderr, printSummary)
}

// finish prints a run's summary and turns its verdict into the exit
// status: 0 valid, 1 invalid, 2 unknown, 3 when the run could not be made.
func finish(out *harness.Outcome, err error, stdout, stderr io.Writer, summary func(io.Writer, *harness.Outcome)) int {
	if out == nil {
		fmt.Fprintf(stderr, "ipfence-verify test: %v\n", err)
		return cli.ExitError
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "ipfence-verify test: %v\n", err)
		if out.Events == nil {
			return cli.ExitError
		}
	}
	summary(stdout, out)
	switch out.Verdict {
	case linear.True:
		return cli.ExitValid
	case linear.False:
		return cli.ExitInvalid
	}
	return cli.ExitUnknown
}

// printSummary prints the verdict, the key figures and where the run is.
func printSummary(w io.Writer, out *harness.Outcome) {
	fields := out.Results.Fields
	cs, _ := fields["checkers"].(map[string]checker.Result)
	get := func(name, field string) any {
		if r, ok := cs[name]; ok {
			return r.Fields[field]
		}
		return nil
	}
	valid := func(name string) string {
		if r, ok := cs[name]; ok {
			return r.Valid.String()
		}
		return "-"
	}
	fmt.Fprintf(w, "\n%d ops in %.1fs", out.Ops, out.Duration.Seconds())
	if out.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w)
	if _, cloud := cs["fence"]; !cloud {
		// On premises: the observer's record of who answered ARP.
		fmt.Fprintf(w, "  single holder   %-7s dual-responder time %v ms, no responder %v ms\n", valid("single-holder"),
			get("single-holder", "dual_responder_ms"), get("single-holder", "no_responder_ms"))
		fmt.Fprintf(w, "  convergence     %-7s one responder %.1f s after the final heal\n", valid("convergence"), get("convergence", "settled_s"))
		if r, ok := cs["etcd-line"]; ok {
			recs, _ := r.Fields["records"].(map[string]string)
			fmt.Fprintf(w, "  etcd line       %-7s %d records in etcd, each naming the host that answered ARP last; last responders %v\n",
				r.Valid, len(recs), r.Fields["last_responders"])
		}
		fmt.Fprintf(w, "  stats           %-7s\n", valid("stats"))
		word := map[linear.Verdict]string{linear.True: "VALID", linear.False: "INVALID", linear.Unknown: "UNKNOWN"}[out.Verdict]
		fmt.Fprintf(w, "\n%s  %s\n", word, out.Dir)
		return
	}
	fmt.Fprintf(w, "  single holder   %-7s dual-holder time %v ms\n", valid("single-holder"), get("single-holder", "dual_holder_ms"))
	if n, ok := get("fence", "stale_actions_refused_by_cloud").(int); ok {
		fmt.Fprintf(w, "  fence           %-7s stale actions executed %v, refused by the cloud %d (%v stale writes refused with 412)\n",
			valid("fence"), get("fence", "stale_actions_executed"), n, get("fence", "stale_writes_refused_412"))
	} else {
		fmt.Fprintf(w, "  fence           %-7s stale actions executed %v, refused by the cloud 0 (no conditional write)\n", valid("fence"), get("fence", "stale_actions_executed"))
	}
	if r, ok := cs["etcd-line"]; ok {
		recs, _ := r.Fields["records"].(map[string]string)
		fmt.Fprintf(w, "  etcd line       %-7s %d records in etcd, each at the provider's holder and no lower than its highest epoch; %v findings\n",
			r.Valid, len(recs), r.Fields["findings_total"])
	}
	if r, ok := cs["line-token"]; ok {
		fmt.Fprintf(w, "  line token      %-7s %v of %v node mutations carried an etcd revision, %v checked against etcd, %v mismatches, %v going down\n",
			r.Valid, r.Fields["tokened"], r.Fields["node_mutations"], r.Fields["checked"], r.Fields["mismatches"], r.Fields["regressions"])
	}
	if r, ok := cs["faults"]; ok {
		// On the machines of --nodes-file each partition, pause and kill
		// is checked after it is made.
		fmt.Fprintf(w, "  faults          %-7s confirmed: %v\n", r.Valid, r.Fields["summary"])
		missed, _ := r.Fields["not_confirmed"].([]string)
		for _, m := range missed {
			fmt.Fprintf(w, "    not confirmed: %s\n", m)
		}
	}
	conv, _ := get("convergence", "convergence_s").(float64)
	fmt.Fprintf(w, "  convergence     %-7s last move %.1f s after the final heal\n", valid("convergence"), conv)
	if n, _ := get("failover", "failovers").(int); n > 0 {
		fmt.Fprintf(w, "  failover        %-7s %d failovers: median %.2fs, p99 %.2fs, max %.2fs\n", valid("failover"), n,
			get("failover", "median_s"), get("failover", "p99_s"), get("failover", "max_s"))
	} else {
		fmt.Fprintf(w, "  failover        %-7s no failover observed\n", valid("failover"))
	}
	if r, ok := cs["calls"]; ok && r.Fields["counted"] == true {
		if per, ok := r.Fields["calls_per_assign"].(float64); ok {
			fmt.Fprintf(w, "  calls           %-7s %v node API calls, %v writes, for %v assigns (%v moves): %.1f calls and %.1f writes per assign\n",
				r.Valid, r.Fields["node_calls"], r.Fields["node_writes"], r.Fields["assigns"], r.Fields["moves"], per, r.Fields["writes_per_assign"])
		}
	}
	if r, ok := cs["availability"]; ok {
		total, _ := r.Fields["no_holder_ms"].(float64)
		line := fmt.Sprintf("  availability    %-7s no holder %.0f ms", r.Valid, total)
		if n, _ := r.Fields["episodes"].(int); n > 0 {
			periods := "periods"
			if n == 1 {
				periods = "period"
			}
			outside, _ := r.Fields["outside_faults_ms"].(float64)
			line += fmt.Sprintf(" in %d %s, %.0f ms outside fault windows", n, periods, outside)
		}
		fmt.Fprintln(w, line)
		if l, _ := r.Fields["longest"].(string); l != "" && r.Valid != linear.False {
			// The findings below show a false checker's outages; a true
			// one's longest is still evidence worth a line.
			fmt.Fprintf(w, "                          longest: %s\n", l)
		}
	}
	fmt.Fprintf(w, "  linearizable    %-7s %v ops, capture-owner model\n", valid("linear"), get("linear", "ops"))
	if _, ok := cs["damage"]; ok {
		fmt.Fprintf(w, "  damage          %-7s %v wipes (%v passive after), %v corruptions refused, %v taken, %v full disks (%v unhealthy)\n",
			valid("damage"), get("damage", "wipes"), get("damage", "passive_after_wipe"), get("damage", "corruptions_refused"),
			get("damage", "corruptions_accepted"), get("damage", "disks_filled"), get("damage", "unhealthy_when_full"))
	}
	if _, ok := cs["hostile"]; ok {
		fmt.Fprintf(w, "  hostile         %-7s %v attacks: %v of %v forged refused, %v real events replayed; refusals counted %v\n",
			valid("hostile"), get("hostile", "attacks"), get("hostile", "forged_refused"), get("hostile", "forged_sent"),
			get("hostile", "replayed"), get("hostile", "refused_events_counted_total"))
	}
	fmt.Fprintf(w, "  stats           %-7s\n", valid("stats"))
	if errs, ok := fields["harness_errors"].([]string); ok {
		for _, e := range errs {
			fmt.Fprintf(w, "  harness error: %s\n", e)
		}
	}
	explain(w, out, []string{"single-holder", "fence", "availability", "convergence", "linear", "damage", "hostile", "stats"})
	word := map[linear.Verdict]string{linear.True: "VALID", linear.False: "INVALID", linear.Unknown: "UNKNOWN"}[out.Verdict]
	fmt.Fprintf(w, "\n%s  %s\n", word, out.Dir)
}

// maxFindings is how many findings a false checker shows in the terminal;
// results.json has the rest.
const maxFindings = 3

// explain prints, for each checker in order that said false, its first
// findings in words, then the files to open next. A failing run must say
// what went wrong and where to look without the user digging in JSON.
func explain(w io.Writer, out *harness.Outcome, order []string) {
	cs, _ := out.Results.Fields["checkers"].(map[string]checker.Result)
	files := map[string]bool{}
	shown := false
	for _, name := range order {
		r, ok := cs[name]
		if !ok || r.Valid != linear.False {
			continue
		}
		lines, total, file := findings(name, r)
		if !shown {
			fmt.Fprintln(w)
			shown = true
		}
		fmt.Fprintf(w, "%s false:\n", name)
		for i, l := range lines {
			if i == maxFindings {
				break
			}
			fmt.Fprintf(w, "  %s\n", l)
		}
		if total > min(len(lines), maxFindings) {
			fmt.Fprintf(w, "  and %d more\n", total-min(len(lines), maxFindings))
		}
		if len(lines) == 0 {
			fmt.Fprintln(w, "  (no details recorded)")
		}
		files[file] = true
	}
	if !shown {
		return
	}
	var open []string
	for _, f := range []string{"timeline.html", "linear.html", "anomalies.json"} {
		if files[f] {
			if _, err := os.Stat(filepath.Join(out.Dir, f)); err == nil {
				open = append(open, filepath.Join(out.Dir, f))
			}
		}
	}
	open = append(open, filepath.Join(out.Dir, harness.ResultsFile))
	fmt.Fprintf(w, "Open next: %s (every finding)\n", strings.Join(open, ", "))
}

// findings are a false checker's findings in words, how many there are in
// all, and the page that shows them best.
func findings(name string, r checker.Result) (lines []string, total int, file string) {
	file = "timeline.html"
	strs := func(v any) []string {
		switch v := v.(type) {
		case []string:
			return v
		case []any:
			var out []string
			for _, x := range v {
				out = append(out, fmt.Sprint(x))
			}
			return out
		}
		return nil
	}
	lines = strs(r.Fields["findings"])
	total = len(lines)
	if n, ok := r.Fields["findings_total"].(int); ok {
		total = n
	}
	switch name {
	case "linear":
		file = "linear.html"
		if l, ok := linearFinding(r.Fields["failure"]); ok {
			lines, total = []string{l}, 1
		}
	case "transactional":
		file = "anomalies.json"
	case "convergence":
		desired, _ := r.Fields["desired"].(map[string]string)
		actual, _ := r.Fields["actual"].(map[string]string)
		for _, a := range slices.Sorted(maps.Keys(desired)) {
			if desired[a] != actual[a] {
				shows := "it on no NIC"
				if actual[a] != "" {
					shows = "it on " + actual[a] + "'s NIC"
				}
				waited, _ := r.Fields["waited_after_run_s"].(float64)
				lines = append(lines, fmt.Sprintf("%s: the nodes want it on %s, the provider shows %s, %.1f s after the run", a, desired[a], shows, waited))
			}
		}
		if e, ok := r.Fields["error"].(string); ok {
			lines = append(lines, e)
		}
		total = len(lines)
	case "set":
		if len(lines) == 0 {
			if sum, ok := r.Fields["summary"].(string); ok {
				lines, total = []string{sum}, 1
			}
		}
	case "stats":
		for _, f := range strs(r.Fields["never_ok"]) {
			lines = append(lines, fmt.Sprintf("no %s operation succeeded", f))
		}
		total = len(lines)
	}
	if len(lines) == 0 {
		lines = strs(r.Fields["examples"])
		if e, ok := r.Fields["error"].(string); ok {
			lines = append(lines, e)
		}
		total = len(lines)
	}
	return lines, total, file
}

// linearFinding puts the linearizability checker's failure in words: the
// operation no order of the history gets past, and the state before it.
func linearFinding(failure any) (string, bool) {
	raw, err := json.Marshal(failure)
	if err != nil || string(raw) == "null" {
		return "", false
	}
	var f struct {
		Partition string `json:"partition"`
		State     string `json:"state"`
		Op        struct {
			Process int64  `json:"process"`
			Index   int64  `json:"index"`
			Op      string `json:"op"`
		} `json:"op"`
	}
	if json.Unmarshal(raw, &f) != nil || f.Op.Op == "" {
		return "", false
	}
	who := fmt.Sprintf("process %d", f.Op.Process)
	if f.Op.Process == capturesuite.MutationProcess {
		who = "the provider"
	}
	where := ""
	if f.Partition != "" {
		where = f.Partition + ": "
	}
	return fmt.Sprintf("%sno order of the operations gets past op %d (%s): %s, in state %s", where, f.Op.Index, who, f.Op.Op, f.State), true
}
