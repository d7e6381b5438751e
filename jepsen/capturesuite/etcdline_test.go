package capturesuite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// etcdLineLimit is the etcd line's run: long enough for about five
// faults, of which seed 1 draws some among the members.
const etcdLineLimit = 40 * time.Second

// The capture test with the epoch line in a real 3-member etcd (--epochs
// etcd), every nemesis this user may run, the partitions, pauses and kills
// drawing members as well as nodes: valid; no stale action of any kind,
// not even a former holder's forwarding clean-up; and after the run etcd
// holds each address for the node the provider has it on, at an epoch no
// lower than any the provider applied; every call a node made carried, as
// its token, the etcd revision at which etcd wrote the record it acted at.
func TestCaptureEtcdLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capture test")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		testenv.Missing(t, "etcd (apt-get install etcd-server)")
	}
	t.Parallel()
	out, err := Run(t.Context(), Options{Binary: testenv.Binary(t), Epochs: "etcd", Nemesis: Available(), Seed: 1,
		Store: t.TempDir(), TimeLimit: etcdLineLimit})
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	for name, r := range cs {
		if r.Valid != linear.True {
			logResults(t, out)
			t.Fatalf("checker %s: %v %v", name, r.Valid, r.Fields)
		}
	}
	f := cs["fence"].Fields
	if f["stale_actions_executed"] != 0 || f["stale_forwarding_on_former_holders"] != 0 {
		t.Errorf("stale actions executed %v, stale forwarding on former holders %v; want 0 and 0", f["stale_actions_executed"], f["stale_forwarding_on_former_holders"])
	}
	line, ok := cs["etcd-line"]
	if !ok {
		t.Fatal("no etcd-line checker in the results")
	}
	if recs := line.Fields["records"].(map[string]string); len(recs) != 4 {
		t.Errorf("etcd holds %d records, want one per address (4): %v", len(recs), recs)
	}
	// Every call a node made carried the revision of the record it
	// confirmed in etcd, and each was read back from etcd.
	tok, ok := cs["line-token"]
	if !ok {
		t.Fatal("no line-token checker in the results")
	}
	if n, _ := tok.Fields["node_mutations"].(int); n == 0 || tok.Fields["tokened"] != n || tok.Fields["checked"] != n || tok.Fields["mismatches"] != 0 || tok.Fields["regressions"] != 0 {
		t.Errorf("line tokens: %v node mutations, %v carried a revision, %v checked against etcd, %v mismatches, %v going down; want all of >0 carried and checked, none wrong",
			tok.Fields["node_mutations"], tok.Fields["tokened"], tok.Fields["checked"], tok.Fields["mismatches"], tok.Fields["regressions"])
	}
	// The nodes were configured for the line, each through its own
	// proxies to the three members.
	cfg, err := os.ReadFile(filepath.Join(out.Dir, "n1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(cfg); !strings.Contains(s, "epoch_line: etcd\n") || strings.Count(s[strings.Index(s, "etcd:\n"):], "http://127.0.0.1:") != 3 {
		t.Errorf("n1.yaml does not put the pool on etcd through three endpoints:\n%s", cfg)
	}
	// The nemesis took members as well as nodes.
	members := 0
	for _, e := range out.Events {
		if e.Process >= 0 || e.Type != history.Info || !strings.HasPrefix(e.F, "start-") {
			continue
		}
		if s, _ := e.Value.(string); strings.Contains(s, "e1") || strings.Contains(s, "e2") || strings.Contains(s, "e3") {
			members++
		}
	}
	if members == 0 {
		t.Errorf("no fault of the run named an etcd member")
	}
	t.Logf("etcd line: %v failovers, median %vs; %d faults named members; records %v; line tokens %v of %v node mutations, %v checked", cs["failover"].Fields["failovers"],
		cs["failover"].Fields["median_s"], members, line.Fields["records"], tok.Fields["tokened"], tok.Fields["node_mutations"], tok.Fields["checked"])
}

// The etcd-line checker compares etcd's records with the provider: a
// missing record, another holder, or an epoch below one the provider
// applied is each a finding.
func TestEtcdAgrees(t *testing.T) {
	base := func() *collected {
		return &collected{
			mutations: []mutationRecord{{Address: "10.0.1.10", Epoch: 3}, {Address: "10.0.1.10", Epoch: 5}, {Address: "10.0.1.11", Epoch: 2}},
			actual:    map[string]string{"10.0.1.10": "n2", "10.0.1.11": "n1"},
			line: map[string]etcdline.Record{
				"10.0.1.10": {Rev: 9, EpochRecord: epochRec(5, "n2")},
				"10.0.1.11": {Rev: 7, EpochRecord: epochRec(2, "n1")},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*collected)
		want   []string
	}{
		{"agrees", func(*collected) {}, nil},
		{"missing", func(c *collected) { delete(c.line, "10.0.1.11") }, []string{"10.0.1.11: no record in etcd, on n1 at the provider"}},
		{"holder", func(c *collected) { c.actual["10.0.1.10"] = "n3" }, []string{"10.0.1.10: etcd names n2 at epoch 5, the provider has it on n3"}},
		{"behind", func(c *collected) { c.line["10.0.1.10"] = etcdline.Record{Rev: 9, EpochRecord: epochRec(4, "n2")} },
			[]string{"10.0.1.10: etcd holds epoch 4, below epoch 5 the provider applied"}},
	} {
		c := base()
		tc.change(c)
		r := etcdAgrees(c).Check(context.Background(), &checker.Run{})
		got, _ := r.Fields["findings"].([]string)
		want := map[bool]linear.Verdict{true: linear.True, false: linear.False}[tc.want == nil]
		if r.Valid != want || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, r.Valid, got, want, tc.want)
		}
	}
}

func epochRec(e uint64, holder string) capture.EpochRecord {
	return capture.EpochRecord{Epoch: capture.Epoch(e), Holder: holder}
}

// The etcd line runs on premises in the lab and in the cloud dialects
// through proxies; in the cloud dialects with --net netns it is refused
// before anything starts, saying where it does run.
func TestEtcdLineRefusedInCloudNetns(t *testing.T) {
	store := t.TempDir()
	_, err := Run(t.Context(), Options{Binary: "/nonexistent", Provider: "azure", Netns: true, Epochs: "etcd", Store: store})
	if err == nil || !strings.Contains(err.Error(), "not built for --net netns in the cloud dialects yet") ||
		!strings.Contains(err.Error(), "--provider onprem --net netns") {
		t.Fatalf("Run(azure, netns, etcd) = %v", err)
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a refused run left %d entries in the store", len(entries))
	}
}
