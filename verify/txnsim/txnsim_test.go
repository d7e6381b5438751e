package txnsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
)

func write(t *testing.T, c Config) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := Write(&buf, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * c.Ops; n != want {
		t.Fatalf("Write reports %d events, want %d", n, want)
	}
	return buf.Bytes()
}

func TestDeterministic(t *testing.T) {
	for _, db := range DBs {
		for _, wl := range Workloads {
			c := Config{DB: db, Workload: wl, Ops: 500, InfoRate: 0.05, Seed: 7}
			a, b := write(t, c), write(t, c)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s %s: two runs of one config differ", db, wl)
			}
			c.Seed = 8
			if bytes.Equal(a, write(t, c)) {
				t.Fatalf("%s %s: seeds 7 and 8 give the same history", db, wl)
			}
		}
	}
}

// TestGolden pins the bytes of one run, so that a change of platform, Go
// version or code that changes what a seed produces is seen. Update the
// hash only for a deliberate change, and say so in the commit.
func TestGolden(t *testing.T) {
	out := write(t, Config{DB: "si", Workload: "list-append", Ops: 2000, InfoRate: 0.01, Seed: 42})
	first := string(out[:bytes.IndexByte(out, '\n')+1])
	const wantFirst = `{"index":0,"type":"invoke","process":4,"f":"txn","value":[["r",4,null]],"time":3803}` + "\n"
	if first != wantFirst {
		t.Errorf("first line\n%s\nwant\n%s", first, wantFirst)
	}
	sum := sha256.Sum256(out)
	const wantSum = "77ed7ed169df857b99a39b298da157fe2ba34c7d7ed843223c86507af02bb7ee"
	if got := hex.EncodeToString(sum[:]); got != wantSum {
		t.Errorf("sha256 %s, want %s", got, wantSum)
	}
}

func TestGenerateMatchesWrite(t *testing.T) {
	c := Config{DB: "read-committed", Workload: "rw-register", Ops: 300, InfoRate: 0.1, Seed: 3}
	events, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := history.WriteAll(&buf, events); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), write(t, c)) {
		t.Fatal("Generate and Write give different histories")
	}
}

// TestHistoryShape checks, for every level and workload, what a reader of
// the history relies on: it parses and pairs, indexes and times run in
// order, processes alternate invoke and completion, info processes are not
// reused, micro-ops have the Elle shape, completions agree with invokes.
func TestHistoryShape(t *testing.T) {
	for _, db := range DBs {
		for _, wl := range Workloads {
			c := Config{DB: db, Workload: wl, Ops: 2000, Concurrency: 7, InfoRate: 0.05, Seed: 11}
			t.Run(db+"/"+wl, func(t *testing.T) { checkShape(t, c, write(t, c), true) })
		}
	}
}

