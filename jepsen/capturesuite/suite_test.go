package capturesuite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// runDefault runs `ipfence-verify test capture` as a user would with no flags but
// the seed: 3 nodes, 60 s, every nemesis.
func runDefault(t *testing.T, unfenced bool) (map[string]checker.Result, *harness.Outcome) {
	t.Helper()
	return runDefaultOn(t, "", unfenced)
}

// runDefaultOn is runDefault with --provider: "" (aws) or another cloud.
func runDefaultOn(t *testing.T, cloud string, unfenced bool) (map[string]checker.Result, *harness.Outcome) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the 60 s capture test")
	}
	kinds := Available()
	for _, k := range Nemeses {
		if why := NeedsRoot[k]; why != "" && !slices.Contains(kinds, k) {
			t.Logf("nemesis %s left out: it needs root (%s)", k, why)
		}
	}
	command := []string{"ipfence", "test", "capture", "--seed", "1"}
	if cloud != "" {
		command = append(command, "--provider", cloud)
	}
	out, err := Run(t.Context(), Options{
		Binary: testenv.Binary(t), Nemesis: kinds, Seed: 1, Store: t.TempDir(), UnsafeDisableFence: unfenced,
		Provider: cloud, Command: command,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	if t.Failed() || out.Verdict != map[bool]linear.Verdict{false: linear.True, true: linear.False}[unfenced] {
		b, _ := json.MarshalIndent(out.Results, "", "  ")
		t.Logf("results:\n%s", b)
	}
	// The store holds what the issue names, whatever the verdict.
	for _, f := range []string{"history.jsonl", "results.json", "timeline.html", "latency.png", "rate.png", "mutations.json", "capture-owner.jsonl", "seed", "command", "logs/n1.log"} {
		if fi, err := os.Stat(filepath.Join(out.Dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The simulator logs nothing unless something goes wrong; its log
	// file is there all the same.
	if _, err := os.Stat(filepath.Join(out.Dir, "logs", "cloudsim.log")); err != nil {
		t.Error(err)
	}
	data, err := os.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Parse("history.jsonl", data, history.JSONL)
	if err != nil || len(h.Events) != len(out.Events) {
		t.Fatalf("history.jsonl: %v, %d events of %d", err, len(h.Events), len(out.Events))
	}
	// What the workload guarantees whatever the machine's speed (counts
	// of operations depend on it and are not asserted): every client
	// invoke in the history was counted (Ops counts the nemesis's too),
	// every kind of operation was invoked, and each drain is undone by an
	// undrain of the same node.
	invoked := map[string]int{}
	var pending []string
	for _, e := range out.Events {
		if e.Process < 0 || e.Type != history.Invoke {
			continue
		}
		invoked[e.F]++
		v, _ := e.Value.(map[string]history.Value)
		switch e.F {
		case "drain":
			pending = append(pending, fmt.Sprint(v["node"]))
		case "undrain":
			if len(pending) > 0 && pending[0] == fmt.Sprint(v["node"]) {
				pending = pending[1:]
			}
		}
	}
	total := 0
	for _, n := range invoked {
		total += n
	}
	if out.Ops < total || invoked["read"] == 0 || invoked["status"] == 0 || invoked["drain"] == 0 || invoked["undrain"] < invoked["drain"] {
		t.Errorf("%d ops, invoked %v", out.Ops, invoked)
	}
	if len(pending) > 0 {
		t.Errorf("drains never undone: %v", pending)
	}
	return cs, out
}

// With the fence, the default test finds nothing wrong.
func TestCaptureDefaultIsValid(t *testing.T) {
	cs, out := runDefault(t, false)
	for name, r := range cs {
		if r.Valid != linear.True {
			t.Errorf("checker %s: %v %v", name, r.Valid, r.Fields)
		}
	}
	if n := cs["fence"].Fields["stale_actions_executed"]; n != 0 {
		t.Errorf("stale actions executed: %v", n)
	}
	// The workload moved the addresses, which is what the fence is
	// tested by: every address was placed, and a drain of the node a read
	// found holding them moved at least one to another NIC. These are
	// properties of the run, not counts that depend on the machine's
	// speed.
	var ms []mutationRecord
	b, err := os.ReadFile(filepath.Join(out.Dir, "mutations.json"))
	if err != nil || json.Unmarshal(b, &ms) != nil {
		t.Fatalf("mutations.json: %v", err)
	}
	placed, moves, withAddr := map[string]bool{}, 0, 0
	for _, m := range ms {
		if m.Address != "" {
			withAddr++
		}
		if m.Call == "assign-secondary-ip" {
			placed[m.Address] = true
			if m.From != "" {
				moves++
			}
		}
	}
	if len(placed) != 4 || moves == 0 {
		t.Errorf("addresses placed %v, moved %d times: the workload did not test the fence", placed, moves)
	}
	// The disk nemeses ran and were answered as they must be: on seed 1
	// two corruptions and a wipe (see TestScheduleMix for the mix).
	d := cs["damage"].Fields
	if d["corruptions_refused"].(int) < 1 || d["corruptions_accepted"] != 0 || d["wipes"].(int) < 1 {
		t.Errorf("damage: %v", d)
	}
	if cs["fence"].Fields["mutations"] != len(ms) {
		t.Errorf("the fence checked %v mutations of %d", cs["fence"].Fields["mutations"], len(ms))
	}
	// The capture-owner model checked every completed read and every
	// mutation.
	okReads := 0
	for _, o := range out.Events {
		if o.Process >= 0 && o.F == "read" && o.Type == history.OK {
			okReads++
		}
	}
	if ops := cs["linear"].Fields["ops"].(int); ops < okReads+withAddr {
		t.Errorf("linearizability checked %d ops, fewer than the %d reads and %d mutations", ops, okReads, withAddr)
	}
}

// The planted bug: with the gate a no-op, the same test with the same seed
// must be invalid, through the fence and the capture-owner model both.
func TestCaptureCatchesDisabledFence(t *testing.T) {
	cs, _ := runDefault(t, true)
	if cs["fence"].Valid != linear.False {
		t.Errorf("fence: %v %v", cs["fence"].Valid, cs["fence"].Fields)
	}
	if n, _ := cs["fence"].Fields["stale_actions_executed"].(int); n < 1 {
		t.Errorf("stale actions executed: %v", cs["fence"].Fields["stale_actions_executed"])
	}
	if cs["linear"].Valid != linear.False {
		t.Errorf("capture-owner linearizability: %v %v", cs["linear"].Valid, cs["linear"].Fields)
	}
	// A stale unassign that executed took the address off its holder's
	// NIC: the availability checker reports that outage.
	for _, f := range cs["fence"].Fields["findings"].([]string) {
		if strings.Contains(f, "unassign-secondary-ip") {
			if ms, _ := cs["availability"].Fields["no_holder_ms"].(float64); ms <= 0 {
				t.Errorf("%s, and availability reports no outage: %v", f, cs["availability"].Fields)
			}
			break
		}
	}
}

// With --net netns the nodes run in network namespaces and partitions are
// nftables rules; the test stays valid.
func TestCaptureInNetworkNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 20 s capture test")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, for network namespaces")
	}
	testenv.Program(t, "ip")
	testenv.Program(t, "nft")
	out, err := Run(t.Context(), Options{
		Binary: testenv.Binary(t), Nemesis: []string{"partition", "kill"}, Seed: 2, Store: t.TempDir(),
		TimeLimit: 20 * time.Second, Netns: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != linear.True {
		b, _ := json.MarshalIndent(out.Results, "", "  ")
		t.Fatalf("not valid:\n%s", b)
	}
	// The nodes listened in their namespaces' subnet, not on loopback.
	log, err := os.ReadFile(filepath.Join(out.Dir, "logs", "n1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "addr=10.250.") {
		t.Fatalf("n1 did not serve in its namespace:\n%s", log)
	}
	var parts int
	for _, e := range out.Events {
		if e.Process == history.Nemesis && e.Type == history.Info && e.F == "start-partition" && e.Error == nil {
			parts++
		}
	}
	if parts == 0 {
		t.Fatal("no partition was applied")
	}
}
