//go:build linux

package capturesuite

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/sshlab"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// runRemote runs the capture test on an SSH lab of three nodes: the
// binary uploaded and each node started over SSH, partitions by nftables
// over SSH, with partition, pause and kill.
func runRemote(t *testing.T, o Options) (*harness.Outcome, map[string]checker.Result, *sshlab.Lab) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the capture test over SSH")
	}
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1", "n2", "n3"}})
	o.Binary = testenv.Binary(t)
	o.NodesFile = lab.NodesFile()
	o.KnownHosts = []string{lab.KnownHosts()}
	o.RemoteDir = filepath.Join(lab.Dir(), "remote")
	o.Store = t.TempDir()
	o.Nemesis = []string{"partition", "pause", "kill"}
	o.Command = []string{"ipfence-verify", "test", "capture", "--nodes-file", o.NodesFile}
	out, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	t.Logf("over SSH: %v, %d ops in %v, faults %v", out.Verdict, out.Ops, out.Duration.Round(time.Millisecond), cs["faults"].Fields["summary"])
	for _, name := range []string{"single-holder", "fence", "linear", "failover", "convergence", "faults"} {
		t.Logf("  %s: %v %v", name, cs[name].Valid, cs[name].Fields)
	}
	for _, f := range []string{"history.jsonl", "results.json", "mutations.json", "remote.txt", "logs/n1.log", "logs/n2.log", "logs/n3.log"} {
		if fi, err := os.Stat(filepath.Join(out.Dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Each node ran from the binary uploaded into its folder on its
	// machine, listening on the machine's address, and wrote its state
	// there.
	for _, n := range lab.Nodes() {
		base := filepath.Join(o.RemoteDir, n.Name)
		if fi, err := os.Stat(filepath.Join(base, "ipfence")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s's uploaded binary: %v", n.Name, err)
		}
		if entries, err := os.ReadDir(filepath.Join(base, "data")); err != nil || len(entries) == 0 {
			t.Errorf("%s's data folder: %v, %d entries", n.Name, err, len(entries))
		}
	}
	txt, _ := os.ReadFile(filepath.Join(out.Dir, "remote.txt"))
	want := "n2: " + lab.Net().IP("n2") + ":7000 at " + lab.Net().IP("n2") + ": " + filepath.Join(o.RemoteDir, "n2", "ipfence") + " serve --config "
	if !strings.Contains(string(txt), want) || !strings.Contains(string(txt), "simulator: http://"+lab.Net().HostIP()+":") {
		t.Errorf("remote.txt lacks %q or the simulator at %s:\n%s", want, lab.Net().HostIP(), txt)
	}
	return out, cs, lab
}

// confirmationRE reads one confirmation as control.Confirmed writes it
// into a fault's completion: "kill n2 confirmed (pid 812 gone)".
var confirmationRE = regexp.MustCompile(`(?:^|; )([a-z]+) ([^;]*?) (confirmed|NOT confirmed) \(`)

// confirmedInHistory counts, by fault, the confirmations written beside
// the faults in the history, and checks that every fault's start carries
// one.
func confirmedInHistory(t *testing.T, out *harness.Outcome) map[string]int {
	t.Helper()
	ok := map[string]int{}
	for _, e := range out.Events {
		s, isString := e.Value.(string)
		if e.Process != history.Nemesis || !isString || e.Type == history.Invoke {
			continue
		}
		ms := confirmationRE.FindAllStringSubmatch(s, -1)
		if strings.HasPrefix(e.F, "start-") && len(ms) == 0 {
			t.Errorf("%s completed with %q: no confirmation", e.F, s)
		}
		for _, m := range ms {
			if m[3] != "confirmed" {
				t.Errorf("%s: %s %s not confirmed: %q", e.F, m[1], m[2], s)
			}
			ok[m[1]]++
		}
	}
	return ok
}

// summaryRE reads one fault's counts in the ledger's summary: "kill 1/1".
var summaryRE = regexp.MustCompile(`([a-z]+) (\d+)/(\d+)`)

// The capture test on three machines reached over SSH, with partitions,
// pauses and kills (seed 7's 30 s schedule makes one of each): the nodes
// capture and fail over, every fault is confirmed on the machines, the
// history holds each start with its confirmation, and the checkers find
// it valid.
func TestRemoteCaptureValid(t *testing.T) {
	out, cs, _ := runRemote(t, Options{TimeLimit: 30 * time.Second, Seed: 7})
	if out.Verdict != linear.True {
		t.Fatalf("verdict %v over SSH", out.Verdict)
	}
	if out.Ops == 0 {
		t.Fatal("no operations")
	}
	if n, _ := cs["failover"].Fields["failovers"].(int); n == 0 {
		t.Errorf("no failover over SSH: %v", cs["failover"].Fields)
	}
	f := cs["faults"]
	if f.Valid != linear.True {
		t.Fatalf("faults checker %v %v", f.Valid, f.Fields)
	}
	inHistory := confirmedInHistory(t, out)
	summary, _ := f.Fields["summary"].(string)
	t.Logf("ledger %q; confirmed beside the faults in the history: %v", summary, inHistory)
	ok, issued := map[string]int{}, map[string]int{}
	for _, m := range summaryRE.FindAllStringSubmatch(summary, -1) {
		ok[m[1]], _ = strconv.Atoi(m[2])
		issued[m[1]], _ = strconv.Atoi(m[3])
	}
	// Every kind the schedule drew was made and confirmed as often as it
	// was issued; the heals are the run's first (clearing what a dead
	// run left), each partition's end, the final one and the harness's
	// own after the history; the resumes are each pause's end and the
	// final heals', one per node.
	for _, kind := range []string{"partition", "pause", "resume", "kill", "heal"} {
		if issued[kind] == 0 || ok[kind] != issued[kind] || inHistory[kind] == 0 {
			t.Errorf("%s: %d of %d confirmed in the ledger, %d in the history", kind, ok[kind], issued[kind], inHistory[kind])
		}
	}
	if issued["heal"] < issued["partition"]+1 {
		t.Errorf("%d heals for %d partitions", issued["heal"], issued["partition"])
	}
}

// The planted bug through the remote path: nodes started with
// --unsafe-disable-fence on their machines execute stale releases (the
// flaps make them from the fifth second on), and the run says so.
func TestRemoteCaptureCatchesUnfenced(t *testing.T) {
	out, cs, _ := runRemote(t, Options{TimeLimit: 20 * time.Second, Seed: 7, UnsafeDisableFence: true})
	stale, _ := cs["fence"].Fields["stale_actions_executed"].(int)
	t.Logf("unfenced over SSH: %v, stale actions executed %d", out.Verdict, stale)
	if out.Verdict != linear.False || stale == 0 {
		t.Fatalf("verdict %v, stale actions executed %d: the planted bug went unnoticed over SSH", out.Verdict, stale)
	}
	if cs["faults"].Valid != linear.True {
		t.Errorf("faults %v", cs["faults"].Fields)
	}
}
