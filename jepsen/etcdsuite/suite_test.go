package etcdsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
)

// etcd returns the etcd binary, or skips (fails under CI=true) naming the
// package to install.
func etcd(t *testing.T) string {
	t.Helper()
	bin, err := FindEtcd("")
	if err != nil {
		testenv.Missing(t, "etcd (Debian package etcd-server)")
	}
	return bin
}

// run runs the etcd test and checks what every run must leave behind.
func run(t *testing.T, o Options) (*harness.Outcome, map[string]checker.Result) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real etcd cluster for 30 s")
	}
	o.Binary = etcd(t)
	o.Store = t.TempDir()
	o.Command = []string{"ipfence", "test", "etcd", "--workload", o.Workload}
	out, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	t.Logf("%s: %v, %d ops in %v (%.0f ops/s)", o.Workload, out.Verdict, out.Ops, out.Duration.Round(time.Millisecond), float64(out.Ops)/out.Duration.Seconds())
	for name, r := range cs {
		t.Logf("  %s: %v %v", name, r.Valid, brief(r.Fields))
	}
	for _, f := range []string{"history.jsonl", "results.json", "timeline.html", "latency.png", "rate.png", "etcd.txt", "seed", "command", "logs/n1.log", "logs/n3.log"} {
		if fi, err := os.Stat(filepath.Join(out.Dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The timeline tells the story: the verdict heads it, the nemesis's
	// windows are listed, the clients are named; so does linear.html.
	page, _ := os.ReadFile(filepath.Join(out.Dir, "timeline.html"))
	for _, want := range []string{`"verdict":"` + verdictWord(out.Verdict) + `"`, `"client 0"`, `{"n":"nemesis","v":"`, `{"n":"outcomes","v":"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("timeline.html has no %s", want)
		}
	}
	if lin, err := os.ReadFile(filepath.Join(out.Dir, "linear.html")); err == nil && !strings.Contains(string(lin), `"name":"client 0"`) {
		t.Errorf("linear.html does not name client 0")
	}
	// The members' data lives in the run's folder.
	if _, err := os.Stat(filepath.Join(out.Dir, "data", "n2", "member")); err != nil {
		t.Errorf("member data: %v", err)
	}
	return out, cs
}

// brief renders a checker's fields for the log, without the long failure.
func brief(fields map[string]any) string {
	short := maps.Clone(fields)
	delete(short, "failure")
	b, _ := json.Marshal(short)
	if len(b) > 400 {
		b = append(b[:400], "…"...)
	}
	return string(b)
}

// faultsInjected counts the nemesis starts that took effect, by kind: a
// start's completion carries what it did, as a string, and no error.
func faultsInjected(events []history.Event) map[string]int {
	n := map[string]int{}
	for _, e := range events {
		_, done := e.Value.(string)
		if e.Process == history.Nemesis && strings.HasPrefix(e.F, "start-") && e.Error == nil && done {
			n[strings.TrimPrefix(e.F, "start-")]++
		}
	}
	return n
}

// With etcd's default linearizable reads, the register workload is
// linearizable under partitions, pauses and kills.
func TestRegisterIsLinearizable(t *testing.T) {
	out, cs := run(t, Options{Workload: "register", Nemesis: DefaultNemeses, TimeLimit: 30 * time.Second, Seed: 1})
	if out.Verdict != linear.True {
		t.Fatalf("verdict %v", out.Verdict)
	}
	// Properties of the run, not counts that depend on the machine's
	// speed: every operation invoked was checked, and every key an
	// operation completed on was checked as its own register.
	lin := cs["linear"]
	invoked, okKeys, keys := 0, map[string]bool{}, map[string]bool{}
	for _, e := range out.Events {
		if e.Process < 0 {
			continue
		}
		v, ok := e.Value.([]any)
		if !ok || len(v) == 0 {
			continue
		}
		k := fmt.Sprint(v[0])
		if e.Type == history.Invoke {
			invoked++
			keys[k] = true
		} else if e.Type == history.OK {
			okKeys[k] = true
		}
	}
	if ops := lin.Fields["ops"].(int); ops != invoked || ops == 0 {
		t.Errorf("%d operations checked of %d invoked", ops, invoked)
	}
	if n := lin.Fields["partitions"].(int); n < len(okKeys) || n > len(keys) || len(okKeys) == 0 {
		t.Errorf("%d keys checked; %d had operations, %d completed ones", n, len(keys), len(okKeys))
	}
	if f := faultsInjected(out.Events); f["partition"]+f["pause"]+f["kill"] < 2 {
		t.Errorf("faults injected: %v", f)
	}
	// On loopback too, every pause, resume and kill was confirmed by the
	// pid's state, in the history beside its fault: seed 1 pauses and
	// kills.
	ok, not, details := confirmations(out.Events)
	for _, f := range []string{"pause", "resume", "kill"} {
		if ok[f] == 0 {
			t.Errorf("no %s confirmed on loopback (%v)", f, details)
		}
	}
	if len(not) != 0 || cs["faults"].Valid != linear.True {
		t.Errorf("not confirmed %v; faults checker %v %v", not, cs["faults"].Valid, cs["faults"].Fields)
	}
}

// The list-append workload is strict serializable under the same faults.
func TestListAppendIsStrictSerializable(t *testing.T) {
	out, cs := run(t, Options{Workload: "list-append", Nemesis: DefaultNemeses, TimeLimit: 30 * time.Second, Seed: 2})
	if out.Verdict != linear.True {
		t.Fatalf("verdict %v", out.Verdict)
	}
	tx := cs["transactional"]
	if tx.Fields["consistency"] != "strict-serializable" || len(tx.Fields["anomaly_types"].([]string)) != 0 {
		t.Errorf("transactional: %v", tx.Fields)
	}
	okTxns := 0
	for _, e := range out.Events {
		if e.Process >= 0 && e.Type == history.OK && e.F == "txn" {
			okTxns++
		}
	}
	if n := tx.Fields["txns"].(int); n < okTxns || okTxns == 0 {
		t.Errorf("%d transactions checked, %d completed", n, okTxns)
	}
	// Some transactions committed appends, and some reads saw them.
	var appended, readBack int
	for _, e := range out.Events {
		if e.Type != history.OK || e.F != "txn" {
			continue
		}
		for _, m := range e.Value.([]any) {
			mop := m.([]any)
			switch {
			case mop[0] == "append":
				appended++
			case mop[0] == "r" && len(mop[2].([]history.Value)) > 0:
				readBack++
			}
		}
	}
	if appended == 0 || readBack == 0 {
		t.Errorf("%d appends committed, %d reads saw some: the workload did too little", appended, readBack)
	}
}

// The known-bad case: with serializable reads a member cut off from the
// leader serves what it has, and the linearizability checker must find
// the stale reads of a partitioned run well within 60 s.
func TestSerializableReadsAreCaught(t *testing.T) {
	out, cs := run(t, Options{Workload: "register", SerializableReads: true, Nemesis: []string{"partition"}, TimeLimit: 30 * time.Second, Seed: 3})
	if out.Verdict != linear.False || cs["linear"].Valid != linear.False {
		t.Fatalf("verdict %v, linear %v: the stale reads went unnoticed", out.Verdict, cs["linear"].Valid)
	}
	failure, ok := cs["linear"].Fields["failure"]
	if !ok {
		t.Fatal("no failure reported")
	}
	b, _ := json.Marshal(failure)
	if !strings.Contains(string(b), `"f":"read"`) {
		t.Errorf("the operation no linearization gets past is not a read: %s", b)
	}
}

// Serializable reads in list-append: read-only transactions served by a
// member cut off from the leader see old snapshots. The history stays
// serializable — every anomaly found involves real-time order — and
// strict serializability is refuted.
func TestListAppendSerializableReadsAreCaught(t *testing.T) {
	out, cs := run(t, Options{Workload: "list-append", SerializableReads: true, Nemesis: []string{"partition"}, TimeLimit: 30 * time.Second, Seed: 3})
	types := cs["transactional"].Fields["anomaly_types"].([]string)
	if out.Verdict != linear.False || len(types) == 0 {
		t.Fatalf("verdict %v, anomalies %v: the stale reads went unnoticed", out.Verdict, types)
	}
	for _, typ := range types {
		if !strings.HasSuffix(typ, "-realtime") {
			t.Errorf("anomaly %s does not involve real time: the database did worse than stale reads", typ)
		}
	}
	res, err := isolation.Check(t.Context(), &history.History{Format: history.JSONL, Events: out.Events},
		isolation.Options{Workload: isolation.ListAppend, Consistency: "serializable"})
	if err != nil || res.Valid != linear.True {
		t.Fatalf("checked for serializable: %v %v %v", err, res.Valid, res.AnomalyTypes)
	}
}

// The generators are pure and seeded: the same seed gives the same
// operations; register keys turn over every opsPerKey operations; every
// appended value is unique per key and keys retire after writesPerKey.
func TestGenerators(t *testing.T) {
	draw := func(g gen.Generator, n int) []gen.Op {
		ctx := gen.Context{Free: []int{0}}
		var out []gen.Op
		for range n {
			op, next, st := g.Next(ctx)
			if st != gen.Ready {
				t.Fatalf("status %v", st)
			}
			out = append(out, op)
			g = next
		}
		return out
	}
	regs := draw(&registers{r: gen.NewRand(9)}, 3*opsPerKey)
	again := draw(&registers{r: gen.NewRand(9)}, 3*opsPerKey)
	fs := map[string]int{}
	for i, op := range regs {
		if history.Key(op.Value) != history.Key(again[i].Value) || op.F != again[i].F {
			t.Fatalf("op %d differs between runs of one seed: %v %v", i, op, again[i])
		}
		if k := op.Value.([]any)[0].(int64); k != int64(i/opsPerKey) {
			t.Fatalf("op %d on key %d, want %d", i, k, i/opsPerKey)
		}
		fs[op.F]++
	}
	if fs["read"] < 200 || fs["write"] < 100 || fs["cas"] < 100 {
		t.Errorf("mix %v", fs)
	}
	seen := map[[2]int64]bool{}
	writes := map[int64]int{}
	for _, op := range draw(newAppends(4), 20000) {
		mops := op.Value.([]any)
		if len(mops) < 1 || len(mops) > maxTxnLen {
			t.Fatalf("transaction of %d micro-operations", len(mops))
		}
		for _, m := range mops {
			mop := m.([]any)
			if mop[0] != "append" {
				continue
			}
			kv := [2]int64{mop[1].(int64), mop[2].(int64)}
			if seen[kv] {
				t.Fatalf("value %d appended twice to key %d", kv[1], kv[0])
			}
			seen[kv] = true
			writes[kv[0]]++
		}
	}
	for k, n := range writes {
		if n > writesPerKey {
			t.Fatalf("key %d took %d appends", k, n)
		}
	}
	if len(writes) < 100 {
		t.Errorf("only %d keys used: keys do not retire", len(writes))
	}
}

func TestListEncoding(t *testing.T) {
	for _, l := range [][]int64{nil, {1}, {1, 2, 30, -4}} {
		got, err := decodeList(encodeList(l))
		if err != nil || !slices.Equal(got, l) {
			t.Errorf("%v → %q → %v %v", l, encodeList(l), got, err)
		}
	}
	if _, err := decodeList("1 x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("decodeList(1 x): %v", err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{int64(3), "a transaction is a list"},
		{[]any{[]any{"r", int64(1)}}, "micro-operation 0 is not [f key value]"},
		{[]any{[]any{"w", int64(1), int64(2)}}, "micro-operation 0 is not [r|append key value]"},
		{[]any{[]any{"append", int64(1), "x"}}, "micro-operation 0 appends a non-integer"},
	} {
		if _, err := parseTxn(c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseTxn(%v): %v, want %q", c.v, err, c.want)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Workload: "queue"}, `--workload: "queue" is not one of register, list-append, set`},
		{Options{Workload: "register", Nodes: 12}, "--nodes must be from 1 to 9, not 12"},
		{Options{Workload: "register", TimeLimit: time.Second}, "--time-limit must be at least 10s"},
		{Options{Workload: "register", Rate: -1}, "--rate must be from 1 to 100000"},
		{Options{Workload: "register", Nemesis: []string{"clock"}}, `--nemesis: unknown fault "clock"; valid: partition,pause,kill,leader,member`},
		{Options{Workload: "register", Binary: "/nonexistent/etcd"}, "--etcd-binary /nonexistent/etcd"},
		{Options{Workload: "register", Nodes: 2, Nemesis: []string{"member"}}, "--nemesis member needs at least 3 members, not 2"},
		{Options{Workload: "register", Nodes: 1, Nemesis: []string{"leader"}}, "--nemesis leader needs at least 2 members, not 1"},
	} {
		if err := c.o.defaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The set workload: with linearizable reads no acknowledged element is
// lost or missing from a later read under every nemesis; with serializable
// reads a member cut off from the leader misses elements others saw, and
// set-full reports them stale.
func TestSet(t *testing.T) {
	out, cs := run(t, Options{Workload: "set", Nemesis: DefaultNemeses, TimeLimit: 20 * time.Second, Seed: 4})
	if out.Verdict != linear.True || cs["set"].Fields["stable_count"].(int) == 0 {
		t.Fatalf("verdict %v, set %v", out.Verdict, cs["set"].Fields["summary"])
	}
	out, cs = run(t, Options{Workload: "set", SerializableReads: true, Nemesis: []string{"partition"}, TimeLimit: 30 * time.Second, Seed: 3})
	if out.Verdict != linear.False || cs["set"].Fields["stale_count"].(int) == 0 {
		t.Fatalf("serializable reads: verdict %v, set %v", out.Verdict, cs["set"].Fields["summary"])
	}
}

// The transactional checker's false verdict carries each anomaly's
// explanation as findings, for the terminal.
func TestExplainedTransactional(t *testing.T) {
	dir := t.TempDir()
	anomalies := `{"anomaly_types": ["G-single-item-realtime", "G2-item"], "counts": {"G-single-item-realtime": 4, "G2-item": 1},
	  "anomalies": {"G-single-item-realtime": [{"type": "G-single-item-realtime", "explanation": "T1 read x before T2 appended 3, and T2 completed before T1 began"}],
	                "G2-item": [{"type": "G2-item", "explanation": "T5 did not see T6's append to y, and T6 did not see T5's"}]}}`
	if err := os.WriteFile(filepath.Join(dir, "anomalies.json"), []byte(anomalies), 0o644); err != nil {
		t.Fatal(err)
	}
	verdict := linear.False
	inner := checker.Func(func(context.Context, *checker.Run) checker.Result {
		return checker.Result{Valid: verdict, Fields: map[string]any{"txns": 3}}
	})
	res := explained(inner).Check(context.Background(), &checker.Run{Dir: dir})
	want := []string{
		"G-single-item-realtime: T1 read x before T2 appended 3, and T2 completed before T1 began",
		"G2-item: T5 did not see T6's append to y, and T6 did not see T5's",
	}
	if got, _ := res.Fields["findings"].([]string); !slices.Equal(got, want) || res.Fields["findings_total"] != 5 || res.Fields["txns"] != 3 {
		t.Fatalf("%+v", res.Fields)
	}
	// A valid verdict is left as it is.
	verdict = linear.True
	if res := explained(inner).Check(context.Background(), &checker.Run{Dir: dir}); res.Fields["findings"] != nil {
		t.Fatalf("%+v", res.Fields)
	}
}

// A member that cannot bind its port: the cluster is started again on
// fresh ports, startAttempts times in all, and the error carries what the
// member said.
func TestStartRetriesOnBindFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, harness.LogDir), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "etcd")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'etcd Version: 3.4.23'; exit 0; fi\n" +
		"echo \"listen tcp $6: bind: address already in use\" >&2; exit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := startCluster(t.Context(), fake, dir, 1, "t")
	if err == nil || !strings.Contains(err.Error(), "etcd member n1 exited: listen tcp") || !strings.Contains(err.Error(), "bind: address already in use") {
		t.Fatalf("error %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, harness.LogDir, "n1.log"))
	if n := strings.Count(string(log), "address already in use"); n != startAttempts {
		t.Fatalf("%d attempts, want %d:\n%s", n, startAttempts, log)
	}
}
