package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/isolation"
)

// The transactional models through the command line: the corpus files get
// their published verdicts and exit codes, and flags that do not belong to
// a model are refused by name.
func TestCheckTransactional(t *testing.T) {
	corpus := testenv.Corpus(t)
	c := func(rel string) string { return filepath.Join(corpus, rel) }
	paper := c("elle/paper-example.edn")
	si := c("elle/si-without-g-single.edn")
	rw := c("elle-cli/elle/rw-register.edn")
	// Two transactions, one reading what the other wrote (a single one
	// would be unknown: nothing to check, as Elle says), then a torn line.
	torn := write(t, "torn.jsonl", `{"type":"invoke","process":0,"f":"txn","value":[["append","x",1]]}`+"\n"+
		`{"type":"ok","process":0,"f":"txn","value":[["append","x",1]]}`+"\n"+
		`{"type":"invoke","process":1,"f":"txn","value":[["r","x",null]]}`+"\n"+
		`{"type":"ok","process":1,"f":"txn","value":[["r","x",[1]]]}`+"\n"+`{"type":"invoke","pro`)
	garbled := write(t, "garbled.jsonl", `{"type":"invoke","process":0,"f":"txn","value":[["append","x",1]]}`+"\n"+
		`{"type":"ok","process":0,"f":"txn","value":[["frob","x",1]]}`+"\n")

	cases := []cliCase{
		{"G-single", []string{"check", "--model", "list-append", paper}, 1,
			[]string{paper + ": INVALID (list-append, strict-serializable, 4 transactions): G-single-item, G-single-item-realtime; not consistent-view, repeatable-read"}, nil},
		{"snapshot isolation holds", []string{"check", "--model", "list-append", "--consistency", "snapshot-isolation", si}, 0,
			[]string{si + ": VALID (list-append, snapshot-isolation, 4 transactions)"}, nil},
		{"serializable does not", []string{"check", "--model", "list-append", "--consistency", "serializable", si}, 1,
			[]string{"G2-item; not repeatable-read"}, nil},
		{"garbage read", []string{"check", "--model", "rw-register", rw}, 1, []string{"garbage-read"}, nil},
		{"elle-cli json array", []string{"check", "--model", "list-append", "--consistency", "serializable", c("elle-cli/elle/paper-example.json")}, 1,
			[]string{"G-single-item"}, nil},
		{"torn last line", []string{"check", "--model", "list-append", torn}, 0, []string{"VALID (list-append, strict-serializable, 2 transactions)"},
			[]string{torn + ":5: the last line is cut short (its writer stopped mid-line); checking the 4 events before it"}},
		{"unknown micro-op", []string{"check", "--model", "list-append", garbled}, 3, nil, []string{garbled + `: transaction invoked at index 0: completed micro-operation 0 is ["frob" "x" 1], but ["append" "x" 1] was invoked`}},
		{"unknown consistency", []string{"check", "--model", "list-append", "--consistency", "serial", paper}, 3, nil,
			[]string{`--consistency: unknown consistency model "serial"; valid: causal-cerone, consistent-view,`, "strict-serializable"}},
		{"linearizability flag", []string{"check", "--model", "list-append", "--initial", "0", paper}, 3, nil,
			[]string{"--initial does not apply to --model list-append (it is for linearizability models)"}},
		{"rw-register flag with list-append", []string{"check", "--model", "list-append", "--sequential-keys", paper}, 3, nil,
			[]string{"--sequential-keys does not apply to --model list-append (it is for rw-register)"}},
		{"bank flag", []string{"check", "--model", "rw-register", "--bank-total", "3", rw}, 3, nil,
			[]string{"--bank-total does not apply to --model rw-register (it is for bank and long-fork)"}},
		{"consistency with a linearizability model", []string{"check", "--model", "cas-register", "--consistency", "serializable", paper}, 3, nil,
			[]string{"--consistency does not apply to --model cas-register (it is for list-append and rw-register)"}},
		{"dot with a workload", []string{"check", "--model", "set", "--dot", t.TempDir(), paper}, 3, nil,
			[]string{"--dot does not apply to --model set"}},
		{"one invalid among valid", []string{"check", "--model", "list-append", "--consistency", "snapshot-isolation", si, paper}, 1,
			[]string{si + ": VALID", paper + ": INVALID"}, nil},
		{"bank", []string{"check", "--model", "bank", c("elle-cli/jepsen/bank.edn")}, 0, []string{"bank: valid"}, nil},
		{"Jepsen's set checker", []string{"check", "--model", "set-final", c("elle-cli/jepsen/set.edn")}, 0, []string{"set-final: valid"}, nil},
		{"set is still the linearizability model", []string{"check", "--model", "set", c("elle-cli/jepsen/set.edn")}, 0, []string{"linearizable (set,"}, nil},
		{"negative group size", []string{"check", "--model", "long-fork", "--group-size", "-1", c("elle-cli/jepsen/long-fork.edn")}, 3, nil,
			[]string{"--group-size: -1 is negative"}},
	}
	runCases(t, cases)
}

