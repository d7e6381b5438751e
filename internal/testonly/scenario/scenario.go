// Package scenario runs data-driven tests: text files of commands, each with
// an optional input and the output it must produce, so that a reviewer reads
// the scenario rather than the code. A file looks like:
//
//	# a comment
//	command arg key=value key=(a,b)
//	optional input lines
//	----
//	expected output lines
//
// A case ends at the first blank line after its "----". Run the tests with
// -rewrite to write the current outputs into the files after a deliberate
// change, then read the diff.
package scenario

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite scenario files with the outputs the code gives")

// Case is one command of a scenario file.
type Case struct {
	// Pos is file:line of the command, for messages.
	Pos  string
	Cmd  string
	Args []Arg
	// Input is the text between the command line and "----".
	Input    string
	Expected string
}

// Arg is one argument: a bare word (Key only) or key=value(s).
type Arg struct {
	Key  string
	Vals []string
}

// Has reports whether the case has an argument named key.
func (c *Case) Has(key string) bool {
	for _, a := range c.Args {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Get returns the first value of argument key, or def.
func (c *Case) Get(key, def string) string {
	for _, a := range c.Args {
		if a.Key == key && len(a.Vals) > 0 {
			return a.Vals[0]
		}
	}
	return def
}

// Values returns every value of argument key.
func (c *Case) Values(key string) []string {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func parseArgs(fields []string) []Arg {
	var out []Arg
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			out = append(out, Arg{Key: f})
			continue
		}
		v = strings.TrimSuffix(strings.TrimPrefix(v, "("), ")")
		out = append(out, Arg{Key: k, Vals: strings.Split(v, ",")})
	}
	return out
}

// Parse reads the cases of a scenario file.
func Parse(path string) ([]Case, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var cases []Case
	var layout []string // the file with each case's expected output replaced by a placeholder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			layout = append(layout, line)
			continue
		}
		c := Case{Pos: fmt.Sprintf("%s:%d", path, i+1)}
		fields := strings.Fields(trimmed)
		c.Cmd, c.Args = fields[0], parseArgs(fields[1:])
		var input []string
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			input = append(input, lines[i])
		}
		if i == len(lines) {
			return nil, nil, fmt.Errorf("%s: command %q has no ---- line", c.Pos, c.Cmd)
		}
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.Input, c.Expected = strings.Join(input, "\n"), strings.Join(want, "\n")
		layout = append(layout, line)
		layout = append(layout, input...)
		layout = append(layout, "----", fmt.Sprintf("\x00%d", len(cases)))
		if i < len(lines) {
			layout = append(layout, "")
		}
		cases = append(cases, c)
	}
	return cases, layout, nil
}

// Run runs every case of the file through f, which returns the output; the
// output must equal the expected text (trailing newlines ignored).
func Run(t *testing.T, path string, f func(t *testing.T, c *Case) string) {
	t.Helper()
	cases, layout, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	outputs := make([]string, len(cases))
	for i := range cases {
		c := &cases[i]
		out := strings.TrimRight(f(t, c), "\n")
		// A blank line would end the case early when the file is read
		// back, so outputs show it as a lone ".".
		out = strings.ReplaceAll(out, "\n\n", "\n.\n")
		outputs[i] = out
		if !*rewrite && out != c.Expected {
			t.Errorf("%s: %s\n--- got\n%s\n--- want\n%s", c.Pos, c.Cmd, out, c.Expected)
		}
	}
	if *rewrite {
		var b strings.Builder
		for _, l := range layout {
			if strings.HasPrefix(l, "\x00") {
				var n int
				fmt.Sscanf(l[1:], "%d", &n)
				b.WriteString(outputs[n])
			} else {
				b.WriteString(l)
			}
			b.WriteByte('\n')
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Walk runs every .txt scenario in dir as a subtest.
func Walk(t *testing.T, dir string, f func(t *testing.T, path string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
	for _, p := range files {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) { f(t, p) })
	}
}

// Lines splits an input into trimmed, non-empty lines.
func Lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}
