// Command ipfence is the operator's binary, the one installed on a node:
// serve runs the capture daemon, ctl operates a running node, doctor asks
// the LAN who answers ARP for an address. It links no test code — no
// harness, no simulator, no etcd client, no plotting, no testing — which a
// test holds it to (go list -deps). The verification toolkit is the other
// binary, ipfence-verify.
package main

import (
	"io"
	"os"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/servecmd"
)

// program is the operator's binary: its commands, and the toolkit's, which
// it names when asked for one.
var program = cli.Program{
	Name: "ipfence",
	Commands: []cli.Command{
		{Name: "serve", Summary: "run a capture node (the daemon)", Run: servecmd.Run},
		{Name: "ctl", Summary: "operate a running node: status, actions, approve, reject, drain, undrain", Run: runCtl},
		{Name: "doctor", Summary: "ask the LAN who answers ARP for an address: one holder, none, or a split brain", Run: runDoctor},
	},
	Example: "ipfence ctl --json status",
	Elsewhere: map[string]string{
		"check": "ipfence-verify", "sim": "ipfence-verify", "test": "ipfence-verify",
		"cloudsim": "ipfence-verify", "dev": "ipfence-verify", "web": "ipfence-verify",
	},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program but for the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int { return program.Run(args, stdout, stderr) }
