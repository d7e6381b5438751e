package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestFlagForms checks the spellings Parse accepts: flags between and
// after positional arguments, --name=value, one dash, and "--" ending
// flags.
func TestFlagForms(t *testing.T) {
	fs, level := FlagSet("x", "x [--n N] ARGS", nil)
	n := fs.Int("n", 1, "")
	b := fs.Bool("b", false, "")
	pos, code, ok := Parse(fs, level, []string{"a", "--n", "5", "b", "-b", "--n=7", "--", "--n", "c"}, &strings.Builder{})
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
		if s := Suggest(got, names); s != want {
			t.Errorf("Suggest(%q) = %q, want %q", got, s, want)
		}
	}
}

// A program names itself in help and errors, runs a hidden command without
// listing or suggesting it, and sends a user asking for the other binary's
// command there.
func TestProgram(t *testing.T) {
	var ran []string
	cmd := func(name string) func([]string, io.Writer, io.Writer) int {
		return func(args []string, _, stderr io.Writer) int {
			ran = append(ran, name+" "+strings.Join(args, " "))
			fs, level := FlagSet(name, name+" [--n N]", stderr)
			fs.Int("n", 1, "a number")
			if _, code, ok := Parse(fs, level, args, stderr); !ok {
				return code
			}
			return ExitValid
		}
	}
	p := Program{
		Name: "tool",
		Commands: []Command{
			{Name: "check", Summary: "checks things", Run: cmd("check")},
			{Name: "serve", Summary: "serves", Run: cmd("serve"), Hidden: true},
		},
		Example:   "tool check --n 2",
		Elsewhere: map[string]string{"ctl": "other", "doctor": "other"},
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := p.Run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errb := run("help")
	if code != ExitValid || errb != "" || out != "Usage: tool <command> [flags] [args]\n\nCommands:\n  check    checks things\n\nRun 'tool <command> --help' or 'tool help <command>' for a command's flags.\nother has ctl, doctor.\n" {
		t.Fatalf("help: %d %q %q", code, out, errb)
	}
	if code, _, errb := run("serve", "--n", "3"); code != ExitValid || errb != "" || ran[len(ran)-1] != "serve --n 3" {
		t.Fatalf("hidden serve: %d %q %v", code, errb, ran)
	}
	if code, _, errb := run("serv"); code != ExitError || errb != "tool: unknown command \"serv\"\nsee 'tool --help'\n" {
		t.Fatalf("a hidden command is suggested: %d %q", code, errb)
	}
	if code, _, errb := run("ctl", "status"); code != ExitError || errb != "tool: ctl is a command of other, the other binary: run 'other ctl status'\n" {
		t.Fatalf("elsewhere: %d %q", code, errb)
	}
	if code, _, errb := run("--n", "check"); code != ExitError || errb != "tool: --n: flags come after the command, as in 'tool check --n 2'\nsee 'tool --help'\n" {
		t.Fatalf("flag first: %d %q", code, errb)
	}
	if code, _, errb := run("check", "--n", "x"); code != ExitError || errb != "tool check: --n: \"x\" is not a whole number\nsee 'tool check --help'\n" {
		t.Fatalf("bad flag: %d %q", code, errb)
	}
	if code, out, _ := run("check", "--help"); code != ExitValid || !strings.HasPrefix(out, "Usage: tool check [--n N]\n\nFlags:\n  --log-level string") {
		t.Fatalf("command help: %d %q", code, out)
	}
}
