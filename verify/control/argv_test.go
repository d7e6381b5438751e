//go:build linux

package control_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/control"
)

// SetArgv changes what the next start runs, not the running daemon: a
// member that must come back with other flags (etcd's
// --initial-cluster-state existing) is stopped, given its new argv, and
// started again.
func TestSetArgv(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "n1")
	local := &control.Local{Node: "n1"}
	first := []string{"sh", "-c", "echo argv first; exec sleep 300"}
	procs, err := control.NewProcs(map[string]control.Remote{"n1": local},
		map[string]control.Daemon{"n1": {Name: "d", Dir: dir, Argv: first}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = procs.StopAll(context.Background(), time.Second) })
	if err := procs.Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	second := []string{"sh", "-c", "echo argv second; exec sleep 300"}
	if err := procs.SetArgv("n1", second); err != nil {
		t.Fatal(err)
	}
	second[2] = "changed by the caller afterwards"
	if got := procs.Argv("n1"); got[2] != "echo argv second; exec sleep 300" {
		t.Fatalf("Argv %q: SetArgv kept the caller's slice", got)
	}
	// The running daemon is untouched: Restart sees it there.
	p1, _ := procs.Proc("n1")
	if err := procs.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if p, _ := procs.Proc("n1"); p != p1 {
		t.Fatalf("Restart of a running daemon replaced pid %d with %d", p1.Pid, p.Pid)
	}
	if err := procs.Stop(ctx, "n1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if procs.Running(ctx, "n1") {
		t.Fatal("running after Stop")
	}
	if err := procs.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	p2, _ := procs.Proc("n1")
	if p2 == p1 || !procs.Running(ctx, "n1") {
		t.Fatalf("after Restart: pid %d (was %d), running %v", p2.Pid, p1.Pid, procs.Running(ctx, "n1"))
	}
	// The log holds what each start printed, in order; the new process's
	// command line is the new argv.
	var lines []string
	for range 200 {
		b, _ := os.ReadFile(filepath.Join(dir, "d.log"))
		if lines = strings.Fields(strings.ReplaceAll(string(b), "argv ", "")); len(lines) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(lines, []string{"first", "second"}) {
		t.Fatalf("log %q, want first then second", lines)
	}
	for _, c := range []struct {
		node string
		argv []string
		want string
	}{
		{"n1", nil, "SetArgv with no program"},
		{"n2", []string{"true"}, `no daemon on node "n2"`},
	} {
		if err := procs.SetArgv(c.node, c.argv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetArgv(%s, %q): %v, want %q", c.node, c.argv, err, c.want)
		}
	}
}

// SignalConfirmed on a child of the test (ProcOf): a pause is confirmed by
// the kernel's stopped state and recorded under the caller's fault name;
// a signal that does nothing (a liar runs "true" for kill) is recorded as
// not confirmed and the error wraps ErrNotConfirmed.
func TestSignalConfirmed(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	local := &control.Local{Node: "n1"}
	p, err := control.ProcOf(ctx, local, cmd.Process.Pid)
	if err != nil || p.Pid != cmd.Process.Pid || p.Start == 0 {
		t.Fatalf("ProcOf: %+v %v", p, err)
	}
	l := &control.Ledger{}
	if err := control.SignalConfirmed(ctx, local, p, "STOP", control.Stopped, l, "pause-leader", "n1"); err != nil {
		t.Fatal(err)
	}
	if st := procState(t, p.Pid); st != "T" {
		t.Fatalf("after the confirmed pause the kernel says %q", st)
	}
	lying := liar{local, []string{"kill -s CONT"}}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = control.SignalConfirmed(short, lying, p, "CONT", control.Running, l, "resume-leader", "n1")
	if !errors.Is(err, control.ErrNotConfirmed) {
		t.Fatalf("a CONT that was not sent: %v", err)
	}
	all := l.All()
	if len(all) != 2 || !all[0].Confirmed || all[0].Fault != "pause-leader" || all[0].Detail != "pid "+strconv.Itoa(p.Pid)+" stopped" ||
		all[1].Confirmed || all[1].Fault != "resume-leader" || all[1].Detail != "pid "+strconv.Itoa(p.Pid)+" stopped" {
		t.Fatalf("ledger %+v", all)
	}
	if l.Summary() != "pause-leader 1/1, resume-leader 0/1" {
		t.Fatalf("summary %q", l.Summary())
	}
	if err := control.SignalConfirmed(ctx, local, p, "CONT", control.Running, l, "resume-leader", "n1"); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := control.ProcOf(ctx, local, p.Pid); !errors.Is(err, control.ErrGone) {
		t.Fatalf("ProcOf of a reaped child: %v", err)
	}
}
