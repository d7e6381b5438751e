package capturesuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/linear"
)

// Each corrupt kind does what its name says to the file.
func TestDamageState(t *testing.T) {
	const size = 64 << 10
	for _, c := range []struct {
		kind, desc string
		want       int64
	}{
		{"truncate-8k", "state.db truncated from 65536 to 8192 bytes", 8 << 10},
		{"truncate-12k", "state.db truncated from 65536 to 12288 bytes", 12 << 10},
		{"truncate-half", "state.db truncated from 65536 to 32768 bytes", 32 << 10},
		{"truncate-0", "state.db truncated from 65536 to 0 bytes", 0},
		{"flip-meta", "14 bytes of both meta pages of state.db flipped", size},
	} {
		path := filepath.Join(t.TempDir(), "state.db")
		orig := make([]byte, size)
		for i := range orig {
			orig[i] = byte(i)
		}
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		desc, err := damageState(path, c.kind)
		if err != nil || desc != c.desc {
			t.Fatalf("%s: %q, %v", c.kind, desc, err)
		}
		got, _ := os.ReadFile(path)
		if int64(len(got)) != c.want {
			t.Fatalf("%s: %d bytes left", c.kind, len(got))
		}
		if c.kind == "flip-meta" {
			page := os.Getpagesize()
			diff := 0
			for i := range got {
				if got[i] != orig[i] {
					diff++
					if i%page < 16 || i%page > 64 || i >= 2*page {
						t.Fatalf("byte %d flipped, outside the meta pages' fields", i)
					}
				}
			}
			if diff != 14 {
				t.Fatalf("%d bytes differ", diff)
			}
		}
	}
	if _, err := damageState(filepath.Join(t.TempDir(), "none"), "truncate-0"); err == nil {
		t.Fatal("a missing file damaged")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	os.WriteFile(path, []byte("x"), 0o600)
	if _, err := damageState(path, "melt"); err == nil || !strings.Contains(err.Error(), `corrupt kind "melt" is not one of`) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// The refusal counters are read from Prometheus's text format by reason.
func TestParseRefused(t *testing.T) {
	text := `# HELP ipfence_federation_refused_events_total Federation events refused at the door, by reason.
# TYPE ipfence_federation_refused_events_total counter
ipfence_federation_refused_events_total{reason="out-of-bounds"} 7
ipfence_federation_refused_events_total{reason="unknown-origin"} 1
ipfence_rejected_requests_total{reason="replayed"} 3
`
	got, err := parseRefused(strings.NewReader(text))
	if err != nil || len(got) != 2 || got["out-of-bounds"] != 7 || got["unknown-origin"] != 1 {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := parseRefused(strings.NewReader(`ipfence_federation_refused_events_total{reason="x"} many` + "\n")); err == nil {
		t.Fatal("a counter that is no number was read")
	}
}

// The disk nemesis (root: a tmpfs per node) fills a node's data folder:
// the node turns unhealthy, its addresses move, the run stays valid, and
// the stop frees the space and restarts it.
func TestCaptureDiskNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 20 s capture test")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to mount a tmpfs as each node's data folder")
	}
	t.Parallel()
	cs, out := runKind(t, testenv.Binary(t), "disk", 1, 20*time.Second)
	if out.Verdict != linear.True {
		logResults(t, out)
		t.Fatalf("disk nemesis, seed 1: %v", out.Verdict)
	}
	d := cs["damage"].Fields
	filled := d["disks_filled"].(int)
	if filled < 1 || filled != started(out, "disk") || d["unhealthy_when_full"] != filled {
		t.Fatalf("damage: %v, %d disk faults started", d, started(out, "disk"))
	}
	for _, f := range d["filled"].([]string) {
		if !strings.Contains(f, "/healthz 503") || !strings.Contains(f, "no space left on device") {
			t.Fatalf("a full disk: %s", f)
		}
	}
}
