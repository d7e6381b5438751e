package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ipfence/ipfence/capture/suite"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/linear"
)

// unprivileged are the nemeses that need no root: all of them, since
// partitions go through the harness's proxies by default.
var unprivileged = suite.Nemeses

func runTest(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("test", "test capture [--nodes N] [--time-limit D] [--nemesis K,...] [--seed S] [--concurrency C] [--store DIR] [--net proxy|netns] [--unsafe-disable-fence]", stderr)
	nodes := fs.Int("nodes", 3, "number of ipfence serve nodes, 2 to 9")
	limit := fs.Duration("time-limit", 0, "how long the test runs, the final recovery included (default 60s)")
	nem := fs.String("nemesis", strings.Join(unprivileged, ","), "faults to inject, comma-separated: "+strings.Join(suite.Nemeses, ",")+", or none")
	seed := fs.Uint64("seed", 1, "seed of the operations and faults: the same seed gives the same schedule")
	conc := fs.Int("concurrency", 0, "client threads (default 2 per node)")
	store := fs.String("store", "store", "folder the run is saved under, as DIR/capture/<time>/")
	netMode := fs.String("net", "proxy", "how partitions cut links: proxy (a TCP proxy on every node-to-node link,\nunprivileged) or netns (network namespaces and nftables; root)")
	unfenced := fs.Bool("unsafe-disable-fence", false, "start the nodes with the gate turned off: the planted bug the test must catch")
	pos, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence test: "+format+"\n", a...)
		return exitError
	}
	if len(pos) == 0 {
		fs.Usage()
		return fail("name the test to run: capture")
	}
	if pos[0] != "capture" {
		return fail("unknown test %q; the tests are: capture", pos[0])
	}
	if len(pos) > 1 {
		return fail("unexpected argument %q", pos[1])
	}
	var kinds []string
	if *nem != "none" && *nem != "" {
		for _, k := range strings.Split(*nem, ",") {
			k = strings.TrimSpace(k)
			if k != "" {
				kinds = append(kinds, k)
			}
		}
	}
	if *netMode != "proxy" && *netMode != "netns" {
		return fail("--net: %q is not proxy or netns", *netMode)
	}
	if *netMode == "netns" && os.Geteuid() != 0 {
		return fail("--net netns needs root (network namespaces and nftables); the default --net proxy does not")
	}
	bin, err := os.Executable()
	if err != nil {
		return fail("finding the ipfence binary to run the nodes with: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tty := false
	if f, ok := stdout.(*os.File); ok {
		tty = harness.IsTerminal(f)
	}
	o := suite.Options{
		Binary: bin, Nodes: *nodes, Concurrency: *conc, TimeLimit: *limit, Nemesis: kinds, Seed: *seed,
		Store: *store, Netns: *netMode == "netns", UnsafeDisableFence: *unfenced,
		Command: append([]string{"ipfence", "test"}, args...), Progress: stdout, TTY: tty,
	}
	out, err := suite.Run(ctx, o)
	if out == nil {
		return fail("%v", err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "ipfence test: %v\n", err)
		if out.Events == nil {
			return exitError
		}
	}
	printSummary(stdout, out)
	switch out.Valid {
	case linear.True:
		return exitValid
	case linear.False:
		return exitInvalid
	}
	return exitUnknown
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
	fmt.Fprintf(w, "  single holder   %-7s dual-holder time %v ms\n", valid("single-holder"), get("single-holder", "dual_holder_ms"))
	fmt.Fprintf(w, "  fence           %-7s stale actions executed %v\n", valid("fence"), get("fence", "stale_actions_executed"))
	fmt.Fprintf(w, "  convergence     %-7s last move %v s after the final heal\n", valid("convergence"), get("convergence", "convergence_s"))
	if n, _ := get("failover", "failovers").(int); n > 0 {
		fmt.Fprintf(w, "  failover        %-7s %d failovers: median %.2fs, p99 %.2fs, max %.2fs\n", valid("failover"), n,
			get("failover", "median_s"), get("failover", "p99_s"), get("failover", "max_s"))
	} else {
		fmt.Fprintf(w, "  failover        %-7s no failover observed\n", valid("failover"))
	}
	fmt.Fprintf(w, "  linearizable    %-7s %v ops, capture-owner model\n", valid("linear"), get("linear", "ops"))
	fmt.Fprintf(w, "  stats           %-7s\n", valid("stats"))
	if errs, ok := fields["harness_errors"].([]string); ok {
		for _, e := range errs {
			fmt.Fprintf(w, "  harness error: %s\n", e)
		}
	}
	word := map[linear.Verdict]string{linear.True: "VALID", linear.False: "INVALID", linear.Unknown: "UNKNOWN"}[out.Valid]
	fmt.Fprintf(w, "\n%s  %s\n", word, out.Dir)
}
