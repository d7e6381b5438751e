package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/netfault"
)

var nodes = []string{"n1", "n2", "n3"}

func TestScheduleIsSeededAndAlternates(t *testing.T) {
	choices := Choices{
		Kinds:  []string{"partition", "pause", "clock"},
		Values: map[string]Choose{"partition": PartitionChoice(nodes), "pause": NodeChoice(nodes), "clock": SkewChoice(nodes, 2*time.Second)},
	}
	run := func(seed uint64) []string {
		g := gen.TimeLimit(60*time.Second, gen.Nemesis(Schedule(seed, choices, 5*time.Second, 3*time.Second)))
		var out []string
		for _, e := range gen.Simulate(g, 2, func(gen.Op) time.Duration { return 10 * time.Millisecond }, time.Hour) {
			if e.Kind == gen.Invoked {
				out = append(out, fmt.Sprintf("%v %s %v", e.Time, e.F, e.Value))
			}
		}
		return out
	}
	a := run(1)
	if !slices.Equal(a, run(1)) {
		t.Fatal("the same seed gave different schedules")
	}
	if slices.Equal(a, run(2)) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
	// 60s: start at 5s, stop at 8s, start at 13s, ...: alternating,
	// each start's kind stopped next.
	if len(a) < 14 || !strings.HasPrefix(a[0], "5s start-") || !strings.HasPrefix(a[1], "8s stop-") {
		t.Fatalf("schedule %v", a)
	}
	for i := 0; i+1 < len(a); i += 2 {
		kind := strings.TrimPrefix(strings.Fields(a[i])[1], "start-")
		if got := strings.Fields(a[i+1])[1]; got != "stop-"+kind {
			t.Fatalf("op %d: %s after %s", i+1, got, a[i])
		}
	}
}

// fakeProcs records what a fault does to processes.
type fakeProcs struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeProcs) note(s string) error {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
	return nil
}
func (f *fakeProcs) Pause(n string) error  { return f.note("stop " + n) }
func (f *fakeProcs) Resume(n string) error { return f.note("cont " + n) }
func (f *fakeProcs) Kill(n string) error   { return f.note("kill " + n) }
func (f *fakeProcs) Restart(_ context.Context, n string) error {
	return f.note("start " + n)
}

func TestComposeRoutesAndHeals(t *testing.T) {
	p := &fakeProcs{}
	nem := Compose(map[string]Fault{"pause": Pause(p, nodes), "kill": Kill(p, nodes)})
	ctx := t.Context()
	steps := []struct {
		f     string
		v     any
		value history.Value
		err   string
	}{
		{"start-pause", map[string]any{"node": "n2"}, "n2", ""},
		{"start-pause", map[string]any{"node": "n3"}, map[string]any{"node": "n3"}, "pause is already active"},
		{"start-kill", map[string]any{"nodes": []any{"n1", "n3"}}, "n1,n3", ""},
		{"stop-pause", nil, "resumed n2", ""},
		{"start-pause", map[string]any{"node": "n9"}, "", `"n9" is not one of the nodes [n1 n2 n3]`},
		{"start-fire", nil, nil, `no fault of kind "fire" (kinds: kill, pause)`},
		{"launch", nil, nil, `nemesis operation "launch" is neither start-KIND nor stop-KIND`},
	}
	for _, s := range steps {
		c := nem.Invoke(ctx, harness.Op{Process: history.Nemesis, F: s.f, Value: s.v})
		if c.Type != history.Info {
			t.Fatalf("%s: type %v", s.f, c.Type)
		}
		errStr, _ := c.Error.(string)
		if s.err == "" && c.Error != nil || s.err != "" && !strings.Contains(errStr, s.err) {
			t.Fatalf("%s: error %v, want %q", s.f, c.Error, s.err)
		}
		if fmt.Sprint(c.Value) != fmt.Sprint(s.value) {
			t.Fatalf("%s: value %v, want %v", s.f, c.Value, s.value)
		}
	}
	if err := nem.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"stop n2", "kill n1", "kill n3", "cont n1", "cont n2", "cont n3",
		"start n1", "start n3", // teardown: kill's stop restarts what was killed
		"cont n1", "cont n2", "cont n3"} // and pause's stop resumes everyone
	if !slices.Equal(p.log, want) {
		t.Fatalf("log %v\nwant %v", p.log, want)
	}
}

