// Package cli is the command line both of ipfence's binaries share: the
// operator's (ipfence: serve, ctl, doctor) and the toolkit's
// (ipfence-verify: check, sim, test, cloudsim, dev, web). One style for
// every command — --name value flags anywhere on the line, help on stdout
// with exit 0, one line naming the command, the flag and what is wrong
// with exit 3 — whichever binary it is in.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Exit codes shared by every subcommand that gives a verdict.
const (
	ExitValid   = 0 // valid, or done
	ExitInvalid = 1 // a verdict: invalid
	ExitUnknown = 2 // a verdict: unknown
	ExitError   = 3 // a usage error or a failure to check
)

// Command is one subcommand of a binary.
type Command struct {
	Name, Summary string
	// Run runs the command with the arguments after its name and returns
	// the exit code.
	Run func(args []string, stdout, stderr io.Writer) int
	// Hidden commands run but are not listed (the toolkit's serve, which
	// the tests it runs start their nodes with).
	Hidden bool
}

// Program is a binary: its name, its commands, and the commands of the
// other binary, so that a user who asks one for the other's command is
// told where it is rather than that it does not exist.
type Program struct {
	Name     string
	Commands []Command
	// Example is a command line shown to a user who put a flag before the
	// command (e.g. "ipfence ctl --json status").
	Example string
	// Elsewhere maps a command of another binary to that binary's name.
	Elsewhere map[string]string
}

// program is the name of the running binary, for help and errors; set by
// Program.Run (atomically: a test may run several at once).
var program atomic.Pointer[string]

// Name is the running binary's name ("ipfence" until Run is called).
func Name() string {
	if p := program.Load(); p != nil {
		return *p
	}
	return "ipfence"
}

// Run is the whole program but for the process: it returns the exit code.
// Help is output the user asked for, so it goes to stdout with exit 0:
// a command run for its help gets stdout as its stderr too, so that every
// command's help lands there however the command prints it. Usage errors
// go to stderr and exit 3.
func (p Program) Run(args []string, stdout, stderr io.Writer) int {
	name := p.Name
	program.Store(&name)
	if len(args) == 0 {
		p.usage(stderr)
		return ExitError
	}
	if IsHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 && !IsHelp(args[1]) && args[1] != "help" {
			return p.Run(append(slices.Clip(args[1:]), "--help"), stdout, stderr)
		}
		p.usage(stdout)
		return ExitValid
	}
	var names []string
	for _, c := range p.Commands {
		if c.Name == args[0] {
			if helpRequested(args[1:]) {
				return c.Run(args[1:], stdout, stdout)
			}
			return c.Run(args[1:], stdout, stderr)
		}
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if other, ok := p.Elsewhere[args[0]]; ok {
		fmt.Fprintf(stderr, "%s: %s is a command of %s, the other binary: run '%s %s'\n",
			p.Name, args[0], other, other, strings.Join(args, " "))
		return ExitError
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if strings.HasPrefix(args[0], "-") {
		msg = fmt.Sprintf("%s: flags come after the command, as in '%s'", args[0], p.Example)
	} else if s := Suggest(args[0], append(names, "help")); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	fmt.Fprintf(stderr, "%s: %s\nsee '%s --help'\n", p.Name, msg, p.Name)
	return ExitError
}

func (p Program) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s <command> [flags] [args]\n", p.Name)
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range p.Commands {
		if !c.Hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.Name, c.Summary)
		}
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' or '%s help <command>' for a command's flags.\n", p.Name, p.Name)
	if len(p.Elsewhere) > 0 {
		others := map[string][]string{}
		for c, bin := range p.Elsewhere {
			others[bin] = append(others[bin], c)
		}
		for _, bin := range slices.Sorted(maps.Keys(others)) {
			fmt.Fprintf(w, "%s has %s.\n", bin, strings.Join(slices.Sorted(slices.Values(others[bin])), ", "))
		}
	}
}

// IsHelp says whether arg asks for help, in any of the spellings the flag
// package accepts.
func IsHelp(arg string) bool {
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
		if IsHelp(a) {
			return true
		}
	}
	return false
}

// synopses holds each flag set's synopsis for its help text, from FlagSet
// until Parse is done with it.
var synopses sync.Map // *flag.FlagSet → string

// FlagSet builds a subcommand's flags in the one style every command uses:
// --name value, with --log-level on all of them. Errors and help are
// parse's: fs.Usage prints nothing, so that a command calling it before
// its own one-line error prints that line alone.
func FlagSet(name, synopsis string, stderr io.Writer) (*flag.FlagSet, *string) {
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
	fmt.Fprintf(w, "Usage: %s %s\n\nFlags:\n", Name(), synopsis)
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

// UsageError prints a usage error in the one style of every command — a
// line naming the command and what is wrong, then where to read more —
// and returns the exit code of a usage error.
func UsageError(stderr io.Writer, command, format string, a ...any) int {
	fmt.Fprintf(stderr, "%s %s: %s\nsee '%s %s --help'\n", Name(), command, fmt.Sprintf(format, a...), Name(), command)
	return ExitError
}

// Parse reads flags that may come before, between or after positional
// arguments, as users of most command-line tools expect; "--" ends flags.
// Flags are written --name value or --name=value (one dash works too).
// It returns the positional arguments, or an exit code when parsing ended
// the command: help (printed, exit 0), or a bad flag (one line naming the
// flag and what is wrong, exit 3).
func Parse(fs *flag.FlagSet, level *string, args []string, stderr io.Writer) ([]string, int, bool) {
	syn, _ := synopses.LoadAndDelete(fs)
	synopsis, _ := syn.(string)
	if synopsis == "" {
		synopsis = fs.Name() + " [flags]"
	}
	if helpRequested(args) {
		printHelp(fs, synopsis)
		return nil, ExitValid, false
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
			return nil, UsageError(stderr, fs.Name(), "%q is not a flag: flags are written --name or --name=value", a), false
		}
		f := fs.Lookup(name)
		if f == nil {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			msg := "no such flag"
			if s := Suggest(name, append(names, "help")); s != "" {
				msg += fmt.Sprintf("; did you mean --%s?", s)
			}
			return nil, UsageError(stderr, fs.Name(), "--%s: %s", name, msg), false
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasValue {
			value = "true"
		} else if !hasValue {
			if i+1 == len(args) {
				return nil, UsageError(stderr, fs.Name(), "--%s: needs a value", name), false
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, UsageError(stderr, fs.Name(), "--%s: %s", name, badValue(f, value, err)), false
		}
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		return nil, UsageError(stderr, fs.Name(), "--log-level: %q is not one of debug, info, warn, error", *level), false
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

// Suggest returns the candidate closest to got, when it is close enough to
// be what was meant: a few letters off (edit distance, a swap counting as
// one), or got a unique prefix of it; else "".
func Suggest(got string, candidates []string) string {
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

// OrDash shows an empty cell as "-", so that columns stay readable (ctl's
// tables, dev's moves).
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
