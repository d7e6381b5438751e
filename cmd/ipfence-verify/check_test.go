package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
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
		// The deadline counts the parse too: long enough that the search
		// starts, even on a loaded machine.
		{"timeout", []string{"check", "--timeout", "1s", hard}, 2, []string{"unknown (cas-register, 41 ops", "timeout"}, nil},
		{"memory bound", []string{"check", "--max-memory", "8MiB", hard}, 2, []string{"memory bound"}, nil},
		{"error beats invalid", []string{"check", stale, broken}, 3, []string{"NOT linearizable"}, []string{broken + ":2:20: expected type to be one of invoke, ok, fail, info"}},
		{"unknown model", []string{"check", "--model", "queue", valid}, 3, nil, []string{`unknown model "queue"; valid models: register, cas-register, multi-register, kv, mutex, set, fifo-queue`}},
		{"unknown format", []string{"check", "--format", "xml", valid}, 3, nil, []string{`unknown format "xml"; valid formats: jsonl, edn, json, jepsen-log`}},
		{"wrong format forced", []string{"check", "--format", "edn", valid}, 3, nil, []string{valid + ":1:18: malformed keyword \":\""}},
		{"missing file", []string{"check", "/nonexistent/h.edn"}, 3, nil, []string{"no such file or directory"}},
		{"no file", []string{"check"}, 3, nil, []string{"no history files given"}},
		{"bad initial", []string{"check", "--initial", "[1", valid}, 3, nil, []string{"--initial: value \"[1\""}},
		{"bad size", []string{"check", "--max-memory", "lots", valid}, 3, nil, []string{`--max-memory: "lots" is not a positive size`}},
		{"bad flag", []string{"check", "--frobnicate", valid}, 3, nil, []string{"ipfence-verify check: --frobnicate: no such flag\nsee 'ipfence-verify check --help'\n"}},
		{"bad log level", []string{"check", "--log-level", "loud", valid}, 3, nil, []string{`--log-level: "loud" is not one of`}},
		{"model mismatch", []string{"check", "--model", "mutex", valid}, 3, nil, []string{`model mutex has no operation "write" (valid: acquire, release)`}},
		{"debug logs", []string{"check", "--log-level", "debug", valid}, 0, []string{"linearizable"}, []string{`msg="read history"`, "format=jsonl events=4", "msg=checked", "configs="}},
		{"help", []string{"check", "--help"}, 0, []string{"Usage: ipfence-verify check", "--model", "--timeout", "--json", "--html"}, nil},
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

var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// binary builds the command once for the tests that run it as a process.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "ipfence-bin")
		if built.err == nil {
			built.out, built.err = exec.Command("go", "build", "-o", filepath.Join(built.dir, "ipfence-verify"), ".").CombinedOutput()
		}
	})
	if built.err != nil {
		t.Fatalf("build: %v\n%s", built.err, built.out)
	}
	return filepath.Join(built.dir, "ipfence-verify")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// The real binary, as a user runs it: exit status through os.Exit, on a
// corpus file.
func TestBinary(t *testing.T) {
	file := filepath.Join(testenv.Corpus(t), "knossos", "cas-register", "bad", "cas-failure.edn")
	bin := binary(t)
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

// runCLIWithin runs the command line and fails the test if it has not
// returned within a minute: what these tests guard against is a hang.
func runCLIWithin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type res struct {
		code           int
		stdout, stderr string
	}
	ch := make(chan res, 1)
	go func() {
		c, o, e := runCLI(args...)
		ch <- res{c, o, e}
	}()
	select {
	case r := <-ch:
		return r.code, r.stdout, r.stderr
	case <-time.After(time.Minute):
		t.Fatalf("ipfence %s did not return within a minute", strings.Join(args, " "))
	}
	return 0, "", ""
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return p
}