// --json prints one object per file with the fields other tools read, and
// --dot writes one Graphviz file per cycle.
func TestCheckTransactionalJSONAndDOT(t *testing.T) {
	corpus := testenv.Corpus(t)
	paper := filepath.Join(corpus, "elle/paper-example.edn")
	si := filepath.Join(corpus, "elle/si-without-g-single.edn")
	dots := t.TempDir()
	code, stdout, stderr := runCLI("check", "--model", "list-append", "--consistency", "serializable", "--json", "--dot", dots, paper, si)
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per file, got %d:\n%s", len(lines), stdout)
	}
	type result struct {
		File         string   `json:"file"`
		Model        string   `json:"model"`
		Consistency  string   `json:"consistency"`
		Valid        any      `json:"valid"`
		AnomalyTypes []string `json:"anomaly_types"`
		Not          []string `json:"not"`
		AlsoNot      []string `json:"also_not"`
		Txns         int      `json:"txns"`
		CheckNS      int64    `json:"check_ns"`
	}
	var got [2]result
	for i, line := range lines {
		if err := json.Unmarshal([]byte(line), &got[i]); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		if got[i].Model != "list-append" || got[i].Consistency != "serializable" || got[i].Valid != false || got[i].CheckNS <= 0 {
			t.Errorf("line %d: %+v", i, got[i])
		}
	}
	if got[0].File != paper || !slices.Equal(got[0].AnomalyTypes, []string{"G-single-item"}) ||
		!slices.Equal(got[0].Not, []string{"consistent-view", "repeatable-read"}) || got[0].Txns != 4 ||
		!slices.Contains(got[0].AlsoNot, "serializable") || !slices.Contains(got[0].AlsoNot, "strict-serializable") {
		t.Errorf("paper example: %+v", got[0])
	}
	if got[1].File != si || !slices.Equal(got[1].AnomalyTypes, []string{"G2-item"}) || !slices.Equal(got[1].Not, []string{"repeatable-read"}) {
		t.Errorf("si without G-single: %+v", got[1])
	}
	entries, err := os.ReadDir(dots)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"paper-example-G-single-item-0.dot", "si-without-g-single-G2-item-0.dot"}
	if !slices.Equal(names, want) {
		t.Fatalf("dot files %v, want %v", names, want)
	}
	b, err := os.ReadFile(filepath.Join(dots, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "digraph") || !strings.Contains(string(b), "rw") {
		t.Fatalf("dot file:\n%s", b)
	}
}

// ipfence-verify sim writes histories the checker judges as the simulated
// database's isolation level promises; the same seed gives the same bytes.
func TestSimThenCheck(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "si.jsonl")
	if code, _, stderr := runCLI("sim", "--db", "si", "--ops", "3000", "--keys", "10", "--seed", "2", "--out", out); code != 0 {
		t.Fatalf("sim: exit %d: %s", code, stderr)
	}
	code, again, stderr := runCLI("sim", "--db", "si", "--ops", "3000", "--keys", "10", "--seed", "2")
	first, err := os.ReadFile(out)
	if err != nil || code != 0 {
		t.Fatalf("sim: %v %d %s", err, code, stderr)
	}
	if again != string(first) {
		t.Fatal("the same seed gave different histories")
	}
	if n := strings.Count(again, "\n"); n != 6000 {
		t.Fatalf("%d events, want 6000 (3000 invocations and completions)", n)
	}
	if code, stdout, stderr := runCLI("check", "--model", "list-append", "--consistency", "snapshot-isolation", out); code != 0 {
		t.Fatalf("snapshot isolation: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI("check", "--model", "list-append", "--consistency", "serializable", out)
	if code != 1 || !strings.Contains(stdout, "G2-item") {
		t.Fatalf("serializable: exit %d\n%s%s", code, stdout, stderr)
	}

	bad := []struct {
		args   []string
		stderr string
	}{
		{[]string{"sim"}, "--db is required"},
		{[]string{"sim", "--db", "mysql"}, `--db: "mysql" is not a simulated database; valid: serializable, ssi, si, read-committed, prefix`},
		{[]string{"sim", "--db", "si", "--workload", "queue"}, `--workload: "queue" is not a workload`},
		{[]string{"sim", "--db", "si", "--ops", "-1"}, "--ops: -1 is negative"},
		{[]string{"sim", "--db", "si", "--keys", "0"}, "--keys: 0 is out of range; valid: 1 to"},
		{[]string{"sim", "--db", "si", "--concurrency", "100000"}, "--concurrency: 100000 is out of range; valid: 1 to 65536"},
		{[]string{"sim", "--db", "si", "--info-rate", "1.5"}, "--info-rate: 1.5 is out of range"},
		{[]string{"sim", "--db", "si", "extra"}, `unexpected argument "extra"`},
		{[]string{"sim", "--db", "si", "--out", filepath.Join(dir, "no", "such", "dir", "h.jsonl")}, "no such file or directory"},
	}
	for _, b := range bad {
		code, stdout, stderr := runCLI(b.args...)
		if code != 3 || !strings.Contains(stderr, b.stderr) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and %q", b.args, code, stdout, stderr, b.stderr)
		}
	}
}

