package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testenv"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const validJSONL = `{"index":0,"type":"invoke","process":0,"f":"write","value":1,"time":10}
{"index":1,"type":"ok","process":0,"f":"write","value":1,"time":20}
{"index":2,"type":"invoke","process":1,"f":"read","value":null,"time":30}
{"index":3,"type":"ok","process":1,"f":"read","value":1,"time":40}
`

const staleJSONL = `{"index":0,"type":"invoke","process":0,"f":"write","value":1,"time":10}
{"index":1,"type":"ok","process":0,"f":"write","value":1,"time":20}
{"index":2,"type":"invoke","process":1,"f":"read","value":null,"time":30}
{"index":3,"type":"ok","process":1,"f":"read","value":null,"time":40}
`

// hardJSONL is a history whose refutation needs an exponential search: k
// concurrent writes, then a read of a value nobody wrote.
func hardJSONL(k int) string {
	var b strings.Builder
	i := 0
	for p := range k {
		fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"f":"write","value":%d}`+"\n", i, p, p)
		i++
	}
	for p := range k {
		fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"f":"write","value":%d}`+"\n", i, p, p)
		i++
	}
	fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"f":"read","value":null}`+"\n", i, k)
	fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"f":"read","value":999}`+"\n", i+1, k)
	return b.String()
}

// cliCase is a command line and what it must do: its exit status, and
// texts its stdout and stderr must contain.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout []string
	stderr []string
}

// runCases runs each case through run, as a subtest.
func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			for _, s := range c.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range c.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

func TestCheckExitCodes(t *testing.T) {
	valid := write(t, "valid.jsonl", validJSONL)
	stale := write(t, "stale.jsonl", staleJSONL)
	hard := write(t, "hard.jsonl", hardJSONL(40))
	broken := write(t, "broken.edn", "[{:process 0 :type :invoke :f :read}\n {:process 0 :type :okk}]")

	cases := []cliCase{
		{"valid", []string{"check", valid}, 0, []string{valid + ": linearizable (cas-register, 2 ops,"}, nil},
		{"flags after the file", []string{"check", valid, "--model", "register"}, 0, []string{"linearizable (register, 2 ops"}, nil},
		{"stale read", []string{"check", stale}, 1, []string{"NOT linearizable", "process 1 read → nil (invoked at index 2, completed at index 3)"}, nil},
		{"one invalid among several", []string{"check", valid, stale, valid}, 1, []string{"NOT linearizable"}, nil},
		{"timeout", []string{"check", "--timeout", "100ms", hard}, 2, []string{"unknown (cas-register, 41 ops", "timeout"}, nil},
		{"memory bound", []string{"check", "--max-memory", "8MiB", hard}, 2, []string{"memory bound"}, nil},
		{"error beats invalid", []string{"check", stale, broken}, 3, []string{"NOT linearizable"}, []string{broken + ":2:20: expected type to be one of invoke, ok, fail, info"}},
		{"unknown model", []string{"check", "--model", "queue", valid}, 3, nil, []string{`unknown model "queue"; valid models: register, cas-register, multi-register, kv, mutex, set, fifo-queue`}},
		{"unknown format", []string{"check", "--format", "xml", valid}, 3, nil, []string{`unknown format "xml"; valid formats: jsonl, edn, json, jepsen-log`}},
		{"wrong format forced", []string{"check", "--format", "edn", valid}, 3, nil, []string{valid + ":1:18: malformed keyword \":\""}},
		{"missing file", []string{"check", "/nonexistent/h.edn"}, 3, nil, []string{"no such file or directory"}},
		{"no file", []string{"check"}, 3, nil, []string{"no history files given"}},
		{"bad initial", []string{"check", "--initial", "[1", valid}, 3, nil, []string{"--initial: value \"[1\""}},
		{"bad size", []string{"check", "--max-memory", "lots", valid}, 3, nil, []string{`--max-memory: "lots" is not a positive size`}},
		{"bad flag", []string{"check", "--frobnicate", valid}, 3, nil, []string{"ipfence check: --frobnicate: no such flag\nsee 'ipfence check --help'\n"}},
		{"bad log level", []string{"check", "--log-level", "loud", valid}, 3, nil, []string{`--log-level: "loud" is not one of`}},
		{"model mismatch", []string{"check", "--model", "mutex", valid}, 3, nil, []string{`model mutex has no operation "write" (valid: acquire, release)`}},
		{"debug logs", []string{"check", "--log-level", "debug", valid}, 0, []string{"linearizable"}, []string{`msg="read history"`, "format=jsonl events=4", "msg=checked", "configs="}},
		{"help", []string{"check", "--help"}, 0, []string{"Usage: ipfence check", "--model", "--timeout", "--json", "--html"}, nil},
		{"top-level help", []string{"help"}, 0, []string{"check", "linearizability"}, nil},
		{"unknown command", []string{"frob"}, 3, nil, []string{`unknown command "frob"`}},
		{"initial value", []string{"check", "--model", "register", "--initial", "1", write(t, "r.jsonl", `{"type":"invoke","process":0,"f":"read"}`+"\n"+`{"type":"ok","process":0,"f":"read","value":1}`)}, 0, []string{"linearizable"}, nil},
	}
	runCases(t, cases)
}

func TestCheckJSON(t *testing.T) {
	valid := write(t, "valid.jsonl", validJSONL)
	stale := write(t, "stale.jsonl", staleJSONL)
	code, stdout, _ := runCLI("check", "--json", valid, stale)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per file, got %q", stdout)
	}
	var reports []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		reports = append(reports, m)
	}
	if r := reports[0]; r["file"] != valid || r["model"] != "cas-register" || r["valid"] != true || r["ops"] != 2.0 || r["failure"] != nil {
		t.Errorf("valid report %v", r)
	}
	if ns, ok := reports[0]["check_ns"].(float64); !ok || ns <= 0 {
		t.Errorf("check_ns %v", reports[0]["check_ns"])
	}
	r := reports[1]
	f, _ := r["failure"].(map[string]any)
	op, _ := f["op"].(map[string]any)
	if r["valid"] != false || op["index"] != 3.0 || op["process"] != 1.0 || op["f"] != "read" || f["state"] != "1" {
		t.Errorf("invalid report %v", r)
	}
	hard := write(t, "hard.jsonl", hardJSONL(40))
	code, stdout, _ = runCLI("check", "--json", "--timeout", "50ms", hard)
	var u map[string]any
	if err := json.Unmarshal([]byte(stdout), &u); err != nil || code != 2 || u["valid"] != "unknown" || u["reason"] != "timeout" {
		t.Errorf("unknown report (exit %d): %s", code, stdout)
	}
}

func TestCheckHTML(t *testing.T) {
	dir := t.TempDir()
	valid := write(t, "valid.jsonl", validJSONL)
	stale := write(t, "stale.jsonl", staleJSONL)
	out := filepath.Join(dir, "page.html")
	if code, _, stderr := runCLI("check", "--html", out, stale); code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte("<html")) {
		t.Fatalf("page: %v %.200s", err, b)
	}
	// Several inputs get a page each.
	if code, _, stderr := runCLI("check", "--html", out, valid, stale); code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"page-valid.html", "page-stale.html"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if code, _, stderr := runCLI("check", "--html", "/nonexistent/dir/p.html", valid); code != 3 || !strings.Contains(stderr, "--html") {
		t.Errorf("unwritable page: exit %d, %s", code, stderr)
	}
}

// The real binary, as a user runs it: exit status through os.Exit, on a
// corpus file.
func TestBinary(t *testing.T) {
	file := filepath.Join(testenv.Corpus(t), "knossos", "cas-register", "bad", "cas-failure.edn")
	bin := filepath.Join(t.TempDir(), "ipfence")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "check", "--initial", "0", file)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	if !strings.Contains(string(out), "process 70 read → 0 (invoked at index 488, completed at index 491)") {
		t.Fatalf("output: %s", out)
	}
}
