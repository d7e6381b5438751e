//go:build linux

package capturesuite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// onpremEtcdEpisodeBound bounds one two-responder episode on the etcd
// line. The new master captures once it has moved the record in etcd; the
// master cut off from etcd's majority stops answering once its session
// has lapsed (at most session_ttl after the last renewal it sent) and its
// next pass has released (reconcile_interval); a second more covers the
// observer's rounds and a loaded machine. On the federation line the same
// episode lasts as long as the partition.
var onpremEtcdEpisodeBound = mustDuration(etcdSessionTTL) + reconcileInterval + time.Second

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// The on-premises capture test with the epoch line in etcd, under the
// partition of seed onpremPartitionSeed, whose first fault isolates the
// master h1 from the other hosts and from every member (on the federation
// line TestCaptureOnPrem sees two responders until the heal): the new
// master captures through etcd, and h1, cut off from etcd, releases; any
// two-responder episode ends within onpremEtcdEpisodeBound. After the run
// etcd holds the address's record, naming the host that answers ARP.
func TestCaptureOnPremEtcdLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 20 s on-premises capture test with etcd")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (network namespaces, proxy-ARP)")
	}
	testenv.Program(t, "keepalived")
	testenv.Program(t, "nft")
	if _, err := exec.LookPath("etcd"); err != nil {
		testenv.Missing(t, "etcd (apt-get install etcd-server)")
	}
	out, err := Run(t.Context(), Options{
		Binary: testenv.Binary(t), Provider: "onprem", Netns: true, Epochs: "etcd", Nemesis: []string{"partition"},
		Seed: onpremPartitionSeed, TimeLimit: 20 * time.Second, Store: t.TempDir(),
		Command: []string{"ipfence", "test", "capture", "--provider", "onprem", "--epochs", "etcd"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	sh := cs["single-holder"]
	t.Logf("verdict %v, %d ops; single holder %v %v; etcd line %v %v", out.Verdict, out.Ops, sh.Valid, sh.Fields, cs["etcd-line"].Valid, cs["etcd-line"].Fields)

	// The nodes were configured for the line, each through three
	// endpoints on its own namespace's loopback.
	cfg, err := os.ReadFile(filepath.Join(out.Dir, "h1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(cfg); !strings.Contains(s, "epoch_line: etcd\n") || !strings.Contains(s, "etcd:\n") ||
		strings.Count(s[strings.Index(s, "etcd:\n"):], "http://127.0.0.1:") != 3 {
		t.Errorf("h1.yaml does not put the pool on etcd through three endpoints:\n%s", cfg)
	}

	// The fault under test happened: h1 cut off from both hosts and from
	// every member.
	targets := []string{"h1", "h2", "h3", "e1", "e2", "e3"}
	cut := false
	for _, e := range out.Events {
		if e.Process == history.Nemesis && e.Type == history.Invoke && e.F == "start-partition" {
			if g, err := nemesis.Grudge(targets, e.Value); err == nil && isolates(g, "h1", targets) {
				cut = true
			}
		}
	}
	if !cut {
		t.Fatalf("seed %d: no partition in the history cut h1 off from the hosts and the members", onpremPartitionSeed)
	}

	// The line is etcd's: a record for the address, at an epoch above
	// zero, naming the host that answered last.
	line, ok := cs["etcd-line"]
	if !ok {
		t.Fatal("no etcd-line checker in the results")
	}
	recs, _ := line.Fields["records"].(map[string]string)
	last, _ := line.Fields["last_responders"].([]string)
	named := false
	for _, r := range recs {
		named = len(last) == 1 && strings.HasPrefix(r, "epoch ") && !strings.HasPrefix(r, "epoch 0 ") &&
			strings.Contains(r, " for "+last[0]+" at revision ")
	}
	if line.Valid != linear.True || len(recs) != 1 || !named {
		t.Errorf("etcd line %v: records %v, last responders %v; want valid, one record naming the one last responder", line.Valid, recs, last)
	}

	// Every two-responder episode is short: the master cut off released.
	eps, _ := sh.Fields["dual_responder_episodes"].([]string)
	for _, ep := range eps {
		d, err := episodeLength(ep)
		if err != nil {
			t.Fatal(err)
		}
		if d > onpremEtcdEpisodeBound {
			t.Errorf("two responders for %v (%s): more than %v (session_ttl %s + reconcile_interval %v + 1 s)", d, ep, onpremEtcdEpisodeBound, etcdSessionTTL, reconcileInterval)
		}
	}
	if dual := sh.Fields["dual_responder_ms"].(int64); time.Duration(dual)*time.Millisecond > time.Duration(max(len(eps), 1))*onpremEtcdEpisodeBound {
		t.Errorf("dual-responder time %d ms over %d episodes", dual, len(eps))
	}
	for _, name := range []string{"convergence", "stats"} {
		if cs[name].Valid != linear.True {
			t.Errorf("%s: %v %v", name, cs[name].Valid, cs[name].Fields)
		}
	}
	for _, f := range []string{"etcd-records.json", "responders.json", "etcd/logs"} {
		if _, err := os.Stat(filepath.Join(out.Dir, f)); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		for _, h := range []string{"h1", "h2"} {
			if b, err := os.ReadFile(filepath.Join(out.Dir, h, "ipfence.log")); err == nil {
				t.Logf("%s/ipfence.log:\n%s", h, tail(string(b), 40))
			}
		}
	}
}

// episodeLength reads the length of a single-holder episode, as
// "h2+h1 from 3.45s to 5.30s".
func episodeLength(ep string) (time.Duration, error) {
	_, span, ok := strings.Cut(ep, " from ")
	from, to, ok2 := strings.Cut(span, " to ")
	if !ok || !ok2 {
		return 0, fmt.Errorf("episode %q: not <hosts> from <start> to <end>", ep)
	}
	a, err := time.ParseDuration(from)
	if err != nil {
		return 0, fmt.Errorf("episode %q: %w", ep, err)
	}
	b, err := time.ParseDuration(to)
	if err != nil {
		return 0, fmt.Errorf("episode %q: %w", ep, err)
	}
	return b - a, nil
}

func TestEpisodeLength(t *testing.T) {
	d, err := episodeLength("h2+h1 from 17.45s to 19.30s")
	if err != nil || d != 1850*time.Millisecond {
		t.Errorf("episodeLength = %v, %v; want 1.85s", d, err)
	}
	if _, err := episodeLength("h2+h1"); err == nil {
		t.Error("episodeLength of no span: no error")
	}
}
