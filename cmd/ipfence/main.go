// Command ipfence is the ipfence binary: it wires the packages of the
// verification toolkit (and, later, the capture daemon) to subcommands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// Exit codes shared by every subcommand that gives a verdict.
const (
	exitValid   = 0
	exitInvalid = 1
	exitUnknown = 2
	exitError   = 3
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"check", "check histories: linearizability, transactional consistency (Elle-style), Jepsen workload checkers", runCheck},
		{"cloudsim", "run a cloud simulator that speaks the EC2 API", runCloudsim},
		{"serve", "run a capture node (the daemon)", runServe},
		{"ctl", "operate a running node: status, actions, approve, reject, drain, undrain", runCtl},
		{"dev", "start a simulator and a cluster of nodes on loopback, for a first look", runDev},
		{"test", "run a Jepsen-style test: test capture (ipfence's nodes) or test etcd (a real etcd cluster) under faults", runTest},
		{"sim", "write the history of a simulated transactional database (for the checkers)", runSim},
		{"doctor", "ask the LAN who answers ARP for an address: one holder, none, or a split brain", runDoctor},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		if len(args) == 0 {
			return exitError
		}
		return exitValid
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "ipfence: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: ipfence <command> [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ipfence <command> --help' for a command's flags.")
}

// flagSet builds a subcommand's flags in the one style every command uses:
// --name value, with --log-level on all of them.
func flagSet(name, synopsis string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	level := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ipfence %s\n\nFlags:\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			name, use := flag.UnquoteUsage(f)
			fmt.Fprintf(fs.Output(), "  --%s %s\n    \t%s", f.Name, name, strings.ReplaceAll(use, "\n", "\n    \t"))
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
				fmt.Fprintf(fs.Output(), " (default %s)", f.DefValue)
			}
			fmt.Fprintln(fs.Output())
		})
	}
	return fs, level
}

// parse reads flags that may come before, between or after positional
// arguments, as users of most command-line tools expect; "--" ends flags.
// It returns the positional arguments, or an exit code when parsing ended
// the command (help, or a bad flag).
func parse(fs *flag.FlagSet, level *string, args []string, stderr io.Writer) ([]string, int, bool) {
	var pos, rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitValid, false
			}
			return nil, exitError, false
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	pos = append(pos, rest...)
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "ipfence %s: --log-level: %q is not one of debug, info, warn, error\n", fs.Name(), *level)
		return nil, exitError, false
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})))
	return pos, 0, true
}
