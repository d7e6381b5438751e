package lincheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

func checkFile(t *testing.T, file, modelName string, initial history.Value) *Report {
	t.Helper()
	h, err := history.ReadFile(file, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Lookup(modelName)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), file, h, Options{Model: m, Initial: initial, HasInitial: initial != nil})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every linearizability history of the shared corpus gets the verdict its
// authors published (corpus README).
func TestKnossosCorpus(t *testing.T) {
	corpus := testenv.Corpus(t)
	cases := []struct {
		glob, model string
		initial     history.Value
		want        linear.Verdict
		count       int
	}{
		{"knossos/cas-register/good/*.edn", "cas-register", int64(0), linear.True, 113},
		{"knossos/cas-register/bad/*.edn", "cas-register", int64(0), linear.False, 7},
		{"knossos/multi-register/good/*.edn", "multi-register", int64(0), linear.True, 1},
		{"knossos/mutex/bad/*.edn", "mutex", nil, linear.False, 1},
		{"elle-cli/knossos/cas-register/good/*", "cas-register", int64(0), linear.True, 2},
		{"elle-cli/knossos/cas-register/bad/*", "cas-register", int64(0), linear.False, 6},
		{"elle-cli/knossos/mutex/bad/*", "mutex", nil, linear.False, 2},
	}
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(corpus, c.glob))
		if len(files) != c.count {
			t.Errorf("%s: %d files, want %d", c.glob, len(files), c.count)
		}
		for _, f := range files {
			r := checkFile(t, f, c.model, c.initial)
			if r.Valid != c.want {
				t.Errorf("%s: %v, want %v (%s)", f, r.Valid, c.want, r.Reason)
			}
			if c.want == linear.False && (r.Failure == nil || r.Failure.Op.Index < 0 && r.Failure.Op.InvokeIndex < 0) {
				t.Errorf("%s: invalid without a failing operation", f)
			}
		}
	}
}

// Where Knossos pins the first operation that cannot be linearized, ipfence
// names the same one.
func TestKnossosFailingOp(t *testing.T) {
	dir := filepath.Join(testenv.Corpus(t), "knossos", "cas-register", "bad")
	cases := []struct {
		file    string
		index   int64
		process history.Process
		op      string
	}{
		{"bad-analysis.edn", 14, 21, "read → 2"},
		{"cas-failure.edn", 491, 70, "read → 0"},
		{"rethink-fail-minimal.edn", 4, 1, "read → 3"},
		{"rethink-fail-smaller.edn", 217, 12, "read → 3"},
		{"immediate-failure.edn", 3, 1, "read → 3"},
	}
	for _, c := range cases {
		r := checkFile(t, filepath.Join(dir, c.file), "cas-register", int64(0))
		f := r.Failure
		if f == nil {
			t.Errorf("%s: no failure", c.file)
			continue
		}
		if f.Op.Index != c.index || f.Op.Process != c.process || f.Op.Op != c.op {
			t.Errorf("%s: failing op index %d process %v %q; want %d, %v, %q", c.file, f.Op.Index, f.Op.Process, f.Op.Op, c.index, c.process, c.op)
		}
	}
	// cas-failure: the only legal linearization up to that read leaves the
	// register at 2 (Knossos's own test says so).
	r := checkFile(t, filepath.Join(dir, "cas-failure.edn"), "cas-register", int64(0))
	if r.Failure.State != "2" || len(r.Failure.Prefix) == 0 || r.Failure.Prefix[len(r.Failure.Prefix)-1].State != "2" {
		t.Errorf("cas-failure ends in state %q", r.Failure.State)
	}
}

// Porcupine's etcd histories: the linearizable ones are exactly those the
// issue lists.
func TestPorcupineEtcd(t *testing.T) {
	sets := etcdDatasets(t)
	if len(sets) != 102 {
		t.Fatalf("%d etcd histories, want 102", len(sets))
	}
	valid := 0
	for i := range sets {
		r, err := Check(context.Background(), sets[i].file, sets[i].hist, Options{Model: sets[i].model})
		if err != nil {
			t.Fatal(err)
		}
		if r.Valid != sets[i].want {
			t.Errorf("%s: %v, want %v", sets[i].name, r.Valid, sets[i].want)
		}
		if r.Valid == linear.True {
			valid++
		}
	}
	if valid != len(etcdValid) {
		t.Errorf("%d valid, want %d", valid, len(etcdValid))
	}
}

