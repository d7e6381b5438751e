// Command ipfence is the ipfence binary: it wires the packages of the
// verification toolkit and the capture daemon to subcommands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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
		{"dev", "start a simulator and a cluster of nodes on loopback, kill and restart them, watch addresses move", runDev},
		{"test", "run a Jepsen-style test: test capture (ipfence's nodes) or test etcd (a real etcd cluster) under faults", runTest},
		{"sim", "write the history of a simulated transactional database (for the checkers)", runSim},
		{"doctor", "ask the LAN who answers ARP for an address: one holder, none, or a split brain", runDoctor},
		{"web", "browse the store: runs, verdicts, pages, plots, logs and cycle drawings", runWeb},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program but for the process: it returns the exit code.
// Help is output the user asked for, so it goes to stdout with exit 0:
// a command run for its help gets stdout as its stderr too, so that every
// command's help lands there however the command prints it. Usage errors
// go to stderr and exit 3.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitError
	}
	if isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 && !isHelp(args[1]) && args[1] != "help" {
			return run(append(slices.Clip(args[1:]), "--help"), stdout, stderr)
		}
		usage(stdout)
		return exitValid
	}
	var names []string
	for _, c := range commands() {
		if c.name == args[0] {
			if helpRequested(args[1:]) {
				return c.run(args[1:], stdout, stdout)
			}
			return c.run(args[1:], stdout, stderr)
		}
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if strings.HasPrefix(args[0], "-") {
		msg = fmt.Sprintf("%s: flags come after the command, as in 'ipfence check --json FILE'", args[0])
	} else if s := suggest(args[0], append(names, "help")); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	fmt.Fprintf(stderr, "ipfence: %s\nsee 'ipfence --help'\n", msg)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: ipfence <command> [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ipfence <command> --help' or 'ipfence help <command>' for a command's flags.")
}

// isHelp says whether arg asks for help, in any of the spellings the flag
// package accepts.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

// helpRequested says whether help is asked for anywhere among a command's
// arguments before "--": help wins over everything else on the line, so
// that adding --help to a failing command shows its help.
func helpRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// synopses holds each flag set's synopsis for its help text, from flagSet
// until parse is done with it.
var synopses sync.Map // *flag.FlagSet → string

// flagSet builds a subcommand's flags in the one style every command uses:
// --name value, with --log-level on all of them. Errors and help are
// parse's: fs.Usage prints nothing, so that a command calling it before
// its own one-line error prints that line alone.
func flagSet(name, synopsis string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	synopses.Store(fs, synopsis)
	level := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	return fs, level
}

// printHelp writes a command's help: its synopsis and every flag, with its
// value's kind and its default.
func printHelp(fs *flag.FlagSet, synopsis string) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: ipfence %s\n\nFlags:\n", synopsis)
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s", f.Name, name, strings.ReplaceAll(use, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// usageError prints a usage error in the one style of every command — a
// line naming the command and what is wrong, then where to read more —
// and returns the exit code of a usage error.
func usageError(stderr io.Writer, command, format string, a ...any) int {
	fmt.Fprintf(stderr, "ipfence %s: %s\nsee 'ipfence %s --help'\n", command, fmt.Sprintf(format, a...), command)
	return exitError
}

// parse reads flags that may come before, between or after positional
// arguments, as users of most command-line tools expect; "--" ends flags.
// Flags are written --name value or --name=value (one dash works too).
// It returns the positional arguments, or an exit code when parsing ended
// the command: help (printed, exit 0), or a bad flag (one line naming the
// flag and what is wrong, exit 3).
func parse(fs *flag.FlagSet, level *string, args []string, stderr io.Writer) ([]string, int, bool) {
	syn, _ := synopses.LoadAndDelete(fs)
	synopsis, _ := syn.(string)
	if synopsis == "" {
		synopsis = fs.Name() + " [flags]"
	}
	if helpRequested(args) {
		printHelp(fs, synopsis)
		return nil, exitValid, false
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, value, hasValue := strings.Cut(name, "=")
		if name == "" || name[0] == '-' {
			return nil, usageError(stderr, fs.Name(), "%q is not a flag: flags are written --name or --name=value", a), false
		}
		f := fs.Lookup(name)
		if f == nil {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			msg := "no such flag"
			if s := suggest(name, append(names, "help")); s != "" {
				msg += fmt.Sprintf("; did you mean --%s?", s)
			}
			return nil, usageError(stderr, fs.Name(), "--%s: %s", name, msg), false
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasValue {
			value = "true"
		} else if !hasValue {
			if i+1 == len(args) {
				return nil, usageError(stderr, fs.Name(), "--%s: needs a value", name), false
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, usageError(stderr, fs.Name(), "--%s: %s", name, badValue(f, value, err)), false
		}
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		return nil, usageError(stderr, fs.Name(), "--log-level: %q is not one of debug, info, warn, error", *level), false
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})))
	return pos, 0, true
}

// badValue says what is wrong with value for f, by the kind of value f
// takes; the flag package's own errors say only "parse error".
func badValue(f *flag.Flag, value string, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf("%q has no unit: durations need a unit, e.g. %ss", value, value)
		}
		return fmt.Sprintf("%q is not a duration: durations need a unit, e.g. 30s, 500ms or 2m", value)
	case bool:
		return fmt.Sprintf("%q is not true or false", value)
	case int, int64:
		if errors.Is(err, strconv.ErrRange) || rangeErr(value) {
			return fmt.Sprintf("%s is out of range", value)
		}
		return fmt.Sprintf("%q is not a whole number", value)
	case uint, uint64:
		if strings.HasPrefix(strings.TrimSpace(value), "-") {
			return fmt.Sprintf("%s is negative: want a whole number, 0 or more", value)
		}
		if rangeErr(value) {
			return fmt.Sprintf("%s is out of range", value)
		}
		return fmt.Sprintf("%q is not a whole number", value)
	case float64:
		return fmt.Sprintf("%q is not a number", value)
	}
	return err.Error()
}

// rangeErr says whether value is an integer too large for 64 bits, which
// the flag package reports only as "value out of range".
func rangeErr(value string) bool {
	_, err := strconv.ParseInt(value, 0, 64)
	if errors.Is(err, strconv.ErrRange) {
		return true
	}
	_, err = strconv.ParseUint(strings.TrimPrefix(value, "-"), 0, 64)
	return errors.Is(err, strconv.ErrRange)
}

// suggest returns the candidate closest to got, when it is close enough to
// be what was meant: a few letters off (edit distance, a swap counting as
// one), or got a unique prefix of it; else "".
func suggest(got string, candidates []string) string {
	best, bestD := "", 0
	var prefixed []string
	for _, c := range candidates {
		if strings.HasPrefix(c, got) {
			prefixed = append(prefixed, c)
		}
		d := distance(got, c)
		if d <= max(1, (min(len(got), len(c))+1)/3) && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	if best == "" && len(prefixed) == 1 && len(got) >= 2 {
		return prefixed[0]
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, each one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
