package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// followWhileWriting runs check --follow on a file that is written in two
// steps: the first half (cut mid-line) before the check starts, the rest
// and the end marker once the check has read some of it.
func followWhileWriting(t *testing.T, data []byte, args ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.jsonl")
	half := len(data)/2 + 3 // inside a line
	if err := os.WriteFile(path, data[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code           int
		stdout, stderr string
	}
	done := make(chan answer, 1)
	go func() {
		code, stdout, stderr := runCLI(append(append([]string{"check", "--follow"}, args...), path)...)
		done <- answer{code, stdout, stderr}
	}()
	// The check may not have opened the file yet (a loaded machine):
	// appending is safe whenever it does.
	time.Sleep(20 * time.Millisecond)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(data[half:len(data):len(data)], history.EndMarker+"\n"...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	select {
	case a := <-done:
		return a.code, strings.ReplaceAll(a.stdout, path, "FILE"), a.stderr
	case <-time.After(2 * time.Minute):
		t.Fatal("check --follow did not end at the end marker")
	}
	return 0, "", ""
}

// check --follow gives, for a file still being written, the answer a
// check of the finished file gives: the same line of text, the same JSON
// (time aside) and the same exit code, valid and invalid, transactional
// and linearizability.
func TestCheckFollowMatchesCheck(t *testing.T) {
	var si bytes.Buffer
	if _, err := txnsim.Write(&si, txnsim.Config{DB: "si", Workload: "list-append", Ops: 3000, Concurrency: 10, Keys: 10, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	// A Knossos history that is not linearizable, as JSON Lines.
	h, err := history.ReadFile(filepath.Join(testenv.Corpus(t), "knossos/cas-register/bad/cas-failure.edn"), "")
	if err != nil {
		t.Fatal(err)
	}
	var cas bytes.Buffer
	if err := history.WriteAll(&cas, h.Events); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		args []string
		code int
	}{
		{"si valid", si.Bytes(), []string{"--model", "list-append", "--consistency", "snapshot-isolation"}, cli.ExitValid},
		{"si not serializable", si.Bytes(), []string{"--model", "list-append", "--consistency", "serializable"}, cli.ExitInvalid},
		{"cas-failure", cas.Bytes(), []string{"--model", "cas-register", "--initial", "0"}, cli.ExitInvalid},
	}
	for _, c := range cases {
		for _, asJSON := range []bool{false, true} {
			args := c.args
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			finished := write(t, "h.jsonl", string(c.data))
			wantCode, want, _ := runCLI(append(append([]string{"check"}, args...), finished)...)
			want = strings.ReplaceAll(want, finished, "FILE")
			code, got, stderr := followWhileWriting(t, c.data, args...)
			if asJSON {
				got, want = withoutTimes(t, got), withoutTimes(t, want)
			} else {
				// The linearizability line gives the time the check took.
				got, want = cutTime(got), cutTime(want)
			}
			if code != c.code || wantCode != c.code || got != want || strings.Contains(stderr, "warning") {
				t.Fatalf("%s json=%v: --follow exit %d:\n%s\n%s\nplain check exit %d (want %d):\n%s", c.name, asJSON, code, got, stderr, wantCode, c.code, want)
			}
		}
	}
}

func withoutTimes(t *testing.T, s string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	delete(m, "check_ns")
	b, _ := json.Marshal(m)
	return string(b)
}

// cutTime drops the duration from "FILE: VERDICT (model, N ops, 1.2ms)".
func cutTime(s string) string {
	if i := strings.Index(s, " ops, "); i >= 0 {
		if j := strings.Index(s[i:], ")"); j >= 0 {
			return s[:i] + s[i+j:]
		}
	}
	return s
}

// A malformed line ends --follow with exit 3 and an error naming the
// line and what is wrong; a file with no end marker is checked once it
// has been idle, with a warning, its torn last line left out.
func TestCheckFollowErrors(t *testing.T) {
	good := `{"index":0,"type":"invoke","process":0,"f":"txn","value":[["append","x",1]]}` + "\n" +
		`{"index":1,"type":"ok","process":0,"f":"txn","value":[["append","x",1]]}` + "\n" +
		`{"index":2,"type":"invoke","process":1,"f":"txn","value":[["r","x",null]]}` + "\n" +
		`{"index":3,"type":"ok","process":1,"f":"txn","value":[["r","x",[1]]]}` + "\n"
	bad := write(t, "bad.jsonl", good+`{"index":4,"type":"invoke","process":2,"f":"txn","value":[["r","x"`+"\n")
	code, _, stderr := runCLI("check", "--follow", "--idle", "10s", "--model", "list-append", bad)
	if code != cli.ExitError || !strings.Contains(stderr, bad+":5:") || !strings.Contains(stderr, "ipfence-verify check: ") {
		t.Fatalf("malformed line: exit %d, %q", code, stderr)
	}
	torn := write(t, "torn.jsonl", good+`{"index":4,"type":"inv`)
	code, stdout, stderr := runCLI("check", "--follow", "--idle", "50ms", "--model", "list-append", torn)
	if code != cli.ExitValid || !strings.Contains(stdout, "VALID (list-append, strict-serializable, 2 transactions)") ||
		!strings.Contains(stderr, "no end marker") || !strings.Contains(stderr, "torn.jsonl:5: the last line is cut short") {
		t.Fatalf("idle end: exit %d, %q, %q", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"check", "--follow", "--model", "list-append", torn, torn},
		{"check", "--idle", "1s", "--model", "list-append", torn},
		{"check", "--follow", "--format", "edn", "--model", "list-append", torn},
		{"check", "--follow", "--model", "bank", torn},
	} {
		if code, _, stderr := runCLI(args...); code != cli.ExitError || stderr == "" {
			t.Fatalf("%v: exit %d, %q", args, code, stderr)
		}
	}
}
