package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// counting wraps an online checker and counts what it was fed.
type counting struct {
	checker.Online
	feeds, events atomic.Int64
}

func (c *counting) Feed(ctx context.Context, events []history.Event) {
	c.feeds.Add(1)
	c.events.Add(int64(len(events)))
	c.Online.Feed(ctx, events)
}

// waitFor polls cond for up to a minute: the feeder runs every 50 ms, but
// a loaded machine may delay it, and the test must not depend on how much.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// The harness feeds the online checker while the test runs: a register
// that starts answering garbage after its 200th read is caught on a
// prefix (the clients wait for that before finishing), the early failure
// is in the results, and the final verdict is the offline checker's.
func TestOnlineCheckDuringRun(t *testing.T) {
	register, err := model.Lookup("register")
	if err != nil {
		t.Fatal(err)
	}
	o := checker.LinearOptions{Model: register, Semantics: model.Options{Initial: 0}}
	on := &counting{Online: checker.OnlineLinearizable(o)}
	var mu sync.Mutex
	value, reads, ops := 0, 0, 0
	caughtWhileRunning := false
	client := harness.ClientFunc(func(_ context.Context, _ string, op harness.Op) harness.Completion {
		mu.Lock()
		ops++
		n := ops
		mu.Unlock()
		if n == 1500 {
			// Past the first prefix checked (1,024 events): hold the
			// rest of the run until the checker has said so.
			caughtWhileRunning = waitFor(func() bool { return on.Early() != nil })
		}
		mu.Lock()
		defer mu.Unlock()
		if op.F == "write" {
			value = op.Value.(int)
			return harness.OK(op.Value)
		}
		reads++
		if reads > 200 {
			return harness.OK(value + 100) // never written
		}
		return harness.OK(value)
	})
	out, err := harness.Run(t.Context(), harness.Test{
		Name: "online", Concurrency: 1, Client: client, Store: t.TempDir(), Seed: 1,
		Generator: gen.Clients(gen.Limit(2000, gen.Fn(1, func(_ gen.Context, r *gen.Rand) gen.Op {
			if r.IntN(2) == 0 {
				return gen.F("read", nil)
			}
			return gen.F("write", r.IntN(10))
		}))),
		Online: on,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !caughtWhileRunning {
		t.Fatal("the online checker found nothing while the test ran")
	}
	early, _ := out.Results.Fields["early"].(map[string]any)
	if early == nil || early["valid"] != linear.False || !strings.Contains(early["summary"].(string), "no order of the operations gets past") {
		t.Fatalf("early: %v", out.Results.Fields["early"])
	}
	if on.feeds.Load() < 2 || on.events.Load() != int64(len(out.Events)) || len(out.Events) != 4002 {
		t.Fatalf("fed %d events in %d batches; the history has %d", on.events.Load(), on.feeds.Load(), len(out.Events))
	}
	run, err := checker.NewRun("online", out.Events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	offline := checker.Linearizable(o).Check(context.Background(), run)
	if out.Verdict != linear.False || offline.Valid != linear.False || out.Failure() == nil ||
		out.Failure().Op.Index != offline.Failure.Op.Index || out.Failure().Op.Index < 0 {
		t.Fatalf("verdict %v failure %+v; offline %v %+v", out.Verdict, out.Failure(), offline.Valid, offline.Failure)
	}
}

// A transactional test checked online gets the offline result, and its
// history file ends with the end marker, which readers skip.
func TestOnlineTransactionalRun(t *testing.T) {
	var mu sync.Mutex
	lists := map[int64][]history.Value{}
	client := harness.ClientFunc(func(_ context.Context, _ string, op harness.Op) harness.Completion {
		mu.Lock()
		defer mu.Unlock()
		var done []history.Value
		for _, m := range op.Value.([]history.Value) {
			m := m.([]history.Value)
			k := m[1].(int64)
			if m[0] == "append" {
				lists[k] = append(lists[k], m[2])
				done = append(done, m)
				continue
			}
			done = append(done, []history.Value{"r", k, append([]history.Value{}, lists[k]...)})
		}
		return harness.OK(done)
	})
	next := int64(0)
	o := checker.TransactionalOptions{Isolation: isolation.Options{Workload: isolation.ListAppend, Consistency: "strict-serializable"}}
	on := &counting{Online: checker.OnlineTransactional(o)}
	out, err := harness.Run(t.Context(), harness.Test{
		Name: "txn", Concurrency: 3, Client: client, Store: t.TempDir(), Seed: 1,
		Generator: gen.Clients(gen.Limit(600, gen.Fn(1, func(_ gen.Context, r *gen.Rand) gen.Op {
			next++
			k := int64(r.IntN(4))
			return gen.F("txn", []history.Value{[]history.Value{"r", k, nil}, []history.Value{"append", k, next}})
		}))),
		Online: on,
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := checker.NewRun("txn", out.Events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	offline := checker.Transactional(o).Check(context.Background(), run)
	if out.Verdict != linear.True || offline.Valid != linear.True || out.Results.Fields["txns"] != 600 || offline.Fields["txns"] != 600 ||
		on.events.Load() != int64(len(out.Events)) {
		t.Fatalf("online %v %v, offline %v %v; fed %d of %d", out.Verdict, out.Results.Fields["txns"], offline.Valid, offline.Fields["txns"], on.events.Load(), len(out.Events))
	}
	data, err := os.ReadFile(filepath.Join(out.Dir, harness.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(data), "\n"+history.EndMarker+"\n") {
		t.Fatalf("history.jsonl ends %q", data[max(0, len(data)-80):])
	}
	h, err := history.Parse("h", data, history.JSONL)
	if err != nil || len(h.Events) != len(out.Events) {
		t.Fatalf("reading the file back: %v, %d events of %d", err, len(h.Events), len(out.Events))
	}
	var res map[string]any
	b, _ := os.ReadFile(filepath.Join(out.Dir, harness.ResultsFile))
	if err := json.Unmarshal(b, &res); err != nil || res["verdict_after_s"] == nil {
		t.Fatalf("results.json: %v %s", err, b)
	}
}
