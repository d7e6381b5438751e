//go:build linux

package control_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/sshlab"
	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/netfault"
)

// liar is a node that says yes and does nothing: every line containing
// one of the words runs as "true" instead.
type liar struct {
	control.Remote
	words []string
}

func (l liar) Run(ctx context.Context, c control.Cmd) (control.Result, error) {
	for _, w := range l.words {
		if strings.Contains(c.Line, w) {
			c.Line = "true"
		}
	}
	return l.Remote.Run(ctx, c)
}

// procState reads a process's state letter straight from this machine's
// /proc (the lab's nodes share it), apart from the code under test.
func procState(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2:][:1]
}

func labRemotes(t *testing.T, lab *sshlab.Lab) map[string]control.Remote {
	remotes := map[string]control.Remote{}
	for _, n := range lab.Nodes() {
		r, err := lab.Remote(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		remotes[n.Name] = r
	}
	return remotes
}

func TestVerifiedProcessFaults(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	ctx := context.Background()
	remotes := labRemotes(t, lab)
	d := control.Daemon{Name: "sleeper", Dir: filepath.Join(lab.Dir(), "n1"), Argv: []string{"sleep", "600"}}
	ledger := &control.Ledger{}
	procs, err := control.NewProcs(remotes, map[string]control.Daemon{"n1": d}, ledger)
	if err != nil {
		t.Fatal(err)
	}
	if err := procs.Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	p, _ := procs.Proc("n1")
	if err := procs.Pause("n1"); err != nil {
		t.Fatal(err)
	}
	if st := procState(t, p.Pid); st != "T" {
		t.Fatalf("after Pause the kernel says %q", st)
	}
	if err := procs.Resume("n1"); err != nil {
		t.Fatal(err)
	}
	// Continued, sleep sleeps again, or is about to (R) on a busy machine.
	if st := procState(t, p.Pid); st != "S" && st != "R" {
		t.Fatalf("after Resume the kernel says %q", st)
	}
	if err := procs.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	if st := procState(t, p.Pid); st != "gone" && st != "Z" {
		t.Fatalf("after Kill the kernel says %q", st)
	}
	// Resume of a killed process has nothing to do; Kill again finds it
	// already gone.
	if err := procs.Resume("n1"); err != nil {
		t.Fatalf("resume after kill: %v", err)
	}
	if err := procs.Kill("n1"); err != nil {
		t.Fatalf("kill after kill: %v", err)
	}
	if err := procs.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	p2, _ := procs.Proc("n1")
	if st := procState(t, p2.Pid); p2 == p || (st != "S" && st != "R") {
		t.Fatalf("restarted %+v (was %+v), state %s", p2, p, procState(t, p2.Pid))
	}
	var got []string
	for _, c := range ledger.All() {
		got = append(got, fmt.Sprintf("%s %s %v", c.Fault, c.Target, c.Confirmed))
	}
	want := "pause n1 true|resume n1 true|kill n1 true|resume n1 true|kill n1 true"
	if strings.Join(got, "|") != want {
		t.Fatalf("ledger %q, want %q", strings.Join(got, "|"), want)
	}
	if s := ledger.Summary(); s != "kill 2/2, pause 1/1, resume 2/2" {
		t.Fatalf("summary %q", s)
	}

	// A node that acknowledges signals without sending them: the pause
	// and the kill are not confirmed, and say so.
	lying := map[string]control.Remote{"n1": liar{remotes["n1"], []string{"kill -s STOP", "kill -s KILL"}}}
	ledger2 := &control.Ledger{}
	procs2, err := control.NewProcs(lying, map[string]control.Daemon{"n1": {Name: "sleeper2", Dir: d.Dir, Argv: d.Argv}}, ledger2)
	if err != nil {
		t.Fatal(err)
	}
	procs2.ConfirmWithin = time.Second
	if err := procs2.Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(string) error{procs2.Pause, procs2.Kill} {
		if err := f("n1"); !errors.Is(err, control.ErrNotConfirmed) {
			t.Fatalf("a fault that did nothing: %v", err)
		}
	}
	if s := ledger2.Summary(); s != "kill 0/1, pause 0/1" {
		t.Fatalf("summary of the lying node %q", s)
	}
	if err := procs2.StopAll(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

func TestVerifiedPartition(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1", "n2", "n3"}})
	ctx := context.Background()
	remotes := labRemotes(t, lab)
	ledger := &control.Ledger{}
	nn, err := control.NewNftNet(lab.Nodes(), remotes, ledger)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"n1", "n2", "n3"}
	g := netfault.Isolate(nodes, "n1")
	if err := nn.Partition(ctx, g); err != nil {
		t.Fatal(err)
	}
	// The rules are where Netns would put them, in each node's namespace.
	rules, err := lab.Net().Rules("n1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules, lab.Net().IP("n2")) || !strings.Contains(rules, lab.Net().IP("n3")) || !strings.Contains(rules, "drop") {
		t.Fatalf("n1's rules after isolating it:\n%s", rules)
	}
	if err := nn.Heal(ctx); err != nil {
		for _, n := range nodes {
			t.Logf("%s's sshd log: %s", n, lab.LogTail(n))
			r, _ := lab.Net().Rules(n)
			t.Logf("%s's rules: %s", n, r)
		}
		t.Fatal(err)
	}
	all := ledger.All()
	if len(all) != 2 || !all[0].Confirmed || !all[1].Confirmed || all[0].Fault != "partition" || all[1].Fault != "heal" {
		t.Fatalf("ledger %+v", all)
	}
	if want := "n1→n2 cut, n1→n3 cut, n2→n1 cut, n2→n3 reached, n3→n1 cut, n3→n2 reached"; all[0].Detail != want {
		t.Fatalf("partition probes %q, want %q", all[0].Detail, want)
	}
	if strings.Contains(all[1].Detail, "cut") {
		t.Fatalf("heal probes %q", all[1].Detail)
	}

	// A node whose nft does nothing: its peers' rules still cut each of
	// its links (TCP needs both ways), so the partition holds.
	lying := map[string]control.Remote{}
	for k, r := range remotes {
		lying[k] = r
	}
	lying["n2"] = liar{remotes["n2"], []string{"nft -f -"}}
	bad, err := control.NewNftNet(lab.Nodes(), lying, &control.Ledger{})
	if err != nil {
		t.Fatal(err)
	}
	bad.ConfirmWithin = 5 * time.Second
	if err := bad.Partition(ctx, netfault.Isolate(nodes, "n2")); err != nil {
		t.Fatalf("isolating n2, whose own rules are missing: %v", err)
	}
	if err := nn.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// Two of the three ignore nft: the link between them stays open,
	// where a partition of n1 from the rest must cut it.
	lying["n1"] = liar{remotes["n1"], []string{"nft -f -"}}
	lying["n2"] = remotes["n2"]
	lying["n3"] = liar{remotes["n3"], []string{"nft -f -"}}
	bad, _ = control.NewNftNet(lab.Nodes(), lying, &control.Ledger{})
	bad.ConfirmWithin = 5 * time.Second
	err = bad.Partition(ctx, netfault.Isolate(nodes, "n1"))
	if !errors.Is(err, control.ErrNotConfirmed) || !strings.Contains(err.Error(), "n1→n3 reached") || strings.Contains(err.Error(), "n1→n2 reached") {
		t.Fatalf("partition not applied between n1 and n3: %v", err)
	}
	if err := nn.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := control.NewNftNet([]control.Node{{Name: "x", Address: "fd00::1"}}, map[string]control.Remote{"x": remotes["n1"]}, nil); err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Fatalf("IPv6 node: %v", err)
	}
}
