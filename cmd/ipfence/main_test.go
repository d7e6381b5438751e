package main

import (
	"strings"
	"testing"

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
		{"misspelled command", []string{"chek"}, "ipfence: unknown command \"chek\"; did you mean \"check\"?\nsee 'ipfence --help'\n"},
		{"swapped letters", []string{"sever"}, "ipfence: unknown command \"sever\"; did you mean \"serve\"?\nsee 'ipfence --help'\n"},
		{"unknown command", []string{"frobnicate"}, "ipfence: unknown command \"frobnicate\"\nsee 'ipfence --help'\n"},
		{"flag before the command", []string{"--json", "check"}, "ipfence: --json: flags come after the command, as in 'ipfence check --json FILE'\nsee 'ipfence --help'\n"},
		{"help for a misspelled command", []string{"help", "chek"}, "ipfence: unknown command \"chek\"; did you mean \"check\"?\nsee 'ipfence --help'\n"},
		{"duration without a unit", []string{"test", "capture", "--time-limit", "30"},
			"ipfence test capture: --time-limit: \"30\" has no unit: durations need a unit, e.g. 30s\nsee 'ipfence test capture --help'\n"},
		{"duration with =", []string{"doctor", "--timeout=1.5"},
			"ipfence doctor: --timeout: \"1.5\" has no unit: durations need a unit, e.g. 1.5s\nsee 'ipfence doctor --help'\n"},
		{"not a duration", []string{"check", "--timeout", "soon"},
			"ipfence check: --timeout: \"soon\" is not a duration: durations need a unit, e.g. 30s, 500ms or 2m\nsee 'ipfence check --help'\n"},
		{"misspelled flag", []string{"doctor", "--adress", "10.0.0.1"},
			"ipfence doctor: --adress: no such flag; did you mean --address?\nsee 'ipfence doctor --help'\n"},
		{"flag prefix", []string{"dev", "--node", "3"},
			"ipfence dev: --node: no such flag; did you mean --nodes?\nsee 'ipfence dev --help'\n"},
		{"one dash", []string{"sim", "-db", "si", "-opps", "3"},
			"ipfence sim: --opps: no such flag; did you mean --ops?\nsee 'ipfence sim --help'\n"},
		{"unknown flag", []string{"sim", "--frobnicate"}, "ipfence sim: --frobnicate: no such flag\nsee 'ipfence sim --help'\n"},
		{"missing value", []string{"sim", "--db"}, "ipfence sim: --db: needs a value\nsee 'ipfence sim --help'\n"},
		{"not a number", []string{"dev", "--nodes", "three"}, "ipfence dev: --nodes: \"three\" is not a whole number\nsee 'ipfence dev --help'\n"},
		{"negative unsigned", []string{"sim", "--seed", "-1"}, "ipfence sim: --seed: -1 is negative: want a whole number, 0 or more\nsee 'ipfence sim --help'\n"},
		{"out of range", []string{"sim", "--ops", "99999999999999999999"}, "ipfence sim: --ops: 99999999999999999999 is out of range\nsee 'ipfence sim --help'\n"},
		{"not a float", []string{"sim", "--info-rate", "half"}, "ipfence sim: --info-rate: \"half\" is not a number\nsee 'ipfence sim --help'\n"},
		{"bad boolean", []string{"doctor", "--json=maybe"}, "ipfence doctor: --json: \"maybe\" is not true or false\nsee 'ipfence doctor --help'\n"},
		{"three dashes", []string{"sim", "---db"}, "ipfence sim: \"---db\" is not a flag: flags are written --name or --name=value\nsee 'ipfence sim --help'\n"},
		{"bad log level", []string{"sim", "--log-level", "loud"}, "ipfence sim: --log-level: \"loud\" is not one of debug, info, warn, error\nsee 'ipfence sim --help'\n"},
		{"sim without --db", []string{"sim"}, "ipfence sim: --db is required: one of " + simDBs() + "\nsee 'ipfence sim --help'\n"},
		{"dev argument", []string{"dev", "extra"}, "ipfence dev: unexpected argument \"extra\": dev takes flags only\nsee 'ipfence dev --help'\n"},
		{"dev nodes", []string{"dev", "--nodes", "0"}, "ipfence dev: --nodes: 0 is not between 1 and 64\nsee 'ipfence dev --help'\n"},
		{"doctor without --address", []string{"doctor"}, "ipfence doctor: --address is required\nsee 'ipfence doctor --help'\n"},
		{"ctl without endpoint", []string{"ctl", "status"}, "ipfence ctl: --endpoint and --token-file are required (under mutual TLS, --cert, --key and --ca may stand in for --token-file)\nsee 'ipfence ctl --help'\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(c.args...)
			if code != exitError || stdout != "" || stderr != c.stderr {
				t.Errorf("ipfence %s: exit %d\nstdout %q\nstderr %q\nwant exit 3, no stdout and stderr %q", strings.Join(c.args, " "), code, stdout, stderr, c.stderr)
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
		{[]string{"help"}, []string{"Usage: ipfence <command>", "  check    check histories", "  dev      start a simulator"}},
		{[]string{"--help"}, []string{"Usage: ipfence <command>"}},
		{[]string{"-h"}, []string{"Usage: ipfence <command>"}},
		{[]string{"help", "--help"}, []string{"Usage: ipfence <command>"}},
		{[]string{"--help", "help"}, []string{"Usage: ipfence <command>"}},
		{[]string{"help", "help"}, []string{"Usage: ipfence <command>"}},
		{[]string{"dev", "--help"}, []string{"Usage: ipfence dev ", "  --nodes int\n", "  --log-level string\n", "(default warn)"}},
		{[]string{"help", "dev"}, []string{"Usage: ipfence dev "}},
		{[]string{"sim", "-h"}, []string{"Usage: ipfence sim ", "  --db string\n"}},
		// Help wins over a bad flag before it.
		{[]string{"sim", "--bogus", "--help"}, []string{"Usage: ipfence sim "}},
		{[]string{"ctl", "status", "--help"}, []string{"Usage: ipfence ctl ", "  --json\n"}},
		{[]string{"doctor", "--help"}, []string{"Usage: ipfence doctor ", "  --timeout duration\n"}},
		{[]string{"help", "serve"}, []string{"Usage: ipfence serve ", "  --config string\n"}},
		{[]string{"test", "--help"}, []string{"Usage: ipfence test capture|etcd"}},
		{[]string{"help", "test", "capture"}, []string{"Usage: ipfence test capture ", "  --time-limit duration\n"}},
		{[]string{"check", "--help"}, []string{"Usage: ipfence check ", "  --model string\n"}},
		{[]string{"cloudsim", "--help"}, []string{"Usage: ipfence cloudsim ", "  --nics string\n"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(c.args...)
		if code != exitValid || stderr != "" {
			t.Errorf("ipfence %s: exit %d, stderr %q; want 0 and nothing", strings.Join(c.args, " "), code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("ipfence %s: stdout lacks %q:\n%s", strings.Join(c.args, " "), w, stdout)
			}
		}
	}
	// No command at all is a usage error: the list of commands, on stderr.
	code, stdout, stderr := runCLI()
	if code != exitError || stdout != "" || !strings.HasPrefix(stderr, "Usage: ipfence <command>") {
		t.Errorf("ipfence: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestFlagForms checks the spellings parse accepts: flags between and
// after positional arguments, --name=value, one dash, and "--" ending
// flags.
func TestFlagForms(t *testing.T) {
	fs, level := flagSet("x", "x [--n N] ARGS", nil)
	n := fs.Int("n", 1, "")
	b := fs.Bool("b", false, "")
	pos, code, ok := parse(fs, level, []string{"a", "--n", "5", "b", "-b", "--n=7", "--", "--n", "c"}, &strings.Builder{})
	if !ok || code != 0 || *n != 7 || !*b || strings.Join(pos, ",") != "a,b,--n,c" {
		t.Fatalf("pos %q, code %d, ok %v, n %d, b %v", pos, code, ok, *n, *b)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"check", "cloudsim", "serve", "ctl", "dev", "test", "sim", "doctor", "help"}
	for got, want := range map[string]string{
		"chek": "check", "chekc": "check", "cheque": "", "tset": "test", "doc": "doctor", "ctrl": "ctl",
		"cloud": "cloudsim", "x": "", "serv": "serve", "zzzzzz": "",
	} {
		if s := suggest(got, names); s != want {
			t.Errorf("suggest(%q) = %q, want %q", got, s, want)
		}
	}
}

func simDBs() string { return strings.Join(txnsim.DBs, ", ") }