// realProcs pauses and kills real processes.
type realProcs struct {
	mu    sync.Mutex
	procs map[string]*exec.Cmd
}

func (r *realProcs) start(n string) error {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		return err
	}
	r.mu.Lock()
	r.procs[n] = cmd
	r.mu.Unlock()
	return nil
}
func (r *realProcs) get(n string) *exec.Cmd { r.mu.Lock(); defer r.mu.Unlock(); return r.procs[n] }
func (r *realProcs) Pause(n string) error   { return r.get(n).Process.Signal(syscall.SIGSTOP) }
func (r *realProcs) Resume(n string) error  { return r.get(n).Process.Signal(syscall.SIGCONT) }
func (r *realProcs) Kill(n string) error {
	c := r.get(n)
	c.Process.Kill()
	c.Wait()
	return nil
}
func (r *realProcs) Restart(_ context.Context, n string) error { return r.start(n) }

// state reads a process's state letter from /proc: S sleeping, T stopped.
func state(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	return f[0]
}

func TestPauseAndKillRealProcesses(t *testing.T) {
	p := &realProcs{procs: map[string]*exec.Cmd{}}
	for _, n := range nodes {
		if err := p.start(n); err != nil {
			t.Skipf("cannot start sleep: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			p.get(n).Process.Kill()
		}
	})
	ctx := t.Context()
	pause, kill := Pause(p, nodes), Kill(p, nodes)
	if _, err := pause.Start(ctx, map[string]any{"node": "n1"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.get("n1").Process.Pid, "T")
	if _, err := pause.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.get("n1").Process.Pid, "S")
	old := p.get("n2").Process.Pid
	if _, err := kill.Start(ctx, map[string]any{"node": "n2"}); err != nil {
		t.Fatal(err)
	}
	if s := state(t, old); s != "gone" && s != "Z" {
		t.Fatalf("killed process state %s", s)
	}
	if _, err := kill.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if nw := p.get("n2").Process.Pid; nw == old || (state(t, nw) != "S" && state(t, nw) != "R") {
		t.Fatalf("n2 not restarted: pid %d (was %d) state %s", nw, old, state(t, nw))
	}
}

func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if state(t, pid) == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d is %s, want %s", pid, state(t, pid), want)
}