// Issue 14: a FIFO whose writer never writes, or that no writer opens,
// ends at --timeout with verdict unknown (exit 2) instead of hanging; a
// FIFO whose writer sends a history is checked like a file.
func TestCheckFIFO(t *testing.T) {
	t.Run("silent writer", func(t *testing.T) {
		fifo := mkfifo(t)
		release := make(chan struct{})
		defer close(release)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			<-release
			w.Close()
		}()
		code, stdout, stderr := runCLIWithin(t, "check", "--timeout", "300ms", fifo)
		want := fifo + ": unknown (cas-register): timed out after 300ms while reading the history, after 0 bytes (on line 1)"
		if code != cli.ExitUnknown || !strings.Contains(stdout, want) {
			t.Fatalf("exit %d, want 2 and %q\nstdout: %s\nstderr: %s", code, want, stdout, stderr)
		}
	})
	t.Run("writer stalls mid-history", func(t *testing.T) {
		fifo := mkfifo(t)
		release := make(chan struct{})
		defer close(release)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.WriteString(validJSONL)
			<-release
			w.Close()
		}()
		code, stdout, _ := runCLIWithin(t, "check", "--json", "--timeout", "300ms", fifo)
		var r map[string]any
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != cli.ExitUnknown {
			t.Fatalf("exit %d: %v: %s", code, err, stdout)
		}
		if r["valid"] != "unknown" || r["reason"] != "timeout" || r["detail"] != fmt.Sprintf("timed out after 300ms while reading the history, after %d bytes (on line 5)", len(validJSONL)) {
			t.Errorf("report %v", r)
		}
	})
	t.Run("no writer", func(t *testing.T) {
		fifo := mkfifo(t)
		code, stdout, stderr := runCLIWithin(t, "check", "--timeout", "200ms", fifo)
		want := fifo + ": unknown (cas-register): timed out after 200ms while opening the history (a FIFO that no writer opened)"
		if code != cli.ExitUnknown || !strings.Contains(stdout, want) {
			t.Fatalf("exit %d, want 2 and %q\nstdout: %s\nstderr: %s", code, want, stdout, stderr)
		}
		// The open that waited was released: the FIFO has no reader left,
		// so a writer that does not wait is refused.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
			t.Errorf("a reader is still waiting on the FIFO")
		}
	})
	t.Run("writer sends a history", func(t *testing.T) {
		fifo := mkfifo(t)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.WriteString(staleJSONL)
			w.Close()
		}()
		code, stdout, stderr := runCLIWithin(t, "check", "--timeout", "1m", fifo)
		if code != cli.ExitInvalid || !strings.Contains(stdout, fifo+": NOT linearizable (cas-register, 2 ops") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
	t.Run("endless line", func(t *testing.T) {
		// A writer that would send a 1 GB line: the reader stops at the
		// default line bound (64MiB with --max-memory 4GiB) and says so.
		fifo := mkfifo(t)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer w.Close()
			buf := bytes.Repeat([]byte("x"), 1<<20)
			for range 1 << 10 {
				if _, err := w.Write(buf); err != nil {
					return // the reader gave up
				}
			}
		}()
		// With the format given (else the first 64KiB, one unfinished
		// line, tell no format, and the check stops there).
		code, stdout, stderr := runCLIWithin(t, "check", "--format", "jsonl", fifo)
		want := fifo + ":1: line 1 is longer than 64MiB, the longest line this reader takes"
		if code != cli.ExitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--max-memory 4GiB bounds the input to 256MiB and each line to 64MiB") {
			t.Fatalf("exit %d, want 3 and %q\nstdout: %s\nstderr: %s", code, want, stdout, stderr)
		}
	})
}

