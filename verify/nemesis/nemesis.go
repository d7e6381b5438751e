// Package nemesis injects the faults of a Jepsen-style test for real:
// network partitions (through verify/netfault's proxies or nftables),
// process pauses (SIGSTOP and SIGCONT), kills and restarts, clock skew and
// strobe, and whatever else a workload supplies as a Fault. Compose routes a
// harness's nemesis operations to them, and Schedule is the seeded generator
// that starts and stops them beside the clients.
//
// Every fault kind K is started by the operation "start-K" and stopped by
// "stop-K"; the start's completion value says what was done ("n2", "halves
// n1,n2 | n3"), which is what the reports name the fault period after.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/ipfence/ipfence/verify/harness"
)

// Fault is one kind of fault.
type Fault struct {
	// Start injects the fault the value describes and says what it did. An
	// error leaves the fault maybe half-applied: Stop still runs later.
	Start func(ctx context.Context, value any) (string, error)
	// Stop heals every fault of this kind, whatever Start did or did not
	// finish, and says what it did. It must succeed when nothing is
	// broken, since Teardown calls it regardless.
	Stop func(ctx context.Context) (string, error)
}

// composite routes start-K and stop-K to the faults by kind.
type composite struct {
	mu     sync.Mutex
	faults map[string]Fault
	active map[string]bool
}

// Compose returns a nemesis that carries out the faults by kind. Starting a
// kind that is already active is refused (the op says so) rather than
// stacked: one stop must heal it. Teardown stops every kind, active or
// not, so that a fault whose start was interrupted is healed too.
func Compose(faults map[string]Fault) harness.Nemesis {
	return &composite{faults: faults, active: map[string]bool{}}
}

func (c *composite) Setup(context.Context) error { return nil }

func (c *composite) Invoke(ctx context.Context, op harness.Op) harness.Completion {
	if kind, ok := strings.CutPrefix(op.F, "start-"); ok {
		f, known := c.faults[kind]
		if !known {
			return harness.Info(op.Value, fmt.Sprintf("no fault of kind %q (kinds: %s)", kind, strings.Join(slices.Sorted(maps.Keys(c.faults)), ", ")))
		}
		c.mu.Lock()
		if c.active[kind] {
			c.mu.Unlock()
			return harness.Info(op.Value, kind+" is already active")
		}
		c.active[kind] = true
		c.mu.Unlock()
		desc, err := f.Start(ctx, op.Value)
		if err != nil {
			return harness.Info(desc, err.Error())
		}
		return harness.Info(desc, nil)
	}
	if kind, ok := strings.CutPrefix(op.F, "stop-"); ok {
		f, known := c.faults[kind]
		if !known {
			return harness.Info(op.Value, fmt.Sprintf("no fault of kind %q", kind))
		}
		c.mu.Lock()
		delete(c.active, kind)
		c.mu.Unlock()
		desc, err := f.Stop(ctx)
		if err != nil {
			return harness.Info(desc, err.Error())
		}
		return harness.Info(desc, nil)
	}
	return harness.Info(op.Value, fmt.Sprintf("nemesis operation %q is neither start-KIND nor stop-KIND", op.F))
}

func (c *composite) Teardown(ctx context.Context) error {
	var errs []error
	for _, kind := range slices.Sorted(maps.Keys(c.faults)) {
		if _, err := c.faults[kind].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("healing %s: %w", kind, err))
		}
	}
	c.mu.Lock()
	clear(c.active)
	c.mu.Unlock()
	return errors.Join(errs...)
}

// field reads a string field of an operation's value, which is a map when
// the generator built it and a normalized history value when replayed.
func field(v any, name string) (string, bool) {
	switch m := v.(type) {
	case map[string]any:
		s, ok := m[name].(string)
		return s, ok
	case map[string]string:
		s, ok := m[name]
		return s, ok
	}
	return "", false
}

// intField reads an integer field the same way.
func intField(v any, name string) (int64, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return 0, false
	}
	switch x := m[name].(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint64:
		return int64(x), true
	}
	return 0, false
}