// checkShape checks the history c wrote; with varied, it must also hold
// both ok and info completions.
func checkShape(t *testing.T, c Config, data []byte, varied bool) {
	t.Helper()
	h, err := history.Parse("sim.jsonl", data, history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2*c.Ops || len(ops) != c.Ops {
		t.Fatalf("%d events and %d ops, want %d and %d", len(h.Events), len(ops), 2*c.Ops, c.Ops)
	}
	conc := c.withDefaults().Concurrency
	writeF := "w"
	if c.Workload == "list-append" {
		writeF = "append"
	}
	crashed := map[history.Process]bool{}
	open := map[int64]bool{} // threads with an open invoke
	types := map[history.Type]int{}
	for i, e := range h.Events {
		if e.Index != int64(i) || e.F != "txn" {
			t.Fatalf("event %d: index %d f %q", i, e.Index, e.F)
		}
		if i > 0 && e.Time <= h.Events[i-1].Time {
			t.Fatalf("event %d: time %d after %d", i, e.Time, h.Events[i-1].Time)
		}
		if crashed[e.Process] {
			t.Fatalf("event %d: process %d is used after its info completion", i, e.Process)
		}
		// At most Concurrency transactions are open at once, one per
		// thread (process mod Concurrency).
		th := int64(e.Process) % int64(conc)
		if e.Type == history.Invoke {
			if open[th] {
				t.Fatalf("event %d: thread %d invokes twice", i, th)
			}
			open[th] = true
		} else {
			delete(open, th)
		}
		types[e.Type]++
		if e.Type == history.Info {
			crashed[e.Process] = true
		}
	}
	if varied && (types[history.Info] == 0 || types[history.OK] == 0) {
		t.Fatalf("completions %v: want ok and info", types)
	}
	for _, op := range ops {
		in := micros(t, op.Input)
		if len(in) < 1 || len(in) > c.withDefaults().MaxTxnLen {
			t.Fatalf("index %d has %d micro-ops", op.Index, len(in))
		}
		for _, m := range in {
			switch {
			case m.f == "r" && m.v == nil:
			case m.f == writeF:
				if _, ok := m.v.(int64); !ok {
					t.Fatalf("index %d writes %s", op.Index, history.Show(m.v))
				}
			default:
				t.Fatalf("index %d invokes micro-op [%s %d %s]", op.Index, m.f, m.k, history.Show(m.v))
			}
		}
		switch op.Type {
		case history.Fail, history.Info:
			if !history.Equal(op.Output, op.Input) {
				t.Fatalf("index %d %s value %s differs from its invoke %s", op.Index, op.Type, history.Show(op.Output), history.Show(op.Input))
			}
			if _, ok := op.Error.(string); !ok {
				t.Fatalf("index %d %s has error %s", op.Index, op.Type, history.Show(op.Error))
			}
		case history.OK:
			out := micros(t, op.Output)
			for i, m := range out {
				if m.f != in[i].f || m.k != in[i].k {
					t.Fatalf("index %d micro-op %d changed from the invoke", op.Index, i)
				}
				switch {
				case m.f != "r":
					if !history.Equal(m.v, in[i].v) {
						t.Fatalf("index %d micro-op %d changed its written value", op.Index, i)
					}
				case c.Workload == "list-append":
					ints(t, m.v)
				default:
					if _, ok := m.v.(int64); !ok && m.v != nil {
						t.Fatalf("index %d reads register %s", op.Index, history.Show(m.v))
					}
				}
			}
		default:
			t.Fatalf("index %d never completed", op.Index)
		}
	}
}

// TestWorkloadKeys: values written to a key are 1, 2, 3... in invoke
// order, at most MaxWritesPerKey of them; a key that had its last write is
// never used again; fresh keys keep Keys of them active.
func TestWorkloadKeys(t *testing.T) {
	for _, wl := range Workloads {
		c := Config{DB: "si", Workload: wl, Ops: 3000, Keys: 5, MaxWritesPerKey: 6, Seed: 5}
		o := simulate(t, c)
		last := map[int64]int64{}
		retired := map[int64]bool{}
		reads, writes, mixed := 0, 0, 0
		for _, op := range o.ops {
			nr, nw := 0, 0
			for _, m := range micros(t, op.Input) {
				if retired[m.k] {
					t.Fatalf("%s: index %d uses key %d after it retired", wl, op.Index, m.k)
				}
				if m.f == "r" {
					nr++
					continue
				}
				nw++
				v := m.v.(int64)
				if v != last[m.k]+1 {
					t.Fatalf("%s: index %d writes %d to key %d after %d", wl, op.Index, v, m.k, last[m.k])
				}
				last[m.k] = v
				if v == 6 {
					retired[m.k] = true
				}
			}
			switch {
			case nw == 0:
				reads++
			case nr == 0:
				writes++
			default:
				mixed++
			}
		}
		if len(retired) < 50 {
			t.Fatalf("%s: only %d keys retired", wl, len(retired))
		}
		if live := len(last) - len(retired); live > 5 {
			t.Fatalf("%s: %d keys written and not retired, want at most 5 active", wl, live)
		}
		if reads == 0 || writes == 0 || mixed == 0 {
			t.Fatalf("%s: %d read-only, %d write-only, %d mixed transactions; want all", wl, reads, writes, mixed)
		}
	}
}

// TestReadsArePrefixes: in list-append every read of a key is a prefix of
// the key's final list, at every level, and no element repeats.
func TestReadsArePrefixes(t *testing.T) {
	for _, db := range DBs {
		o := simulate(t, Config{DB: db, Workload: "list-append", Ops: 3000, Keys: 4, Concurrency: 12, MaxTxnLen: 6, InfoRate: 0.05, Seed: 9})
		longest := map[int64][]int64{}
		var all [][2]any
		for _, op := range o.ops {
			if op.Type != history.OK {
				continue
			}
			for _, m := range micros(t, op.Output) {
				if m.f != "r" {
					continue
				}
				l := ints(t, m.v)
				all = append(all, [2]any{m.k, l})
				if len(l) > len(longest[m.k]) {
					longest[m.k] = l
				}
			}
		}
		nonEmpty := 0
		for _, r := range all {
			k, l := r[0].(int64), r[1].([]int64)
			if !slices.Equal(l, longest[k][:len(l)]) {
				t.Fatalf("%s: read %v of key %d is not a prefix of %v", db, l, k, longest[k])
			}
			if len(l) > 0 {
				nonEmpty++
			}
		}
		for k, l := range longest {
			sorted := slices.Clone(l)
			slices.Sort(sorted)
			if len(slices.Compact(sorted)) != len(l) {
				t.Fatalf("%s: key %d read as %v repeats an element", db, k, l)
			}
		}
		if nonEmpty < len(all)/2 {
			t.Fatalf("%s: only %d of %d reads are non-empty", db, nonEmpty, len(all))
		}
	}
}

// TestInfoCommitsSometimes: an info transaction may have committed, and
// when it did a later read sees it; some info transactions did not.
func TestInfoCommitsSometimes(t *testing.T) {
	for _, db := range DBs {
		o := simulate(t, Config{DB: db, Workload: "list-append", Ops: 3000, InfoRate: 0.1, Seed: 2})
		infoAppends := map[[2]int64]bool{}
		lost := 0
		for _, op := range o.ops {
			if op.Type != history.Info {
				continue
			}
			if !o.tr.ops[op.Index].committed {
				lost++
			}
			for _, m := range micros(t, op.Input) {
				if m.f == "append" {
					infoAppends[[2]int64{m.k, m.v.(int64)}] = true
				}
			}
		}
		seen := 0
		for _, op := range o.ops {
			if op.Type != history.OK {
				continue
			}
			for _, m := range micros(t, op.Output) {
				if m.f == "r" {
					for _, e := range ints(t, m.v) {
						if infoAppends[[2]int64{m.k, e}] {
							seen++
						}
					}
				}
			}
		}
		if lost == 0 || seen == 0 {
			t.Fatalf("%s: %d info transactions did not commit, %d reads saw info appends; want both", db, lost, seen)
		}
	}
}

func TestZeroOps(t *testing.T) {
	var buf bytes.Buffer
	n, err := Write(&buf, Config{DB: "ssi", Workload: "rw-register"})
	if n != 0 || err != nil || buf.Len() != 0 {
		t.Fatalf("Write of 0 ops: %d events, %v, %d bytes", n, err, buf.Len())
	}
}

func TestValidate(t *testing.T) {
	ok := Config{DB: "si", Workload: "list-append", Ops: 10}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.DB = "postgres" }, `txnsim: DB "postgres" is not a simulated database; valid: serializable, ssi, si, read-committed, prefix`},
		{func(c *Config) { c.DB = "" }, `DB "" is not`},
		{func(c *Config) { c.Workload = "bank" }, `txnsim: Workload "bank" is not a workload; valid: list-append, rw-register`},
		{func(c *Config) { c.Ops = -1 }, "txnsim: Ops is -1; valid: 0 or more"},
		{func(c *Config) { c.Concurrency = -2 }, "txnsim: Concurrency is -2; valid: 1 to 65536, or 0 for the default 10"},
		{func(c *Config) { c.Keys = MaxKeys + 1 }, "txnsim: Keys is 1048577; valid: 1 to 1048576, or 0 for the default 10"},
		{func(c *Config) { c.MaxTxnLen = -1 }, "MaxTxnLen is -1; valid: 1 to 1024, or 0 for the default 4"},
		{func(c *Config) { c.MaxWritesPerKey = -1 }, "MaxWritesPerKey is -1; valid: 1 to 1048576, or 0 for the default 32"},
		{func(c *Config) { c.InfoRate = 1.5 }, "txnsim: InfoRate is 1.5; valid: 0 to 1"},
	} {
		c := ok
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", c, err, tc.want)
		}
		if _, gerr := Generate(c); gerr == nil || gerr.Error() != err.Error() {
			t.Errorf("Generate(%+v): error %v, want %v", c, gerr, err)
		}
		if _, werr := Write(&bytes.Buffer{}, c); werr == nil || werr.Error() != err.Error() {
			t.Errorf("Write(%+v): error %v, want %v", c, werr, err)
		}
	}
	// Every bad field is reported at once.
	err := Config{DB: "x", Workload: "y", Ops: -1}.Validate()
	if err == nil || strings.Count(err.Error(), "txnsim:") != 3 {
		t.Fatalf("three bad fields: %v", err)
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	_, err := Write(&failWriter{after: 100 << 10}, Config{DB: "si", Workload: "list-append", Ops: 5000, Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error %v, want disk full", err)
	}
}
