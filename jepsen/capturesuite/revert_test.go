package capturesuite

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// The capture test must find the faults of issue 14 by itself: built with
// the fix reverted (a build tag swaps in the behaviour from before it, see
// capture/federation/revert_*.go and capture/plan/revert_*.go), the run
// with the matching nemesis is invalid, its fence naming the stale actions;
// the normal binary on the same seed is valid. Each runs one seed beside
// the fixed binary on it (the two tests at once: four clusters). With the
// fix reverted, in 20 s runs seeds 2, 4, 5 and 6 were invalid for amnesia
// and 1 and 3 were not (the wiped node learned its drain from its peers'
// pushes before its first pass acted), seed 4 in two runs of three, and
// in 45 s runs seed 4 in three of three; seeds 2 and 3 were invalid for
// overflow through the fence (seed 1 only through convergence and the
// hostile checker: its first attack stops every Lamport clock, so nothing
// moves).

// revertedBinary builds the toolkit (whose serve the nodes run) with the
// build tag tag.
func revertedBinary(t *testing.T, tag string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ipfence-"+tag)
	cmd := exec.Command("go", "build", "-tags", tag, "-o", bin, "./cmd/ipfence-verify")
	cmd.Dir = testenv.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tag, err, out)
	}
	return bin
}

// Each run's length: the overflow's in 20 s (two attacks), the amnesia's
// in 45 s (five wipes: a wiped node with the fix reverted seizes the
// addresses only when its first pass in contact with its peers comes
// before their news of its drain, which one 20 s run of seed 4 in three
// missed).
const (
	overflowLimit = 20 * time.Second
	amnesiaLimit  = 45 * time.Second
)

// runKind runs the capture test with one nemesis kind on seed.
func runKind(t *testing.T, bin, kind string, seed uint64, limit time.Duration) (map[string]checker.Result, *harness.Outcome) {
	t.Helper()
	out, err := Run(t.Context(), Options{Binary: bin, Nemesis: []string{kind}, Seed: seed, Store: t.TempDir(), TimeLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return out.Results.Fields["checkers"].(map[string]checker.Result), out
}

func logResults(t *testing.T, out *harness.Outcome) {
	b, _ := json.MarshalIndent(out.Results, "", "  ")
	t.Logf("results:\n%s", b)
	// The run's folder is a temporary one, gone when the test ends: the
	// nodes' decisions go to the log so that a failure in CI can be read
	// (the actions, epochs, staleness and health lines, the last 400).
	logs, _ := filepath.Glob(filepath.Join(out.Dir, "logs", "*.log"))
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var keep []string
		for _, line := range strings.Split(string(data), "\n") {
			for _, k := range []string{"msg=epoch", "action executed", "action fenced", "action refused", "member stale", "member back", "unhealthy", "passive", "synced", "started", "listening"} {
				if strings.Contains(line, k) {
					keep = append(keep, line)
					break
				}
			}
		}
		t.Logf("--- %s (%d of its lines) ---\n%s", filepath.Base(f), len(keep), strings.Join(keep[max(0, len(keep)-400):], "\n"))
	}
}

// started counts the nemesis's starts of kind that completed without error.
func started(out *harness.Outcome, kind string) int {
	n := 0
	for _, e := range out.Events {
		if e.Process == history.Nemesis && e.Type == history.Info && e.F == "start-"+kind && e.Error == nil {
			n++
		}
	}
	return n
}

// staleLine matches a fence finding: "... at epoch E, after epoch H".
var staleLine = regexp.MustCompile(`at epoch (\d+)(?:, which no journal makes \(a wrapped epoch\))?, after epoch (\d+)$`)

// checkStale asserts that the fence found stale actions and that each
// example names an epoch below the one applied before it.
func checkStale(t *testing.T, cs map[string]checker.Result) {
	t.Helper()
	f := cs["fence"]
	n, _ := f.Fields["stale_actions_executed"].(int)
	if f.Valid != linear.False || n < 1 {
		t.Fatalf("fence: %v, %v stale actions", f.Valid, f.Fields["stale_actions_executed"])
	}
	for _, line := range f.Fields["examples"].([]string) {
		m := staleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("fence finding %q names no epochs", line)
		}
		e, _ := strconv.ParseUint(m[1], 10, 64)
		h, _ := strconv.ParseUint(m[2], 10, 64)
		if e >= h {
			t.Fatalf("fence finding %q: epoch %d is not below %d", line, e, h)
		}
	}
	t.Logf("fence: %d stale actions, e.g. %v", n, f.Fields["examples"])
}

