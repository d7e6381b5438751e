package netfault

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// meshFixture is a mesh over one greeting server per node: a connection
// that works reads the name of the node it reached.
type meshFixture struct {
	t     *testing.T
	nodes []string
	m     *Mesh
}

func newMeshFixture(t *testing.T, nodes []string) *meshFixture {
	targets := map[string]string{}
	for _, n := range nodes {
		targets[n] = startEcho(t, n).addr()
	}
	m, err := NewMesh(targets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for _, from := range nodes {
		for _, to := range nodes {
			if from != to && m.Link(from, to).Target() != targets[to] {
				t.Fatalf("link %s -> %s forwards to %s, want %s", from, to, m.Link(from, to).Target(), targets[to])
			}
		}
	}
	return &meshFixture{t: t, nodes: nodes, m: m}
}

// try connects from → to and reports "ok", "timeout" or "reset".
// A link expected to pass is given passTimeout to answer, so that a
// loaded machine's slow answer is not taken for a black hole; one expected
// to be cut gets 200 ms (a cut only ever shows later, never sooner).
func (f *meshFixture) try(from, to, expect string) string {
	f.t.Helper()
	wait := 200 * time.Millisecond
	if expect == "ok" {
		wait = passTimeout
	}
	c, err := net.DialTimeout("tcp", f.m.Addr(from, to), 2*time.Second)
	if err != nil {
		return "reset"
	}
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(to))
	_, err = io.ReadFull(c, buf)
	switch {
	case err == nil && string(buf) == to:
		return "ok"
	case err == nil:
		f.t.Fatalf("%s -> %s reached %q", from, to, buf)
	case isTimeout(err):
		return "timeout"
	}
	return "reset"
}

// expect checks every ordered pair: cut links give cutResult, the others
// "ok".
func (f *meshFixture) expect(g Grudge, cutResult string) {
	f.t.Helper()
	var bad []string
	for _, from := range f.nodes {
		for _, to := range f.nodes {
			if from == to {
				continue
			}
			want := "ok"
			if g.Cuts(from, to) {
				want = cutResult
			}
			if got := f.try(from, to, want); got != want {
				bad = append(bad, fmt.Sprintf("%s -> %s: %s, want %s", from, to, got, want))
			}
		}
	}
	if len(bad) > 0 {
		f.t.Errorf("under %s:\n%s", g, strings.Join(bad, "\n"))
	}
}

func TestMeshHalves(t *testing.T) {
	nodes := nodeNames(3)
	f := newMeshFixture(t, nodes)
	f.expect(nil, "")

	g := Halves(nodes) // n1,n2 | n3
	f.m.Apply(g, Drop)
	if got := f.try("n1", "n2", "ok"); got != "ok" {
		t.Errorf("n1 -> n2 in the same half: %s", got)
	}
	if got := f.try("n3", "n1", "timeout"); got != "timeout" {
		t.Errorf("n3 -> n1 across the halves: %s", got)
	}
	f.expect(g, "timeout")

	// Moving to another grudge heals what it no longer cuts.
	g = Isolate(nodes, "n1")
	f.m.Apply(g, Reject)
	if got := f.try("n2", "n3", "ok"); got != "ok" {
		t.Errorf("n2 -> n3 after the halves healed: %s", got)
	}
	f.expect(g, "reset")

	f.m.Heal()
	f.expect(nil, "")
}

func TestMeshDirected(t *testing.T) {
	nodes := nodeNames(3)
	f := newMeshFixture(t, nodes)
	g := Grudge{"n1": {"n2"}}
	f.m.Apply(g, Drop)
	if got := f.try("n2", "n1", "ok"); got != "ok" {
		t.Errorf("n2 -> n1 with only n1 -> n2 cut: %s", got)
	}
	f.expect(g, "timeout")
}

func TestMeshUnknownNode(t *testing.T) {
	nodes := nodeNames(3)
	f := newMeshFixture(t, nodes)
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), `"n9"`) {
				t.Errorf("Apply of a grudge naming n9: recovered %v", r)
			}
		}()
		f.m.Apply(Grudge{"n1": {"n2"}, "n9": {"n1"}}, Drop)
	}()
	// The panic came before any link was cut.
	f.expect(nil, "")
	if got := strings.Join(f.m.Nodes(), ","); got != "n1,n2,n3" {
		t.Errorf("Nodes = %s", got)
	}
	addrs := map[string]bool{}
	for _, from := range nodes {
		for _, to := range nodes {
			if from != to {
				addrs[f.m.Addr(from, to)] = true
			}
		}
	}
	if len(addrs) != 6 {
		t.Errorf("%d distinct proxy addresses for 6 links", len(addrs))
	}
}

func TestMeshDelay(t *testing.T) {
	f := newMeshFixture(t, nodeNames(2))
	f.m.SetDelay(100 * time.Millisecond)
	// Timed from before the dial: the proxy holds the greeting from when
	// it reaches it, which can be before a loaded dial returns.
	start := time.Now()
	c := dial(t, f.m.Addr("n1", "n2"))
	buf := make([]byte, 2)
	_ = c.SetReadDeadline(time.Now().Add(passTimeout))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "n2" {
		t.Fatalf("greeting %q, %v", buf, err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("greeting came after %v with 100ms added", d)
	}
}
