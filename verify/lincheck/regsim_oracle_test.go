package lincheck

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/regsim"
)

// Simulated single-register histories, with crashed operations and with
// and without planted stale reads, get Porcupine's verdict: an oracle
// written by others for the search and its visited set (whose entries
// keep a window of the linearized bitset), at partition lengths where
// that window matters.
func TestRegsimMatchesPorcupine(t *testing.T) {
	m, err := model.Lookup("independent-cas-register")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[linear.Verdict]int{}
	for seed := uint64(1); seed <= 24; seed++ {
		cfg := regsim.Config{Ops: 800, Keys: 1, InfoRate: 0.02, Seed: seed}
		if seed%2 == 0 {
			cfg.StaleRate = 0.2
		}
		var buf bytes.Buffer
		if _, err := regsim.Write(&buf, cfg); err != nil {
			t.Fatal(err)
		}
		h, err := history.Parse("sim.jsonl", buf.Bytes(), history.JSONL)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Check(context.Background(), "sim.jsonl", h, Options{Model: m})
		if err != nil {
			t.Fatal(err)
		}
		ops, _, err := history.Pair(h.Events)
		if err != nil {
			t.Fatal(err)
		}
		// Unwrap the [key value] tuples: one key.
		for i := range ops {
			ops[i].Input = ops[i].Input.([]history.Value)[1]
			if ops[i].Output != nil {
				ops[i].Output = ops[i].Output.([]history.Value)[1]
			}
		}
		start := time.Now()
		res, _ := porcupine.CheckOperationsVerbose(registerPorcupineModel(absent), regPorcupine(h, ops, false, false), 3*time.Second)
		want := map[porcupine.CheckResult]linear.Verdict{porcupine.Ok: linear.True, porcupine.Illegal: linear.False}[res]
		t.Logf("seed %d: %v %v in %v", seed, res, r.Valid, time.Since(start))
		if res == porcupine.Unknown {
			t.Logf("seed %d: Porcupine timed out; ipfence says %v", seed, r.Valid)
			continue
		}
		if r.Valid != want {
			t.Errorf("seed %d (stale %v): ipfence %v, Porcupine %v", seed, cfg.StaleRate, r.Valid, want)
		}
		seen[want]++
	}
	if seen[linear.True] < 8 || seen[linear.False] < 4 {
		t.Fatalf("verdicts compared: %v", seen)
	}
}