func TestPorcupineKV(t *testing.T) {
	for _, d := range kvDatasets(t) {
		r, err := Check(context.Background(), d.file, d.hist, Options{Model: d.model})
		if err != nil {
			t.Fatal(err)
		}
		if r.Valid != d.want {
			t.Errorf("%s: %v, want %v", d.name, r.Valid, d.want)
		}
		if r.Partitions != 10 && !strings.HasPrefix(d.name, "c01") {
			t.Errorf("%s: %d partitions", d.name, r.Partitions)
		}
	}
}

func TestReportJSON(t *testing.T) {
	file := filepath.Join(testenv.Corpus(t), "knossos", "cas-register", "bad", "rethink-fail-minimal.edn")
	r := checkFile(t, file, "cas-register", int64(0))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		File    string `json:"file"`
		Model   string `json:"model"`
		Valid   any    `json:"valid"`
		Ops     int    `json:"ops"`
		CheckNS int64  `json:"check_ns"`
		Failure struct {
			Op struct {
				Process     int64  `json:"process"`
				F           string `json:"f"`
				Index       int64  `json:"index"`
				InvokeIndex int64  `json:"invoke_index"`
				Value       any    `json:"value"`
				Op          string `json:"op"`
			} `json:"op"`
			State  string `json:"state"`
			Reason string `json:"reason"`
			Prefix []struct {
				Op    string `json:"op"`
				State string `json:"state"`
			} `json:"prefix"`
		} `json:"failure"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	f := got.Failure
	if got.File != file || got.Model != "cas-register" || got.Valid != false || got.Ops != 4 || got.CheckNS <= 0 {
		t.Errorf("report %s", b)
	}
	if f.Op.Process != 1 || f.Op.F != "read" || f.Op.Index != 4 || f.Op.InvokeIndex != 2 || f.Op.Value != 3.0 || f.Op.Op != "read → 3" {
		t.Errorf("failing op %+v", f.Op)
	}
	if f.State != "4" || len(f.Prefix) != 2 || f.Prefix[0].Op != "write 0" || f.Prefix[1].Op != "write 4" || f.Prefix[1].State != "4" {
		t.Errorf("prefix %+v ending in %s", f.Prefix, f.State)
	}
	want := "process 1 read → 3 (invoked at index 2, completed at index 4)"
	if s := r.Summary(); !strings.Contains(s, "NOT linearizable (cas-register, 4 ops") || !strings.Contains(s, want) {
		t.Errorf("summary %q", s)
	}
}

// Without partitioning, one state for the whole map: the keyed search must
// reach the same verdicts (c50 is measured by BenchmarkStretchKV).
func TestPorcupineKVUnpartitioned(t *testing.T) {
	for _, d := range kvDatasets(t) {
		if strings.HasPrefix(d.name, "c50") {
			continue
		}
		r, err := Check(context.Background(), d.file, d.hist, Options{Model: d.model, Unpartitioned: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Valid != d.want || r.Partitions != 1 {
			t.Errorf("%s: %v in %d partitions, want %v in 1", d.name, r.Valid, r.Partitions, d.want)
		}
	}
}

// CheckDecoder, which holds operations and never events, answers every
// linearizability history of the corpus exactly as Check does from the
// parsed history: verdict, counts, failing operation, prefix and reason.
func TestCheckDecoderMatchesCheck(t *testing.T) {
	corpus := testenv.Corpus(t)
	cases := []struct {
		glob, model string
		initial     history.Value
	}{
		{"knossos/cas-register/*/*.edn", "cas-register", int64(0)},
		{"knossos/multi-register/*/*.edn", "multi-register", int64(0)},
		{"knossos/mutex/*/*.edn", "mutex", nil},
		{"elle-cli/knossos/cas-register/*/*", "cas-register", int64(0)},
		{"elle-cli/knossos/mutex/*/*", "mutex", nil},
	}
	invalid := 0
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(corpus, c.glob))
		if len(files) == 0 {
			t.Fatalf("%s: no files", c.glob)
		}
		m, err := model.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{Model: m, Initial: c.initial, HasInitial: c.initial != nil}
		for _, f := range files {
			want := checkFile(t, f, c.model, c.initial)
			in, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			d := history.NewDecoder(context.Background(), f, in, "", history.Limits{})
			got, err := CheckDecoder(context.Background(), f, d, opt)
			d.Close()
			in.Close()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got.CheckNS, want.CheckNS = 0, 0
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("%s:\nCheckDecoder %s\nCheck        %s", f, a, b)
			}
			if want.Valid == linear.False {
				invalid++
			}
		}
	}
	if invalid < 10 {
		t.Fatalf("only %d invalid histories compared", invalid)
	}
	// Indexes that are not positions, and a nemesis event among them:
	// the failing read is named by its own index, as Check names it.
	stale := `{"index":1000,"type":"invoke","process":0,"f":"write","value":1}
{"index":1003,"type":"ok","process":0,"f":"write","value":1}
{"index":1006,"type":"info","process":"nemesis","f":"start","value":null}
{"index":1009,"type":"invoke","process":1,"f":"read","value":null}
{"index":1012,"type":"ok","process":1,"f":"read","value":0}
`
	m, _ := model.Lookup("cas-register")
	opt := Options{Model: m, Initial: int64(0), HasInitial: true}
	h, err := history.Parse("stale.jsonl", []byte(stale), "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Check(context.Background(), "stale.jsonl", h, opt)
	if err != nil {
		t.Fatal(err)
	}
	d := history.NewDecoder(context.Background(), "stale.jsonl", strings.NewReader(stale), "", history.Limits{})
	defer d.Close()
	got, err := CheckDecoder(context.Background(), "stale.jsonl", d, opt)
	if err != nil {
		t.Fatal(err)
	}
	got.CheckNS, want.CheckNS = 0, 0
	if got.Failure == nil || got.Failure.Op.Index != 1012 || got.Failure.Op.InvokeIndex != 1009 || got.Summary() != want.Summary() {
		t.Fatalf("CheckDecoder:\n%s\nCheck:\n%s", got.Summary(), want.Summary())
	}
}

// CheckDecoder's bound on the operations it holds stops the check at the
// line where it was passed, with the line named; the search's own bound
// is what the operations leave of MaxMemory.
func TestCheckDecoderBounds(t *testing.T) {
	var lines strings.Builder
	for i := range 200 {
		fmt.Fprintf(&lines, `{"type":"invoke","process":%d,"f":"write","value":%d}`+"\n", i%5, i)
		fmt.Fprintf(&lines, `{"type":"ok","process":%d,"f":"write","value":%d}`+"\n", i%5, i)
	}
	m, _ := model.Lookup("cas-register")
	check := func(opt Options, maxParsed int64) (*Report, error) {
		d := history.NewDecoder(context.Background(), "w.jsonl", strings.NewReader(lines.String()), "", history.Limits{})
		defer d.Close()
		d.LimitParsed(maxParsed)
		opt.Model = m
		return CheckDecoder(context.Background(), "w.jsonl", d, opt)
	}
	r, err := check(Options{}, 0)
	if err != nil || r.Valid != linear.True || r.Ops != 200 {
		t.Fatalf("%+v %v", r, err)
	}
	_, err = check(Options{}, 10_000)
	var le *history.LimitError
	if !errors.As(err, &le) || !le.Parsed || le.Line < 2 || le.Line > 200 ||
		!strings.Contains(err.Error(), fmt.Sprintf("w.jsonl:%d: the events up to this line take more than 10000 bytes once parsed", le.Line)) {
		t.Fatalf("%v", err)
	}
	// Events of about 120 bytes each: 10k bytes hold about 80 of them.
	if le.Line < 70 || le.Line > 95 {
		t.Fatalf("stopped at line %d", le.Line)
	}
	// The operations' memory comes out of the search's bound: the least
	// bound under which Check (whose caller subtracts the parsed events
	// itself) finds the history linearizable leaves CheckDecoder's
	// search too little, and that bound plus the operations' is enough.
	h, err := history.Parse("w.jsonl", []byte(lines.String()), "")
	if err != nil {
		t.Fatal(err)
	}
	var p history.Pairer
	for i, e := range h.Events {
		if err := p.Add(i, e); err != nil {
			t.Fatal(err)
		}
	}
	least := int64(1000)
	for ; least < 1<<30; least += least / 8 {
		if r, err := Check(context.Background(), "w.jsonl", h, Options{Model: m, MaxMemory: least}); err == nil && r.Valid == linear.True {
			break
		}
	}
	for _, c := range []struct {
		max  int64
		want linear.Verdict
	}{{least, linear.Unknown}, {least + p.Bytes, linear.True}} {
		if r, err := check(Options{MaxMemory: c.max}, 0); err != nil || r.Valid != c.want {
			t.Errorf("MaxMemory %d (ops %d bytes): %v %v, want %v", c.max, p.Bytes, r.Valid, err, c.want)
		}
	}
}