// A partition through the proxy mesh really stops traffic, and the stop
// really heals it.
func TestPartitionThroughMesh(t *testing.T) {
	targets := map[string]string{}
	for _, n := range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { io.WriteString(c, n); c.Close() }()
			}
		}()
		targets[n] = l.Addr().String()
	}
	m, err := netfault.NewMesh(targets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reach := func(from, to string) bool {
		c, err := net.DialTimeout("tcp", m.Addr(from, to), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		b, _ := io.ReadAll(c)
		return string(b) == to
	}
	f := Partition(MeshNet(m, netfault.Reject), nodes)
	desc, err := f.Start(t.Context(), map[string]any{"shape": "isolate", "node": "n3"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(desc, "isolate ") {
		t.Fatalf("desc %q", desc)
	}
	if !reach("n1", "n2") || reach("n1", "n3") || reach("n3", "n2") {
		t.Fatalf("after isolating n3: n1→n2 %v n1→n3 %v n3→n2 %v", reach("n1", "n2"), reach("n1", "n3"), reach("n3", "n2"))
	}
	if _, err := f.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !reach("n1", "n3") || !reach("n3", "n2") {
		t.Fatal("not healed")
	}
	for _, bad := range []any{map[string]any{"shape": "triangle"}, map[string]any{"shape": "isolate", "node": "n7"}, map[string]any{"shape": "random-halves"}, nil} {
		if _, err := f.Start(t.Context(), bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

type fakeClocks struct {
	mu   sync.Mutex
	offs map[string]time.Duration
	sets int
	down string
}

func (c *fakeClocks) SetOffset(_ context.Context, n string, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == c.down {
		return errors.New("connection refused")
	}
	c.offs[n] = d
	c.sets++
	return nil
}

func TestSkewAndStrobe(t *testing.T) {
	c := &fakeClocks{offs: map[string]time.Duration{}, down: "n3"}
	skew := Skew(c, nodes)
	desc, err := skew.Start(t.Context(), map[string]any{"node": "n2", "offset": "-1.5s"})
	if err != nil || desc != "n2 -1.5s" || c.offs["n2"] != -1500*time.Millisecond {
		t.Fatalf("skew: %q %v %v", desc, err, c.offs)
	}
	// n3 does not answer; the reset still counts as done.
	if _, err := skew.Stop(t.Context()); err != nil || c.offs["n2"] != 0 {
		t.Fatalf("reset: %v %v", err, c.offs)
	}
	if _, err := skew.Start(t.Context(), map[string]any{"node": "n2", "offset": "soon"}); err == nil {
		t.Fatal("bad offset accepted")
	}
	strobe := Strobe(c, nodes)
	if _, err := strobe.Start(t.Context(), map[string]any{"node": "n1", "delta": "2s", "period": "5ms"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := strobe.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets < 8 || c.offs["n1"] != 0 {
		t.Fatalf("strobe: %d sets, n1 at %v", c.sets, c.offs["n1"])
	}
}

// refusingProcs is fakeProcs whose restarts of the nodes in refuse fail,
// as a process that will not start on a damaged file does.
type refusingProcs struct {
	fakeProcs
	refuse map[string]bool
}

func (r *refusingProcs) Restart(ctx context.Context, n string) error {
	r.fakeProcs.Restart(ctx, n)
	if r.refuse[n] {
		return errors.New("state file damaged")
	}
	return nil
}

// Replace kills, damages, restarts; a node that refuses to start stays
// down until the stop repairs it; without a repair the refusal is an
// error.
func TestReplaceDamagesAndRepairs(t *testing.T) {
	p := &refusingProcs{refuse: map[string]bool{"n2": true}}
	var damaged []string
	f := Replace(p, nodes, Damage{
		Apply: func(_ context.Context, n string, v any) (string, error) {
			damaged = append(damaged, n)
			return "state truncated", nil
		},
		Repair: func(_ context.Context, n string) (string, error) {
			p.refuse[n] = false
			return "state moved away", nil
		},
	})
	ctx := t.Context()
	desc, err := f.Start(ctx, map[string]any{"nodes": []any{"n1", "n2"}})
	if err != nil || desc != "n1: state truncated; restarted; n2: state truncated; restart refused: state file damaged" {
		t.Fatalf("start: %q, %v", desc, err)
	}
	desc, err = f.Stop(ctx)
	if err != nil || desc != "n2: state moved away; restarted" {
		t.Fatalf("stop: %q, %v", desc, err)
	}
	if desc, err := f.Stop(ctx); err != nil || desc != "nothing to repair" {
		t.Fatalf("second stop: %q, %v", desc, err)
	}
	want := []string{"kill n1", "start n1", "kill n2", "start n2", "start n2"}
	if !slices.Equal(p.log, want) || !slices.Equal(damaged, []string{"n1", "n2"}) {
		t.Fatalf("log %v, damaged %v", p.log, damaged)
	}

	p2 := &refusingProcs{refuse: map[string]bool{"n3": true}}
	g := Replace(p2, nodes, Damage{Apply: func(context.Context, string, any) (string, error) { return "data removed", nil }})
	if _, err := g.Start(ctx, map[string]any{"node": "n3"}); err == nil || !strings.Contains(err.Error(), "restarting n3 after data removed: state file damaged") {
		t.Fatalf("without a repair: %v", err)
	}
	// The stop still tries to bring it back.
	if desc, err := g.Stop(ctx); err == nil || desc != "" {
		t.Fatalf("stop without a repair: %q, %v", desc, err)
	}
	p2.refuse["n3"] = false
	if desc, err := g.Stop(ctx); err != nil || desc != "n3: restarted" {
		t.Fatalf("stop once it starts: %q, %v", desc, err)
	}
}
