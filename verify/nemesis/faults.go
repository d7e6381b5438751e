package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/netfault"
)

// Net cuts links between nodes: a netfault.Mesh of proxies, or netfault's
// network namespaces.
type Net interface {
	// Partition cuts exactly the grudge's links and heals the others.
	Partition(ctx context.Context, g netfault.Grudge) error
	// Heal heals every link.
	Heal(ctx context.Context) error
}

// MeshNet adapts a proxy mesh to Net, cutting with mode.
func MeshNet(m *netfault.Mesh, mode netfault.Mode) Net { return meshNet{m, mode} }

type meshNet struct {
	m    *netfault.Mesh
	mode netfault.Mode
}

func (n meshNet) Partition(_ context.Context, g netfault.Grudge) error {
	n.m.Apply(g, n.mode)
	return nil
}
func (n meshNet) Heal(context.Context) error { n.m.Heal(); return nil }

// NetnsNet adapts network namespaces to Net.
func NetnsNet(ns *netfault.Netns) Net { return netnsNet{ns} }

type netnsNet struct{ ns *netfault.Netns }

func (n netnsNet) Partition(_ context.Context, g netfault.Grudge) error { return n.ns.Apply(g) }
func (n netnsNet) Heal(context.Context) error                           { return n.ns.Heal() }

// Shapes are the partition shapes Partition understands.
var Shapes = []string{"halves", "random-halves", "isolate", "majorities-ring", "bridge"}

// Grudge builds the grudge a partition value describes: {"shape": S} with
// S one of Shapes, plus "seed" for random-halves and "node" for isolate.
func Grudge(nodes []string, v any) (netfault.Grudge, error) {
	shape, _ := field(v, "shape")
	switch shape {
	case "halves":
		return netfault.Halves(nodes), nil
	case "random-halves":
		seed, ok := intField(v, "seed")
		if !ok {
			return nil, errors.New("random-halves needs an integer seed")
		}
		return netfault.RandomHalves(nodes, uint64(seed)), nil
	case "isolate":
		node, ok := field(v, "node")
		if !ok || !slices.Contains(nodes, node) {
			return nil, fmt.Errorf("isolate needs one of the nodes %v, not %q", nodes, node)
		}
		return netfault.Isolate(nodes, node), nil
	case "majorities-ring":
		return netfault.MajoritiesRing(nodes), nil
	case "bridge":
		return netfault.Bridge(nodes), nil
	}
	return nil, fmt.Errorf("partition shape %q is not one of %s", shape, strings.Join(Shapes, ", "))
}

// Partition cuts the network between nodes in the shape each start names.
func Partition(net Net, nodes []string) Fault {
	return Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			g, err := Grudge(nodes, v)
			if err != nil {
				return "", err
			}
			shape, _ := field(v, "shape")
			desc := shape + " " + g.String()
			return desc, net.Partition(ctx, g)
		},
		Stop: func(ctx context.Context) (string, error) { return "healed", net.Heal(ctx) },
	}
}

// Processes controls the system's processes, one per node.
type Processes interface {
	// Pause stops node's process (SIGSTOP); Resume continues it (SIGCONT).
	Pause(node string) error
	Resume(node string) error
	// Kill kills node's process (SIGKILL) and waits for it to be gone;
	// Restart starts it again and waits until it serves.
	Kill(node string) error
	Restart(ctx context.Context, node string) error
}

// targets reads the nodes a start names: {"node": N} or {"nodes": [...]}.
func targets(nodes []string, v any) ([]string, error) {
	var out []string
	if n, ok := field(v, "node"); ok {
		out = []string{n}
	} else if m, ok := v.(map[string]any); ok {
		switch l := m["nodes"].(type) {
		case []string:
			out = l
		case []any:
			for _, x := range l {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("nodes must be strings, found %v", x)
				}
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the fault needs a node or nodes, found %v", v)
	}
	for _, n := range out {
		if !slices.Contains(nodes, n) {
			return nil, fmt.Errorf("%q is not one of the nodes %v", n, nodes)
		}
	}
	return out, nil
}

// eachTarget marks each node the value names in hit (before acting, so
// that the stop undoes an act that was cut short) and acts on it.
func eachTarget(nodes []string, v any, mu *sync.Mutex, hit map[string]bool, verb string, act func(string) error) (string, error) {
	ns, err := targets(nodes, v)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, n := range ns {
		mu.Lock()
		hit[n] = true
		mu.Unlock()
		if err := act(n); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", verb, n, err))
		}
	}
	return strings.Join(ns, ","), errors.Join(errs...)
}

