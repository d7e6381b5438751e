// Command ipfence-verify is ipfence's verification toolkit: it checks
// histories (linearizability, transactional consistency, Jepsen's
// workloads), simulates transactional databases and clouds, runs the
// Jepsen-style tests of ipfence and of etcd, starts a local cluster to
// watch, and serves the store of past runs. The nodes its tests start run
// its own serve command, the same wiring as the operator's binary,
// ipfence, which has none of this.
package main

import (
	"io"
	"os"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/servecmd"
	"github.com/ipfence/ipfence/jepsen/capturesuite/ownermodel"
	"github.com/ipfence/ipfence/verify/model"
)

// program is the toolkit's binary: its commands, and the operator's, which
// it names when asked for one.
var program = cli.Program{
	Name: "ipfence-verify",
	Commands: []cli.Command{
		{Name: "check", Summary: "check histories: linearizability, transactional consistency (Elle-style), Jepsen workload checkers", Run: runCheck},
		{Name: "test", Summary: "run a Jepsen-style test: test capture (ipfence's nodes) or test etcd (a real etcd cluster) under faults", Run: runTest},
		{Name: "sim", Summary: "write the history of a simulated transactional database (for the checkers)", Run: runSim},
		{Name: "cloudsim", Summary: "run a cloud simulator that speaks the EC2, ARM or OCI API", Run: runCloudsim},
		{Name: "dev", Summary: "start a simulator and a cluster of nodes on loopback, kill and restart them, watch addresses move", Run: runDev},
		{Name: "web", Summary: "browse the store: runs, verdicts, pages, plots, logs and cycle drawings", Run: runWeb},
		// The tests and dev start their nodes from this binary, so that
		// one `go run` is all a user needs.
		{Name: "serve", Summary: "run a capture node (as ipfence serve)", Run: servecmd.Run, Hidden: true},
	},
	Example:   "ipfence-verify check --json FILE",
	Elsewhere: map[string]string{"ctl": "ipfence", "doctor": "ipfence"},
}

// The capture test's owner model lives beside the test; registering it
// lets `check --model capture-owner` read the test's capture-owner.jsonl.
func init() {
	if err := model.Register(ownermodel.Model{}); err != nil {
		panic(err)
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program but for the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int { return program.Run(args, stdout, stderr) }