// Issue 14: inputs that used to exhaust memory or hang are refused as bad
// input (exit 3) with what and where.
func TestCheckBoundedInput(t *testing.T) {
	long := write(t, "long.jsonl", `{"type":"invoke","process":0,"f":"read"}`+"\n"+`{"type":"ok","process":0,"f":"read","value":"`+strings.Repeat("y", 20<<10)+`"}`+"\n")
	big := write(t, "big.jsonl", strings.Repeat(validJSONL, 1000))
	truncEDN := write(t, "trunc.edn", "[{:process 0 :type :invoke :f :read :value nil}\n {:process 0 :type :ok :f :read :va")
	truncJSON := write(t, "trunc.json", `[{"process":0,"type":"invoke","f":"read","value":null},`+"\n"+`{"process":0,"type":"ok","f":"re`)
	// Values that grow when parsed: 200 nested lists in 440 bytes, 8,096
	// bytes once parsed, so that the 519th event passes the 4MiB left to
	// the parse under --max-memory 8MiB.
	// (Invokes and completions in turn: the linearizability check reads
	// and pairs as it goes, and would stop at a completion with no invoke
	// before the bound.)
	nestedValue := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	nestedPair := `{"type":"invoke","process":0,"value":` + nestedValue + "}\n" + `{"type":"ok","process":0,"value":` + nestedValue + "}\n"
	nested := write(t, "nested.jsonl", strings.Repeat(nestedPair, 500))
	vector := write(t, "vector.edn", "["+strings.Repeat("{:process 0 :type :invoke :f :read :value nil}\n", 2000)+"]")
	cases := []cliCase{
		{"parsed size", []string{"check", "--max-memory", "8MiB", nested}, 3, nil,
			[]string{nested + ":519: the events up to this line take more than 4MiB once parsed", "--max-memory 8MiB leaves half, 4MiB, to the parsed history"}},
		{"parsed size, a larger bound", []string{"check", "--max-memory", "32MiB", nested}, 3, nil, []string{nested + `: operation invoked at index 0: model cas-register has no operation "" (valid: read, write, cas)`}},
		{"EDN vector too large to parse whole", []string{"check", "--max-memory", "8MiB", "--html", filepath.Join(t.TempDir(), "p.html"), vector}, 3, nil,
			[]string{vector + ":1: the events up to this line take more than 4MiB once parsed"}},
		// Without a page to draw, the events are read one at a time, and
		// the check gets to what is wrong with them.
		{"EDN vector read an event at a time", []string{"check", "--max-memory", "8MiB", vector}, 3, nil,
			[]string{vector + `: event index 1: process 0 invokes "read" while its "read" invoked at index 0 has not completed`}},
		{"/dev/zero", []string{"check", "/dev/zero"}, 3, nil, []string{"/dev/zero: is a character device, not a history file"}},
		{"directory", []string{"check", t.TempDir()}, 3, nil, []string{"is a directory, not a history file"}},
		{"long line", []string{"check", "--max-memory", "1MiB", long}, 3, nil,
			[]string{long + ":2: line 2 is longer than 16KiB, the longest line this reader takes", "--max-memory 1MiB bounds the input to 64KiB and each line to 16KiB"}},
		{"long line fits a larger bound", []string{"check", "--max-memory", "2MiB", long}, 1, []string{"NOT linearizable"}, nil},
		{"large file", []string{"check", "--max-memory", "1MiB", big}, 3, nil,
			[]string{fmt.Sprintf("%s: the file holds %d bytes, more than the 64KiB this reader takes", big, 1000*len(validJSONL))}},
		{"bounds apply to transactional models", []string{"check", "--model", "list-append", "--max-memory", "1MiB", big}, 3, nil,
			[]string{"more than the 64KiB this reader takes"}},
		{"bounds apply to workload checkers", []string{"check", "--model", "bank", "--max-memory", "1MiB", big}, 3, nil,
			[]string{"more than the 64KiB this reader takes"}},
		{"truncated EDN", []string{"check", truncEDN}, 3, nil, []string{truncEDN + ":2:"}},
		{"truncated JSON array", []string{"check", truncJSON}, 3, nil, []string{truncJSON + ":2:", "unexpected end of input"}},
		{"timeout from the first byte", []string{"check", "--timeout", "1ns", big}, 2,
			[]string{big + ": unknown (cas-register): timed out after 1ns while reading the history, after 0 bytes (on line 1)"}, nil},
		{"timeout applies to workload checkers", []string{"check", "--model", "bank", "--timeout", "1ns", big}, 2,
			[]string{big + ": unknown (bank): timed out after 1ns while reading the history"}, nil},
	}
	runCases(t, cases)
}

// queueJSONL is a linearizable fifo-queue history whose search explodes:
// n-1 concurrent enqueues, then one dequeue that returns the value
// enqueued last. Every order of the enqueues is a queue state of its own,
// interned by the model: the search's visited set is the smaller part of
// its memory.
func queueJSONL(n int) string {
	var b strings.Builder
	k, i := n-1, 0
	for p := range k {
		fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"f":"enqueue","value":%d}`+"\n", i, p, p)
		i++
	}
	for p := range k {
		fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"f":"enqueue","value":%d}`+"\n", i, p, p)
		i++
	}
	fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"f":"dequeue","value":null}`+"\n", i, k)
	fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"f":"dequeue","value":%d}`+"\n", i+1, k, k-1)
	return b.String()
}

// Issue 14: --max-memory bounds the model's interned states too. The
// 23-op queue history peaked at 1.8 GB under --max-memory 256MiB; now the
// search stops at the bound with unknown: memory bound (exit 2), and the
// process's peak resident memory stays near the bound.
func TestCheckMemoryBoundCoversModelStates(t *testing.T) {
	q := write(t, "queue.jsonl", queueJSONL(23))
	small := write(t, "small.jsonl", queueJSONL(6))
	runCases(t, []cliCase{
		{"in process", []string{"check", "--model", "fifo-queue", "--max-memory", "32MiB", q}, 2, []string{q + ": unknown (fifo-queue, 23 ops", "): memory bound"}, nil},
		{"a small one is decided", []string{"check", "--model", "fifo-queue", "--max-memory", "32MiB", small}, 0, []string{small + ": linearizable (fifo-queue, 6 ops"}, nil},
	})
	const bound = 64 << 20
	// The process reports its own peak (VmHWM): a child's rusage would
	// count this test process's memory, which the child shares until it
	// execs.
	cmd := exec.Command(binary(t), "check", "--log-level", "debug", "--model", "fifo-queue", "--max-memory", "64MiB", q)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitUnknown || !strings.Contains(string(out), "memory bound") {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`peak_rss=(\d+) max_memory=67108864`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("no peak_rss in the debug log:\n%s", errb.String())
	}
	peak, _ := strconv.ParseInt(m[1], 10, 64)
	t.Logf("peak resident memory %d MiB under --max-memory 64MiB", peak>>20)
	if peak > 3*bound {
		t.Errorf("peak resident memory %d MiB under --max-memory 64MiB", peak>>20)
	}
}
