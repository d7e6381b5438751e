package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Damage is what Replace does to a stopped node: the faults of the disk
// under a process (a replaced disk, a truncated file, flipped bytes)
// rather than of the process itself.
type Damage struct {
	// Apply changes the node's files while its process is down, given the
	// start's value, and says what it did.
	Apply func(ctx context.Context, node string, value any) (string, error)
	// Repair, when set, makes a node that refused to start on the damage
	// startable again (restoring from a backup, or giving it a fresh
	// state): the stop runs it, then restarts the node. When Repair is nil
	// a refused restart is an error of the start.
	Repair func(ctx context.Context, node string) (string, error)
}

// Replace kills the named nodes' processes (SIGKILL), applies the damage to
// each, and restarts it. A node that then refuses to start stays down
// until the stop, which repairs it and restarts it; the start's
// description says which nodes came back and which refused, and why.
// Refusing is what a system should do with some damage (a corrupt state
// file), so it is no error of the nemesis when Repair is set; the test
// judges it.
func Replace(p Processes, nodes []string, d Damage) Fault {
	var mu sync.Mutex
	down := map[string]bool{} // refused to start, waiting for the repair
	return Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			ns, err := targets(nodes, v)
			if err != nil {
				return "", err
			}
			var descs []string
			var errs []error
			for _, n := range ns {
				mu.Lock()
				down[n] = true // until it is back: a cut-short start is healed
				mu.Unlock()
				if err := p.Kill(n); err != nil {
					errs = append(errs, fmt.Errorf("killing %s: %w", n, err))
					continue
				}
				what, err := d.Apply(ctx, n, v)
				if err != nil {
					errs = append(errs, fmt.Errorf("damaging %s: %w", n, err))
					continue
				}
				if err := p.Restart(ctx, n); err != nil {
					if d.Repair == nil {
						errs = append(errs, fmt.Errorf("restarting %s after %s: %w", n, what, err))
						continue
					}
					descs = append(descs, fmt.Sprintf("%s: %s; restart refused: %v", n, what, err))
					continue
				}
				mu.Lock()
				delete(down, n)
				mu.Unlock()
				descs = append(descs, fmt.Sprintf("%s: %s; restarted", n, what))
			}
			return strings.Join(descs, "; "), errors.Join(errs...)
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			var errs []error
			var done []string
			for _, n := range slices.Sorted(maps.Keys(down)) {
				what := "restarted"
				if d.Repair != nil {
					w, err := d.Repair(ctx, n)
					if err != nil {
						errs = append(errs, fmt.Errorf("repairing %s: %w", n, err))
						continue
					}
					what = w + "; restarted"
				}
				if err := p.Restart(ctx, n); err != nil {
					errs = append(errs, fmt.Errorf("restarting %s: %w", n, err))
					continue
				}
				delete(down, n)
				done = append(done, n+": "+what)
			}
			if len(done) == 0 && len(errs) == 0 {
				return "nothing to repair", nil
			}
			return strings.Join(done, "; "), errors.Join(errs...)
		},
	}
}
