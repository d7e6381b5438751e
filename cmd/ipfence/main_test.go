package main

import (
	"bytes"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsageErrors runs bad command lines through run and checks the exact
// output: one line naming the command, the flag and what is wrong, then
// where to read more; nothing on stdout; exit 3. A command of the
// toolkit's binary is named with where it is.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"swapped letters", []string{"sever"}, "ipfence: unknown command \"sever\"; did you mean \"serve\"?\nsee 'ipfence --help'\n"},
		{"unknown command", []string{"frobnicate"}, "ipfence: unknown command \"frobnicate\"\nsee 'ipfence --help'\n"},
		{"flag before the command", []string{"--json", "ctl"}, "ipfence: --json: flags come after the command, as in 'ipfence ctl --json status'\nsee 'ipfence --help'\n"},
		{"help for a misspelled command", []string{"help", "doctr"}, "ipfence: unknown command \"doctr\"; did you mean \"doctor\"?\nsee 'ipfence --help'\n"},
		{"a toolkit command", []string{"check", "--json", "h.jsonl"}, "ipfence: check is a command of ipfence-verify, the other binary: run 'ipfence-verify check --json h.jsonl'\n"},
		{"the main job", []string{"test", "capture"}, "ipfence: test is a command of ipfence-verify, the other binary: run 'ipfence-verify test capture'\n"},
		{"duration with =", []string{"doctor", "--timeout=1.5"},
			"ipfence doctor: --timeout: \"1.5\" has no unit: durations need a unit, e.g. 1.5s\nsee 'ipfence doctor --help'\n"},
		{"misspelled flag", []string{"doctor", "--adress", "10.0.0.1"},
			"ipfence doctor: --adress: no such flag; did you mean --address?\nsee 'ipfence doctor --help'\n"},
		{"bad boolean", []string{"doctor", "--json=maybe"}, "ipfence doctor: --json: \"maybe\" is not true or false\nsee 'ipfence doctor --help'\n"},
		{"doctor without --address", []string{"doctor"}, "ipfence doctor: --address is required\nsee 'ipfence doctor --help'\n"},
		{"ctl without endpoint", []string{"ctl", "status"}, "ipfence ctl: --endpoint and --token-file are required (under mutual TLS, --cert, --key and --ca may stand in for --token-file)\nsee 'ipfence ctl --help'\n"},
		{"serve without --config", []string{"serve", "--listen-fd", "x"}, "ipfence serve: --listen-fd: \"x\" is not a whole number\nsee 'ipfence serve --help'\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(c.args...)
			if code != 3 || stdout != "" || stderr != c.stderr {
				t.Errorf("ipfence %s: exit %d\nstdout %q\nstderr %q\nwant exit 3, no stdout and stderr %q", strings.Join(c.args, " "), code, stdout, stderr, c.stderr)
			}
		})
	}
}

// TestHelp checks that help, asked for in any of its spellings and
// wherever on the line, goes to stdout with exit 0 and nothing on stderr,
// and that the operator's binary lists its three commands and names the
// toolkit's.
func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"Usage: ipfence <command>", "  serve    run a capture node", "  ctl      operate", "  doctor   ask the LAN",
			"ipfence-verify has check, cloudsim, dev, sim, test, web.\n"}},
		{[]string{"--help"}, []string{"Usage: ipfence <command>"}},
		{[]string{"-h"}, []string{"Usage: ipfence <command>"}},
		{[]string{"ctl", "status", "--help"}, []string{"Usage: ipfence ctl ", "  --json\n"}},
		{[]string{"doctor", "--help"}, []string{"Usage: ipfence doctor ", "  --timeout duration\n"}},
		{[]string{"help", "serve"}, []string{"Usage: ipfence serve ", "  --config string\n"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("ipfence %s: exit %d, stderr %q; want 0 and nothing", strings.Join(c.args, " "), code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("ipfence %s: stdout lacks %q:\n%s", strings.Join(c.args, " "), w, stdout)
			}
		}
		for _, toolkit := range []string{"  check ", "  sim ", "  dev "} {
			if strings.Contains(stdout, toolkit) {
				t.Errorf("ipfence %s lists a toolkit command %q:\n%s", strings.Join(c.args, " "), toolkit, stdout)
			}
		}
	}
	code, stdout, stderr := runCLI()
	if code != 3 || stdout != "" || !strings.HasPrefix(stderr, "Usage: ipfence <command>") {
		t.Errorf("ipfence: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