// Pause stops the named nodes' processes with SIGSTOP; the stop continues
// them all with SIGCONT.
func Pause(p Processes, nodes []string) Fault {
	var mu sync.Mutex
	paused := map[string]bool{}
	return Fault{
		Start: func(_ context.Context, v any) (string, error) {
			return eachTarget(nodes, v, &mu, paused, "pausing", p.Pause)
		},
		Stop: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			var errs []error
			var done []string
			// Resume every node, not only those paused here: a pause whose
			// start was cut short must not leave a process stopped.
			for _, n := range nodes {
				if err := p.Resume(n); err != nil && paused[n] {
					errs = append(errs, fmt.Errorf("resuming %s: %w", n, err))
				}
				if paused[n] {
					done = append(done, n)
				}
			}
			clear(paused)
			return "resumed " + strings.Join(done, ","), errors.Join(errs...)
		},
	}
}

// Kill kills the named nodes' processes with SIGKILL; the stop restarts
// them.
func Kill(p Processes, nodes []string) Fault {
	var mu sync.Mutex
	killed := map[string]bool{}
	return Fault{
		Start: func(_ context.Context, v any) (string, error) {
			return eachTarget(nodes, v, &mu, killed, "killing", p.Kill)
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			var errs []error
			var done []string
			for _, n := range slices.Sorted(maps.Keys(killed)) {
				if err := p.Restart(ctx, n); err != nil {
					errs = append(errs, fmt.Errorf("restarting %s: %w", n, err))
					continue
				}
				done = append(done, n)
				delete(killed, n)
			}
			return "restarted " + strings.Join(done, ","), errors.Join(errs...)
		},
	}
}

// Clocks sets a node's clock offset: how far its notion of now is moved
// from the real clock. Go programs read time through the vDSO, which
// libfaketime cannot intercept, so the system under test offers this
// itself (ipfence serve --test-endpoints).
type Clocks interface {
	SetOffset(ctx context.Context, node string, offset time.Duration) error
}

// Skew moves the named node's clock by {"offset": "3s"} (negative moves it
// back); the stop sets every node's offset back to zero.
func Skew(c Clocks, nodes []string) Fault {
	return Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			ns, err := targets(nodes, v)
			if err != nil {
				return "", err
			}
			s, _ := field(v, "offset")
			off, err := time.ParseDuration(s)
			if err != nil {
				return "", fmt.Errorf("clock offset %q: %v", s, err)
			}
			var errs []error
			for _, n := range ns {
				if err := c.SetOffset(ctx, n, off); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", n, err))
				}
			}
			return fmt.Sprintf("%s %+v", strings.Join(ns, ","), off), errors.Join(errs...)
		},
		Stop: func(ctx context.Context) (string, error) { return "reset", resetClocks(ctx, c, nodes) },
	}
}

// resetClocks sets every node's offset to zero. A node that does not
// answer (killed, paused) is not an error: a restarted daemon starts with
// no offset, and a paused one keeps an offset only until the next test
// step heals the pause and this runs again at teardown.
func resetClocks(ctx context.Context, c Clocks, nodes []string) error {
	var errs []error
	for _, n := range nodes {
		if err := c.SetOffset(ctx, n, 0); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	if len(errs) == len(nodes) && len(nodes) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// Strobe flips the named node's clock between zero and {"delta": "2s"}
// every {"period": "100ms"} until stopped, so that its time jumps forward
// and back; the stop ends every strobe and sets all offsets to zero.
func Strobe(c Clocks, nodes []string) Fault {
	var mu sync.Mutex
	var stops []chan struct{}
	var wg sync.WaitGroup
	return Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			ns, err := targets(nodes, v)
			if err != nil {
				return "", err
			}
			ds, _ := field(v, "delta")
			ps, _ := field(v, "period")
			delta, err1 := time.ParseDuration(ds)
			period, err2 := time.ParseDuration(ps)
			if err1 != nil || err2 != nil || period <= 0 {
				return "", fmt.Errorf("strobe needs a delta and a positive period, found %q and %q", ds, ps)
			}
			stop := make(chan struct{})
			mu.Lock()
			stops = append(stops, stop)
			mu.Unlock()
			bg := context.WithoutCancel(ctx)
			wg.Go(func() {
				t := time.NewTicker(period)
				defer t.Stop()
				for on := true; ; on = !on {
					off := time.Duration(0)
					if on {
						off = delta
					}
					for _, n := range ns {
						// A node that misses one flip gets the next.
						_ = c.SetOffset(bg, n, off)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			})
			return fmt.Sprintf("%s ±%v every %v", strings.Join(ns, ","), delta, period), nil
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			for _, s := range stops {
				close(s)
			}
			stops = nil
			mu.Unlock()
			wg.Wait()
			return "reset", resetClocks(ctx, c, nodes)
		},
	}
}
