package main

import (
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// TestUsageErrors runs bad command lines through run and checks the exact
// output: one line naming the command, the flag and what is wrong, then
// where to read more; nothing on stdout; exit 3.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"misspelled command", []string{"chek"}, "ipfence-verify: unknown command \"chek\"; did you mean \"check\"?\nsee 'ipfence-verify --help'\n"},
		{"an operator's command", []string{"ctl", "status"}, "ipfence-verify: ctl is a command of ipfence, the other binary: run 'ipfence ctl status'\n"},
		{"unknown command", []string{"frobnicate"}, "ipfence-verify: unknown command \"frobnicate\"\nsee 'ipfence-verify --help'\n"},
		{"flag before the command", []string{"--json", "check"}, "ipfence-verify: --json: flags come after the command, as in 'ipfence-verify check --json FILE'\nsee 'ipfence-verify --help'\n"},
		{"help for a misspelled command", []string{"help", "chek"}, "ipfence-verify: unknown command \"chek\"; did you mean \"check\"?\nsee 'ipfence-verify --help'\n"},
		{"duration without a unit", []string{"test", "capture", "--time-limit", "30"},
			"ipfence-verify test capture: --time-limit: \"30\" has no unit: durations need a unit, e.g. 30s\nsee 'ipfence-verify test capture --help'\n"},
		{"not a duration", []string{"check", "--timeout", "soon"},
			"ipfence-verify check: --timeout: \"soon\" is not a duration: durations need a unit, e.g. 30s, 500ms or 2m\nsee 'ipfence-verify check --help'\n"},
		{"flag prefix", []string{"dev", "--node", "3"},
			"ipfence-verify dev: --node: no such flag; did you mean --nodes?\nsee 'ipfence-verify dev --help'\n"},
		{"one dash", []string{"sim", "-db", "si", "-opps", "3"},
			"ipfence-verify sim: --opps: no such flag; did you mean --ops?\nsee 'ipfence-verify sim --help'\n"},
		{"unknown flag", []string{"sim", "--frobnicate"}, "ipfence-verify sim: --frobnicate: no such flag\nsee 'ipfence-verify sim --help'\n"},
		{"missing value", []string{"sim", "--db"}, "ipfence-verify sim: --db: needs a value\nsee 'ipfence-verify sim --help'\n"},
		{"not a number", []string{"dev", "--nodes", "three"}, "ipfence-verify dev: --nodes: \"three\" is not a whole number\nsee 'ipfence-verify dev --help'\n"},
		{"negative unsigned", []string{"sim", "--seed", "-1"}, "ipfence-verify sim: --seed: -1 is negative: want a whole number, 0 or more\nsee 'ipfence-verify sim --help'\n"},
		{"out of range", []string{"sim", "--ops", "99999999999999999999"}, "ipfence-verify sim: --ops: 99999999999999999999 is out of range\nsee 'ipfence-verify sim --help'\n"},
		{"not a float", []string{"sim", "--info-rate", "half"}, "ipfence-verify sim: --info-rate: \"half\" is not a number\nsee 'ipfence-verify sim --help'\n"},
		{"three dashes", []string{"sim", "---db"}, "ipfence-verify sim: \"---db\" is not a flag: flags are written --name or --name=value\nsee 'ipfence-verify sim --help'\n"},
		{"bad log level", []string{"sim", "--log-level", "loud"}, "ipfence-verify sim: --log-level: \"loud\" is not one of debug, info, warn, error\nsee 'ipfence-verify sim --help'\n"},
		{"sim without --db", []string{"sim"}, "ipfence-verify sim: --db is required: one of " + simDBs() + "\nsee 'ipfence-verify sim --help'\n"},
		{"dev argument", []string{"dev", "extra"}, "ipfence-verify dev: unexpected argument \"extra\": dev takes flags only\nsee 'ipfence-verify dev --help'\n"},
		{"dev nodes", []string{"dev", "--nodes", "0"}, "ipfence-verify dev: --nodes: 0 is not between 1 and 64\nsee 'ipfence-verify dev --help'\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(c.args...)
			if code != cli.ExitError || stdout != "" || stderr != c.stderr {
				t.Errorf("ipfence-verify %s: exit %d\nstdout %q\nstderr %q\nwant exit 3, no stdout and stderr %q", strings.Join(c.args, " "), code, stdout, stderr, c.stderr)
			}
		})
	}
}

// TestHelp checks that help, asked for in any of its spellings and
// wherever on the line, goes to stdout with exit 0 and nothing on stderr.
func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"Usage: ipfence-verify <command>", "  check    check histories", "  dev      start a simulator"}},
		{[]string{"--help"}, []string{"Usage: ipfence-verify <command>"}},
		{[]string{"-h"}, []string{"Usage: ipfence-verify <command>"}},
		{[]string{"help", "--help"}, []string{"Usage: ipfence-verify <command>"}},
		{[]string{"--help", "help"}, []string{"Usage: ipfence-verify <command>"}},
		{[]string{"help", "help"}, []string{"Usage: ipfence-verify <command>"}},
		{[]string{"dev", "--help"}, []string{"Usage: ipfence-verify dev ", "  --nodes int\n", "  --log-level string\n", "(default warn)"}},
		{[]string{"help", "dev"}, []string{"Usage: ipfence-verify dev "}},
		{[]string{"sim", "-h"}, []string{"Usage: ipfence-verify sim ", "  --db string\n"}},
		// Help wins over a bad flag before it.
		{[]string{"sim", "--bogus", "--help"}, []string{"Usage: ipfence-verify sim "}},
		{[]string{"test", "--help"}, []string{"Usage: ipfence-verify test capture|etcd"}},
		{[]string{"help", "test", "capture"}, []string{"Usage: ipfence-verify test capture ", "  --time-limit duration\n"}},
		{[]string{"check", "--help"}, []string{"Usage: ipfence-verify check ", "  --model string\n"}},
		{[]string{"cloudsim", "--help"}, []string{"Usage: ipfence-verify cloudsim ", "  --nics string\n"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(c.args...)
		if code != cli.ExitValid || stderr != "" {
			t.Errorf("ipfence-verify %s: exit %d, stderr %q; want 0 and nothing", strings.Join(c.args, " "), code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("ipfence-verify %s: stdout lacks %q:\n%s", strings.Join(c.args, " "), w, stdout)
			}
		}
	}
	// No command at all is a usage error: the list of commands, on stderr.
	code, stdout, stderr := runCLI()
	if code != cli.ExitError || stdout != "" || !strings.HasPrefix(stderr, "Usage: ipfence-verify <command>") {
		t.Errorf("ipfence-verify: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func simDBs() string { return strings.Join(txnsim.DBs, ", ") }
