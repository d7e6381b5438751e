package regsim_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/regsim"
)

func check(t *testing.T, events []history.Event) *lincheck.Report {
	t.Helper()
	m, err := model.Lookup("independent-cas-register")
	if err != nil {
		t.Fatal(err)
	}
	r, err := lincheck.Check(context.Background(), "sim", &history.History{Format: history.JSONL, Events: events}, lincheck.Options{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every operation takes effect inside its interval, so the checker must
// find each simulated history linearizable, crashed operations and all.
func TestLinearizableByConstruction(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		c := regsim.Config{Ops: 300, Keys: int(seed%3) + 1, Concurrency: int(seed%5) + 2, InfoRate: 0.1, Seed: seed}
		events, st, err := regsim.Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		if st.Events != 600 || len(events) != 600 {
			t.Fatalf("seed %d: %d events (stats %d), want 600", seed, len(events), st.Events)
		}
		if r := check(t, events); r.Valid != linear.True || r.Ops != 300 {
			t.Errorf("seed %d (%+v): %v with %d ops; want linearizable, 300 ops: %s", seed, c, r.Valid, r.Ops, r.Summary())
		}
	}
}

// A read that returns the value a completed write replaced is caught.
func TestStaleReadsAreCaught(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 10; seed++ {
		// Many values: a stale value is then rarely written again by an
		// operation still running, which could explain it.
		c := regsim.Config{Ops: 400, Keys: 2, Values: 1000, StaleRate: 0.2, Seed: seed}
		events, st, err := regsim.Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stale == 0 {
			continue
		}
		if r := check(t, events); r.Valid == linear.False {
			caught++
			if r.Failure == nil || r.Failure.Op.F != "read" {
				t.Errorf("seed %d: failure %+v, want a read", seed, r.Failure)
			}
		}
	}
	if caught < 8 {
		t.Errorf("%d of 10 histories with stale reads found not linearizable, want at least 8", caught)
	}
}

func TestDeterministicAndStreamed(t *testing.T) {
	c := regsim.Config{Ops: 1000, Keys: 4, InfoRate: 0.05, StaleRate: 0.01, Seed: 9}
	var a, b bytes.Buffer
	sa, err := regsim.Write(&a, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regsim.Write(&b, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same config gave different bytes")
	}
	events, sg, err := regsim.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	var c2 bytes.Buffer
	if err := history.WriteAll(&c2, events); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), c2.Bytes()) || sa != sg {
		t.Fatalf("Write and Generate differ: stats %+v and %+v", sa, sg)
	}
	if sa.Events != 2000 || sa.Infos < 25 || sa.Infos > 75 || sa.InfoApplied == 0 || sa.InfoApplied >= sa.Infos {
		t.Errorf("stats %+v: want 2000 events, about 50 infos, some applied", sa)
	}
	// A process whose operation crashed is not reused: its thread goes
	// on as the process ten (the concurrency) above it.
	crashed := map[history.Process]bool{}
	for _, e := range events {
		if crashed[e.Process] {
			t.Fatalf("process %d goes on after its info: %v", e.Process, e)
		}
		if e.Process >= 10 && !crashed[e.Process-10] {
			t.Fatalf("process %d before process %d crashed: %v", e.Process, e.Process-10, e)
		}
		if e.Type == history.Info {
			if e.Error != "timeout" {
				t.Fatalf("info without its error: %v", e)
			}
			crashed[e.Process] = true
		}
	}
	if len(crashed) != sa.Infos {
		t.Errorf("%d processes crashed, want %d", len(crashed), sa.Infos)
	}
}

func TestValidate(t *testing.T) {
	err := regsim.Config{Ops: -1, Keys: -2, InfoRate: 2, StaleRate: -0.5}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Ops is -1", "Keys is -2", "InfoRate is 2", "StaleRate is -0.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, _, err := regsim.Generate(regsim.Config{Concurrency: regsim.MaxConcurrency + 1}); err == nil {
		t.Error("Generate took a concurrency out of range")
	}
}