// The register workload: a linearizable store's history checks
// linearizable, the stale one's does not, and flags that make no sense
// for registers are refused.
func TestSimRegistersThenCheck(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		db   string
		code int
		word string
	}{{"serializable", 0, "linearizable (independent-cas-register, 4000 ops"}, {"prefix", 1, "NOT linearizable (independent-cas-register, 4000 ops"}} {
		out := filepath.Join(dir, c.db+".jsonl")
		args := []string{"sim", "--workload", "cas-register", "--db", c.db, "--ops", "4000", "--keys", "3", "--info-rate", "0.02", "--seed", "4", "--out", out}
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "\n"); n != 8000 || !strings.Contains(string(data), `"f":"cas","value":[`) {
			t.Fatalf("%s: %d events, want 8000 cas-register events", c.db, n)
		}
		code, stdout, stderr := runCLI("check", "--model", "independent-cas-register", out)
		if code != c.code || !strings.Contains(stdout, c.word) {
			t.Errorf("check of the %s history: exit %d, want %d and %q\n%s%s", c.db, code, c.code, c.word, stdout, stderr)
		}
	}
	for _, b := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"sim", "--workload", "cas-register", "--db", "si"}, "--workload cas-register simulates serializable (linearizable) or prefix (stale reads), not si"},
		{[]string{"sim", "--workload", "cas-register", "--db", "prefix", "--max-txn-length", "2"}, "--max-txn-length: --workload cas-register has no transactions"},
		{[]string{"sim", "--workload", "cas-register", "--db", "serializable", "--keys", "20000000"}, "--keys: 20000000 is out of range"},
	} {
		code, stdout, stderr := runCLI(b.args...)
		if code != 3 || !strings.Contains(stderr, b.stderr) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and %q", b.args, code, stdout, stderr, b.stderr)
		}
	}
}

// Issue 13: a failing transactional check explains each anomaly in words
// on the terminal, as Elle does: the transactions, named by the index of
// the event that completed them (the paper example's T7 was invoked at
// index 6), and each step of the cycle with its reason.
func TestCheckTransactionalExplains(t *testing.T) {
	paper := filepath.Join(testenv.Corpus(t), "elle/paper-example.edn")
	rw := filepath.Join(testenv.Corpus(t), "elle-cli/elle/rw-register.edn")
	runCases(t, []cliCase{
		{"cycle", []string{"check", "--model", "list-append", paper}, 1, []string{
			"\n  G-single-item (1 found):\n    Let:\n      T7: no process, ok, invoked at index 6: [[\"append\" 250 10] [\"r\" 253 [1 3 4]] [\"r\" 255 [2 3 4 5]] [\"append\" 256 3]]\n",
			"      T3: no process, ok, invoked at index 2: [[\"append\" 255 8] [\"r\" 253 [1 3 4]]]\n",
			"    Then:\n      - T7 < T3, because T7 read key 255 as [2 3 4 5], which does not hold 8, appended by T3.\n",
			"      - T3 < T5, because T5 read key 255 as [2 3 4 5 8], which holds 8, appended by T3.\n",
			"      - However, T5 < T7, because T5 completed before T7 was invoked: a cycle.\n",
			"(--json prints every example kept; --dot DIR draws each cycle)",
		}, nil},
		{"no cycle", []string{"check", "--model", "rw-register", rw}, 1, []string{
			"  garbage-read (1 found):\n    Let:\n      T4: process 0, ok, invoked at index 3: [[\"r\" \"x\" 3]]\n    T4 read key \"x\" = 3, but nobody wrote 3",
		}, nil},
	})
	// A valid history prints its one line and nothing more.
	si := filepath.Join(testenv.Corpus(t), "elle/si-without-g-single.edn")
	code, stdout, _ := runCLI("check", "--model", "list-append", "--consistency", "snapshot-isolation", si)
	if code != 0 || strings.Count(stdout, "\n") != 1 {
		t.Errorf("exit %d, want one line:\n%s", code, stdout)
	}
}

// Issue 13: check --help (on stdout) names every consistency model the
// checker knows, from its own table.
func TestCheckHelpNamesConsistencyModels(t *testing.T) {
	code, stdout, _ := runCLI("check", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := strings.Join(strings.Fields(stdout), " ")
	models := isolation.Models()
	if len(models) < 10 {
		t.Fatalf("the isolation package lists %d models", len(models))
	}
	for _, m := range models {
		if !strings.Contains(help, m+",") && !strings.Contains(help, m+" (default") {
			t.Errorf("check --help does not name %q", m)
		}
	}
}
