package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The latest links point only at runs whose results are written: a run
// that never finished (its cluster did not start, it was killed) leaves
// them at the last complete run.
func TestLatestPointsOnlyAtCompleteRuns(t *testing.T) {
	store := t.TempDir()
	done, err := NewRunDir(store, "capture", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(store, "latest")); !os.IsNotExist(err) {
		t.Fatalf("store/latest before any run completed: %v", err)
	}
	if err := writeJSON(done, ResultsFile, map[string]bool{"valid": true}); err != nil {
		t.Fatal(err)
	}
	broken, err := NewRunDir(store, "capture", time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{filepath.Join(store, "latest"), filepath.Join(store, "capture", "latest")} {
		if got, err := filepath.EvalSymlinks(l); err != nil || got != done {
			t.Fatalf("%s → %s (%v), want the complete run %s, not %s", l, got, err, done, broken)
		}
	}
	// Other files written into the new run do not publish it; its
	// results do.
	if err := writeJSON(broken, "other.json", 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(filepath.Join(store, "latest")); got != done {
		t.Fatalf("store/latest → %s after other.json, want %s", got, done)
	}
	if err := writeJSON(broken, ResultsFile, map[string]bool{"valid": false}); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(filepath.Join(store, "capture", "latest")); got != broken {
		t.Fatalf("store/capture/latest → %s, want %s", got, broken)
	}
	// A folder the harness did not make is never linked.
	other := t.TempDir()
	if err := writeJSON(other, ResultsFile, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(filepath.Join(store, "latest")); got != broken {
		t.Fatalf("store/latest → %s after a foreign folder's results, want %s", got, broken)
	}
}
