//go:build linux

package etcdsuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/sshlab"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// runRemote runs the etcd test on an SSH lab of three nodes: etcd
// uploaded and started over SSH, partitions by nftables over SSH.
func runRemote(t *testing.T, o Options) (*harness.Outcome, map[string]checker.Result, *sshlab.Lab) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real etcd cluster over SSH")
	}
	o.Binary = etcd(t)
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1", "n2", "n3"}})
	o.NodesFile = lab.NodesFile()
	o.KnownHosts = []string{lab.KnownHosts()}
	o.RemoteDir = filepath.Join(lab.Dir(), "remote")
	o.Store = t.TempDir()
	o.Command = []string{"ipfence", "test", "etcd", "--nodes-file", o.NodesFile, "--workload", o.Workload}
	out, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	t.Logf("%s over SSH: %v, %d ops in %v", o.Workload, out.Verdict, out.Ops, out.Duration.Round(time.Millisecond))
	for name, r := range cs {
		t.Logf("  %s: %v %v", name, r.Valid, brief(r.Fields))
	}
	for _, f := range []string{"history.jsonl", "results.json", "etcd.txt", "logs/n1.log", "logs/n3.log"} {
		if fi, err := os.Stat(filepath.Join(out.Dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The members ran from the uploaded binary, on their data on the
	// node, listening on the node's namespace address.
	for _, n := range lab.Nodes() {
		if _, err := os.Stat(filepath.Join(o.RemoteDir, n.Name, "data", "member")); err != nil {
			t.Errorf("%s's member data: %v", n.Name, err)
		}
		if fi, err := os.Stat(filepath.Join(o.RemoteDir, n.Name, "etcd")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s's uploaded etcd: %v", n.Name, err)
		}
	}
	txt, _ := os.ReadFile(filepath.Join(out.Dir, "etcd.txt"))
	if ip := lab.Net().IP("n2"); !strings.Contains(string(txt), "--listen-client-urls http://"+ip+":2379") {
		t.Errorf("etcd.txt does not show n2 on %s:\n%s", ip, txt)
	}
	return out, cs, lab
}

func TestRemoteRegisterIsLinearizable(t *testing.T) {
	out, cs, _ := runRemote(t, Options{Workload: "register", Nemesis: DefaultNemeses, TimeLimit: 30 * time.Second, Seed: 1})
	if out.Verdict != linear.True || cs["linear"].Valid != linear.True {
		t.Fatalf("verdict %v, linear %v", out.Verdict, cs["linear"].Valid)
	}
	f := cs["faults"]
	if f.Valid != linear.True {
		t.Fatalf("faults checker %v %v", f.Valid, f.Fields)
	}
	// Seed 1's schedule pauses and kills; the partition is the other
	// test's.
	summary, _ := f.Fields["summary"].(string)
	for _, kind := range []string{"pause", "resume", "kill", "heal"} {
		if !strings.Contains(summary, kind+" ") {
			t.Errorf("no %s confirmed in %q", kind, summary)
		}
	}
	checkConfirmedInHistory(t, out)
}

// checkConfirmedInHistory: each fault's completion carries its
// confirmation, in the history beside it.
func checkConfirmedInHistory(t *testing.T, out *harness.Outcome) {
	t.Helper()
	starts := 0
	for _, e := range out.Events {
		s, ok := e.Value.(string)
		if e.Process != history.Nemesis || !ok || !strings.HasPrefix(e.F, "start-") {
			continue
		}
		starts++
		if !strings.Contains(s, " confirmed (") {
			t.Errorf("%s completed with %q: no confirmation", e.F, s)
		}
	}
	if starts == 0 {
		t.Error("no fault started")
	}
}

func TestRemoteSerializableReadsAreCaught(t *testing.T) {
	out, cs, _ := runRemote(t, Options{Workload: "register", SerializableReads: true, Nemesis: []string{"partition"}, TimeLimit: 30 * time.Second, Seed: 3})
	if out.Verdict != linear.False || cs["linear"].Valid != linear.False {
		t.Fatalf("verdict %v, linear %v: the stale reads went unnoticed", out.Verdict, cs["linear"].Valid)
	}
	if cs["faults"].Valid != linear.True || !strings.Contains(cs["faults"].Fields["summary"].(string), "partition ") {
		t.Fatalf("faults %v", cs["faults"].Fields)
	}
	checkConfirmedInHistory(t, out)
}

func TestRemoteOptions(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "nodes")
	if err := os.WriteFile(bad, []byte("n1 address=10.0.0.1 sudo=perhaps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Workload: "register", NodesFile: filepath.Join(dir, "missing")}, "--nodes-file: open"},
		{Options{Workload: "register", NodesFile: bad}, `--nodes-file ` + bad + `: nodes file line 1, node "n1", field sudo: "perhaps": want true or false`},
	} {
		o := c.o
		if err := o.defaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("a address=10.0.0.1\nb address=10.0.0.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Workload: "register", NodesFile: good, RemoteDir: "relative"}
	if err := o.defaults(); err == nil || !strings.Contains(err.Error(), "--remote-dir must be an absolute folder") {
		t.Errorf("relative remote dir: %v", err)
	}
}

// The leader and member faults over SSH: the leadership moved through the
// maintenance API of a member on another machine, a member removed, its
// data wiped and started again over SSH with a new command line
// (--initial-cluster-state existing), each confirmed in the history; the
// register stays linearizable.
func TestRemoteLeaderAndMember(t *testing.T) {
	out, cs, _ := runRemote(t, Options{Workload: "register", Nemesis: []string{"leader", "member"}, TimeLimit: 20 * time.Second, Seed: 8})
	if out.Verdict != linear.True || cs["linear"].Valid != linear.True {
		t.Fatalf("verdict %v, linear %v", out.Verdict, cs["linear"].Valid)
	}
	ok, not, details := confirmations(out.Events)
	t.Logf("confirmed %v, not confirmed %v, details %v", ok, not, details)
	for _, f := range []string{"move-leader", "remove-member", "add-member"} {
		if ok[f] == 0 {
			t.Errorf("no %s confirmed over SSH (%v)", f, details[f])
		}
	}
	if len(not) != 0 {
		t.Errorf("not confirmed: %v", not)
	}
	if f := cs["faults"]; f.Valid != linear.True {
		t.Fatalf("faults checker %v %v", f.Valid, f.Fields)
	}
	checkConfirmedInHistory(t, out)
}

// Every nemesis at once over SSH (partition, pause, kill, leader,
// member): seed 7's 45 s schedule partitions, pauses, kills, moves the
// leadership and removes a member and adds it back, each confirmed on the
// machines; the register stays linearizable.
func TestRemoteEveryNemesis(t *testing.T) {
	out, cs, _ := runRemote(t, Options{Workload: "register", Nemesis: Nemeses, TimeLimit: 45 * time.Second, Seed: 7})
	if out.Verdict != linear.True || cs["linear"].Valid != linear.True {
		t.Fatalf("verdict %v, linear %v", out.Verdict, cs["linear"].Valid)
	}
	if f := cs["faults"]; f.Valid != linear.True {
		t.Fatalf("faults checker %v %v", f.Valid, f.Fields)
	}
	summary, _ := cs["faults"].Fields["summary"].(string)
	for _, kind := range []string{"partition", "pause", "kill", "move-leader", "remove-member", "add-member"} {
		if !strings.Contains(summary, kind+" ") {
			t.Errorf("no %s confirmed over SSH: %q", kind, summary)
		}
	}
	if _, not, _ := confirmations(out.Events); len(not) != 0 {
		t.Errorf("not confirmed: %v", not)
	}
	checkConfirmedInHistory(t, out)
}
