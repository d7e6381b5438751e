package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// sameResult fails unless the two results say the same: verdict, every
// field but the time taken, and the failure with every anomaly and
// operation it names.
func sameResult(t *testing.T, what string, online, offline Result) {
	t.Helper()
	strip := func(r Result) string {
		f := maps.Clone(r.Fields)
		delete(f, "check_ms")
		b, err := json.Marshal(struct {
			Valid   linear.Verdict
			Fields  map[string]any
			Failure *Failure
		}{r.Valid, f, r.Failure})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if a, b := strip(online), strip(offline); a != b {
		t.Fatalf("%s: online and offline differ:\nonline  %.2000s\noffline %.2000s", what, a, b)
	}
}

func run(t *testing.T, events []history.Event) *Run {
	t.Helper()
	r, err := NewRun("t", events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The transactional checker fed in pieces gives the offline verdict and
// anomalies exactly, on the corpus's transactional histories and on
// simulated databases of every kind, valid and invalid.
func TestOnlineTransactionalMatchesOffline(t *testing.T) {
	corpus := testenv.Corpus(t)
	type tcase struct {
		name   string
		events []history.Event
		o      isolation.Options
	}
	var cases []tcase
	for _, f := range []string{"elle/si-without-g-single.edn", "elle/paper-example.edn", "elle-cli/elle/paper-example.edn",
		"elle-cli/elle/paper-example.json", "elle-cli/elle/list-append-gh-30.edn", "elle-cli/elle/rw-register.edn", "elle-cli/elle/rw-register.json"} {
		h, err := history.ReadFile(filepath.Join(corpus, f), "")
		if err != nil {
			t.Fatal(err)
		}
		w := isolation.ListAppend
		if filepath.Base(f)[:2] == "rw" {
			w = isolation.RWRegister
		}
		for _, c := range []string{"read-committed", "snapshot-isolation", "serializable", "strict-serializable"} {
			cases = append(cases, tcase{f + "/" + c, h.Events, isolation.Options{Workload: w, Consistency: c}})
		}
	}
	for _, db := range txnsim.DBs {
		for _, w := range []string{isolation.ListAppend, isolation.RWRegister} {
			for seed := range uint64(2) {
				events, err := txnsim.Generate(txnsim.Config{DB: db, Workload: w, Ops: 1500, Concurrency: 10, Keys: 8, InfoRate: 0.02, Seed: seed + 1})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []string{"snapshot-isolation", "strict-serializable"} {
					cases = append(cases, tcase{fmt.Sprintf("sim %s %s %d/%s", db, w, seed+1, c), events, isolation.Options{Workload: w, Consistency: c}})
				}
			}
		}
	}
	// Histories the checker refuses: both forms give the same error.
	for i, bad := range [][]history.Event{
		{{Index: 0, Process: 0, Type: history.OK, F: "txn", Value: []history.Value{}}},
		{{Index: 0, Process: 0, Type: history.Invoke, F: "txn", Value: []history.Value{[]history.Value{"w", "x", int64(1)}}}},
	} {
		cases = append(cases, tcase{fmt.Sprintf("refused %d", i), bad, isolation.Options{Workload: isolation.ListAppend}})
	}
	ctx := context.Background()
	count := map[linear.Verdict]int{}
	for _, c := range cases {
		// Some of Elle's histories name no processes, which Pair (so
		// NewRun) refuses and the transactional checker numbers itself.
		r := &Run{Events: c.events}
		o := TransactionalOptions{Isolation: c.o}
		offline := Transactional(o).Check(ctx, r)
		for _, batch := range []int{1, 37} {
			online := FeedAll(ctx, OnlineTransactional(o), r, batch)
			sameResult(t, fmt.Sprintf("%s, batches of %d", c.name, batch), online, offline)
		}
		count[offline.Valid]++
	}
	// 7 corpus files × 4 models and 5 databases × 2 workloads × 2 seeds ×
	// 2 models, as the offline checker judges them, and 2 refused.
	if len(cases) != 70 || count[linear.True] != 32 || count[linear.False] != 36 || count[linear.Unknown] != 2 {
		t.Fatalf("%d cases: %d valid, %d invalid, %d unknown", len(cases), count[linear.True], count[linear.False], count[linear.Unknown])
	}
}

// The online linearizability checker's final answer is the offline one on
// every Knossos history, and a prefix it finds not linearizable belongs
// only to a history that is not.
func TestOnlineLinearizableMatchesOffline(t *testing.T) {
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
	}
	ctx := context.Background()
	early := 0
	for _, c := range cases {
		files, _ := filepath.Glob(filepath.Join(corpus, c.glob))
		if len(files) != c.count {
			t.Fatalf("%s: %d files, want %d", c.glob, len(files), c.count)
		}
		m, err := model.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			h, err := history.ReadFile(f, "")
			if err != nil {
				t.Fatal(err)
			}
			sem := model.OptionsFor(history.EDN)
			if c.initial != nil {
				sem.Initial = c.initial
			}
			o := LinearOptions{Model: m, Semantics: sem}
			r := run(t, h.Events)
			offline := Linearizable(o).Check(ctx, r)
			if offline.Valid != c.want {
				t.Fatalf("%s: offline %v, want %v", f, offline.Valid, c.want)
			}
			on := OnlineLinearizable(o)
			online := FeedAll(ctx, on, r, 5)
			sameResult(t, f, online, offline)
			if e := on.Early(); e != nil {
				if e.Valid != linear.False || offline.Valid != linear.False || e.Failure == nil {
					t.Fatalf("%s: early %v (%+v) on a history that is %v", f, e.Valid, e.Failure, offline.Valid)
				}
				early++
				t.Logf("%s: caught on a prefix: %s", f, e.Failure.Summary)
			}
		}
	}
	// mongodb-v0-ack-rollback-6 (1,493 events) is caught on its first
	// 1,025; the other bad histories are shorter than the first prefix
	// checked (1,024 events), and no good one may be caught.
	if early != 1 {
		t.Fatalf("%d histories caught on a prefix, want 1", early)
	}
}

// ComposeOnline feeds every checker, reports the first early failure by
// name, and combines the final verdicts as Compose does; a checker that
// panics in Feed is unknown, the others still judge.
func TestComposeOnline(t *testing.T) {
	events, err := txnsim.Generate(txnsim.Config{DB: "si", Workload: isolation.ListAppend, Ops: 500, Concurrency: 5, Keys: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, events)
	fed := 0
	counter := Func(func(_ context.Context, r *Run) Result {
		return Result{Valid: linear.True, Fields: map[string]any{"events": len(r.Events)}}
	})
	c := ComposeOnline(map[string]Online{
		"si":    OnlineTransactional(TransactionalOptions{Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "snapshot-isolation"}}),
		"ser":   OnlineTransactional(TransactionalOptions{Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "serializable"}}),
		"stats": Offline(counter),
		"bad":   feedPanics{&fed},
	})
	res := FeedAll(context.Background(), c, r, 100)
	if res.Valid != linear.False || res.Checkers["si"].Valid != linear.True || res.Checkers["ser"].Valid != linear.False ||
		res.Checkers["stats"].Fields["events"] != 1000 || res.Checkers["bad"].Valid != linear.Unknown || fed != 1 {
		t.Fatalf("composed: %v; si %v ser %v stats %v bad %v (%s); fed %d", res.Valid, res.Checkers["si"].Valid, res.Checkers["ser"].Valid,
			res.Checkers["stats"].Fields, res.Checkers["bad"].Valid, res.Checkers["bad"].Panic, fed)
	}
}

// feedPanics is an online checker whose Feed panics.
type feedPanics struct{ fed *int }

func (f feedPanics) Feed(context.Context, []history.Event) { *f.fed++; panic("boom") }
func (feedPanics) Early() *Result                          { return nil }
func (feedPanics) Result(context.Context, *Run) Result     { return Result{Valid: linear.True} }