// A node that lost its data dir and starts as if synced (the amnesia fix
// reverted) takes its epochs from 1 and seizes addresses applied at higher
// epochs: the wipe nemesis makes the run invalid. With the fix, the same
// seed is valid and the wiped nodes came back passive.
func TestCaptureCatchesAmnesiaReverted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capture test twice")
	}
	t.Parallel()
	bin := revertedBinary(t, "ipfence_revert_amnesia")
	for _, seed := range []uint64{4} {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			cs, out := runKind(t, bin, "wipe", seed, amnesiaLimit)
			if out.Verdict != linear.False {
				logResults(t, out)
				t.Fatalf("reverted amnesia fix, seed %d: %v", seed, out.Verdict)
			}
			checkStale(t, cs)
			if started(out, "wipe") < 1 {
				t.Fatal("no wipe")
			}
		})
	}
	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		cs, out := runKind(t, testenv.Binary(t), "wipe", 4, amnesiaLimit)
		if out.Verdict != linear.True {
			logResults(t, out)
			t.Fatalf("fixed binary, wipe, seed 4: %v", out.Verdict)
		}
		d := cs["damage"].Fields
		if w := d["wipes"].(int); w < 1 || w != started(out, "wipe") {
			t.Fatalf("damage: %v wipes, %d started", d["wipes"], started(out, "wipe"))
		}
	})
}

// With the door's counter bounds off and epochs wrapping at 2^64−1 (the
// overflow fix reverted), the hostile peer's epoch record at 2^64−1 is
// taken and the next holder change goes to epoch 0: the run is invalid
// through the fence and the hostile checker. With the fix, the same seed is
// valid and every forged event was refused and counted in the metrics.
func TestCaptureCatchesOverflowReverted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capture test twice")
	}
	t.Parallel()
	bin := revertedBinary(t, "ipfence_revert_overflow")
	for _, seed := range []uint64{2} {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			cs, out := runKind(t, bin, "hostile", seed, overflowLimit)
			if out.Verdict != linear.False {
				logResults(t, out)
				t.Fatalf("reverted overflow fix, seed %d: %v", seed, out.Verdict)
			}
			checkStale(t, cs)
			h := cs["hostile"]
			if n, _ := h.Fields["forged_accepted"].(int); h.Valid != linear.False || n < 1 {
				t.Fatalf("hostile: %v, %v forged events taken", h.Valid, h.Fields["forged_accepted"])
			}
		})
	}
	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		cs, out := runKind(t, testenv.Binary(t), "hostile", 2, overflowLimit)
		if out.Verdict != linear.True {
			logResults(t, out)
			t.Fatalf("fixed binary, hostile, seed 2: %v", out.Verdict)
		}
		h := cs["hostile"].Fields
		sent, refused := h["forged_sent"].(int), h["forged_refused"].(int)
		counted := h["refused_events_counted_total"].(int)
		if sent < 1 || refused != sent || h["forged_accepted"] != 0 {
			t.Fatalf("hostile: %v", h)
		}
		// Every refused event but the resent request (refused by the
		// signature check, before the door) is in the nodes' counters.
		if counted < 1 || counted > refused {
			t.Fatalf("hostile: %d refused, %d counted in ipfence_federation_refused_events_total", refused, counted)
		}
	})
}

// With the cloud's wall reverted (tag ipfence_revert_cloudwall: the
// drivers keep the epoch record but refuse nothing by it) and the gate
// off, the zombies' actions execute on Azure and OCI as on AWS: the run is
// invalid through the fence, which names the stale actions, and nothing
// was refused. With the wall, the same runs are valid
// (TestCaptureAzureCatchesDisabledFence, TestCaptureOCICatchesDisabledFence).
func TestCaptureCatchesCloudWallReverted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capture test")
	}
	t.Parallel()
	bin := revertedBinary(t, "ipfence_revert_cloudwall")
	for _, cloud := range []string{"azure", "oci"} {
		t.Run(cloud, func(t *testing.T) {
			t.Parallel()
			cs, out := runUnfenced(t, bin, cloud, 1)
			if out.Verdict != linear.False {
				logResults(t, out)
				t.Fatalf("reverted wall, %s, gate off: %v", cloud, out.Verdict)
			}
			checkStale(t, cs)
			if n := cs["fence"].Fields["stale_actions_refused_by_cloud"]; n != 0 {
				t.Fatalf("reverted wall, %s: %v stale actions refused by the cloud, want 0", cloud, n)
			}
		})
	}
}
