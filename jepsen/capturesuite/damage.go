package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// The nemeses of a node's disk (issue 14): its data dir wiped (a replaced
// disk, a reimaged host), its state file damaged, its disk full. Each
// records what it did and what the node answered in a damageLog, which the
// "damage" checker reports and judges.

// dataDir is node n's data folder.
func (c *cluster) dataDir(n string) string {
	if c.remote != nil {
		return path.Join(c.remote.base[n], "data")
	}
	return filepath.Join(c.dir, "data", n)
}

// secretPath is the federation secret's file, as node n reads it.
func (c *cluster) secretPath(n string) string {
	if c.remote != nil {
		return path.Join(c.remote.base[n], "secret")
	}
	return filepath.Join(c.dir, "secret")
}

// diskSize is each node's tmpfs under the disk nemesis: a few times what a
// 60 s run writes, small enough to fill in a moment.
const diskSize = "16m"

// NeedsRoot says which nemeses need root, and why; Available leaves them
// out for other users.
var NeedsRoot = map[string]string{
	"disk": "it fills a tmpfs mounted as each node's data folder",
}

// Available returns the kinds of Nemeses this process can run: all of them
// as root, the others without those NeedsRoot names.
func Available() []string {
	if os.Geteuid() == 0 {
		return slices.Clone(Nemeses)
	}
	var out []string
	for _, k := range Nemeses {
		if NeedsRoot[k] == "" {
			out = append(out, k)
		}
	}
	return out
}

// damageLog is what the disk nemeses did, for the damage checker.
type damageLog struct {
	mu sync.Mutex
	// wipes: each wipe's node and what the node's status said once it was
	// back.
	wipes []string
	// passive counts wipes after which the node's first status said it
	// was not synced (a node may also sync before it is first asked).
	passive int
	// refused and accepted: corruptions the node refused to start on (the
	// error it gave), and ones it started on anyway, which is a finding.
	refused, accepted []string
	// fills: each full disk and what /healthz said while it was full.
	fills     []string
	unhealthy int
}

func (l *damageLog) add(f func(*damageLog)) {
	l.mu.Lock()
	f(l)
	l.mu.Unlock()
}

// emptyDir removes what dir holds but not dir itself, which may be a mount
// point.
func emptyDir(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return 0, err
		}
	}
	return len(ents), nil
}

// wipeFault is an operator reimaging a host: it drains the node the
// placement prefers (the first of the pool's order that is running and not
// drained: the one that, were it to forget, would take the addresses back
// at once), waits until the provider shows none of them on its NIC, kills
// it, removes everything in its data folder and starts it again. The node
// comes back a new incarnation that must learn the cluster's records — its
// drain and the epoch lines — before it acts; one that forgot without
// knowing it believes itself undrained and first, takes epoch 1 and
// seizes the addresses (issue 14). The stop undrains it. The value's node
// is used when every node is drained or down.
func wipeFault(c *cluster, log *damageLog) nemesis.Fault {
	f := wipeNode(c, log)
	start, stop := f.Start, f.Stop
	var mu sync.Mutex
	drained := map[string]bool{}
	f.Start = func(ctx context.Context, v any) (string, error) {
		n := c.preferred(ctx, nodeArg(v))
		mu.Lock()
		drained[n] = true
		mu.Unlock()
		if err := c.intent(ctx, n, "drain"); err != nil {
			return "", fmt.Errorf("draining %s before its wipe: %w", n, err)
		}
		moved := c.waitOff(ctx, n, wipeDrainWait)
		desc, err := start(ctx, map[string]any{"node": n})
		if !moved {
			desc = fmt.Sprintf("drained, its addresses still on it after %v; %s", wipeDrainWait, desc)
		} else {
			desc = "drained; " + desc
		}
		return desc, err
	}
	f.Stop = func(ctx context.Context) (string, error) {
		desc, err := stop(ctx)
		mu.Lock()
		defer mu.Unlock()
		for _, n := range slices.Sorted(maps.Keys(drained)) {
			if uerr := c.intent(ctx, n, "undrain"); uerr != nil {
				err = errors.Join(err, fmt.Errorf("undraining %s: %w", n, uerr))
				continue
			}
			delete(drained, n)
			desc += "; undrained " + n
		}
		return desc, err
	}
	return f
}

// wipeDrainWait bounds the wait for a drained node's addresses to leave it.
const wipeDrainWait = 5 * time.Second

// preferred is the first node of the pool's order that runs, the one the
// placement puts first; while a flap has it drained, preferred waits for
// the undrain (up to wipeDrainWait), since the wipe of another node, which
// would not take the addresses even were it to forget, tests nothing.
// Then it settles for the first running node no status shows drained, or
// fallback.
func (c *cluster) preferred(ctx context.Context, fallback string) string {
	drainedNow := func() map[string]bool {
		drained := map[string]bool{}
		for _, n := range c.nodes {
			st, err := c.status(ctx, n)
			if err != nil {
				continue
			}
			for _, m := range st.Members {
				if m.Drained {
					drained[m.Node] = true
				}
			}
			break
		}
		return drained
	}
	var drained map[string]bool
	for deadline := time.Now().Add(wipeDrainWait); ; time.Sleep(100 * time.Millisecond) {
		drained = drainedNow()
		for _, n := range c.nodes {
			if c.Running(n) {
				if !drained[n] {
					return n
				}
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	for _, n := range c.nodes {
		if c.Running(n) && !drained[n] {
			return n
		}
	}
	return fallback
}

// intent posts a drain or undrain of n to the first node that takes it.
func (c *cluster) intent(ctx context.Context, n, verb string) error {
	var errs []error
	for _, at := range c.nodes {
		if at == n || !c.Running(at) {
			continue
		}
		err := c.post(ctx, at, "/v1/members/"+n+"/"+verb, nil)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("at %s: %w", at, err))
	}
	return errors.Join(append(errs, fmt.Errorf("no node took the %s of %s", verb, n))...)
}

// waitOff waits up to d until the provider shows no address on n's NIC.
func (c *cluster) waitOff(ctx context.Context, n string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if c.holding(ctx)[n] == 0 {
			return true
		}
	}
	return false
}

// holding counts the addresses on each node's NIC at the provider; nil
// when the provider does not answer.
func (c *cluster) holding(ctx context.Context) map[string]int {
	placed, err := c.placement(ctx)
	if err != nil {
		return nil
	}
	count := map[string]int{}
	for _, n := range placed {
		count[n]++
	}
	return count
}

func wipeNode(c *cluster, log *damageLog) nemesis.Fault {
	return observe(nemesis.Replace(c, c.nodes, nemesis.Damage{
		Apply: func(ctx context.Context, n string, _ any) (string, error) {
			k, err := emptyDir(c.dataDir(n))
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("data dir wiped (%d files)", k), nil
		},
	}), func(ctx context.Context, v any, desc string) {
		n := nodeArg(v)
		st, err := c.status(ctx, n)
		what := desc
		switch {
		case err != nil:
			what += fmt.Sprintf("; status: %v", err)
		case !st.Synced:
			what += "; passive: " + st.Passive
		default:
			what += "; synced at its first status"
		}
		log.add(func(l *damageLog) {
			l.wipes = append(l.wipes, what)
			if err == nil && !st.Synced {
				l.passive++
			}
		})
	})
}

// Damage kinds for the corrupt nemesis: each is a state file that must be
// refused at open (issue 14: the first two crashed the node with SIGBUS,
// flipped bytes panicked bbolt or were served as 500s).
var corruptKinds = []string{"truncate-8k", "truncate-12k", "truncate-half", "truncate-0", "flip-meta"}

func corruptChoice(nodes []string) nemesis.Choose {
	return func(r *gen.Rand) any {
		return map[string]any{"node": nodes[r.IntN(len(nodes))], "kind": corruptKinds[r.IntN(len(corruptKinds))]}
	}
}

// damageState does kind to the file at path and says what it did.
func damageState(path, kind string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	switch kind {
	case "truncate-8k", "truncate-12k", "truncate-half", "truncate-0":
		size := map[string]int64{"truncate-8k": 8 << 10, "truncate-12k": 12 << 10, "truncate-half": fi.Size() / 2, "truncate-0": 0}[kind]
		size = min(size, fi.Size()-1)
		if err := os.Truncate(path, size); err != nil {
			return "", err
		}
		return fmt.Sprintf("state.db truncated from %d to %d bytes", fi.Size(), size), nil
	case "flip-meta":
		// bbolt keeps two meta pages, each with a checksum, and opens on
		// the other when one is bad: both are hit, so that the file is
		// damaged beyond what bbolt itself recovers from.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		page := int64(os.Getpagesize())
		var flipped int
		for _, base := range []int64{0, page} {
			for _, off := range []int64{16, 24, 32, 40, 48, 56, 64} {
				b := []byte{0}
				if _, err := f.ReadAt(b, base+off); err != nil {
					return "", err
				}
				b[0] ^= 0xa5
				if _, err := f.WriteAt(b, base+off); err != nil {
					return "", err
				}
				flipped++
			}
		}
		return fmt.Sprintf("%d bytes of both meta pages of state.db flipped", flipped), f.Sync()
	}
	return "", fmt.Errorf("corrupt kind %q is not one of %s", kind, strings.Join(corruptKinds, ", "))
}

// corruptFault kills a node, damages its state.db and starts it again. The
// node must refuse to start, naming the file; the stop then does what an
// operator does with a state file that cannot be read (it removes it) and
// starts the node, which comes back as a new incarnation, passive until it
// has learned the cluster's records. A node that starts on the damaged
// file is a finding.
func corruptFault(c *cluster, log *damageLog) nemesis.Fault {
	return observe(nemesis.Replace(c, c.nodes, nemesis.Damage{
		Apply: func(ctx context.Context, n string, v any) (string, error) {
			kind := stringArg(v, "kind")
			return damageState(filepath.Join(c.dataDir(n), "state.db"), kind)
		},
		Repair: func(ctx context.Context, n string) (string, error) {
			err := os.Remove(filepath.Join(c.dataDir(n), "state.db"))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
			return "damaged state.db removed", nil
		},
	}), func(ctx context.Context, v any, desc string) {
		n := nodeArg(v)
		what := desc
		log.add(func(l *damageLog) {
			if c.Running(n) {
				l.accepted = append(l.accepted, what)
			} else {
				l.refused = append(l.refused, what)
			}
		})
	})
}

// nodeArg is the node a fault's value names; stringArg any string field.
func nodeArg(v any) string { return stringArg(v, "node") }

func stringArg(v any, name string) string {
	m, _ := v.(map[string]any)
	s, _ := m[name].(string)
	return s
}

// observe runs then after each start of f that did not fail, with the
// start's value and description.
func observe(f nemesis.Fault, then func(ctx context.Context, v any, desc string)) nemesis.Fault {
	start := f.Start
	f.Start = func(ctx context.Context, v any) (string, error) {
		desc, err := start(ctx, v)
		if err == nil {
			then(ctx, v, desc)
		}
		return desc, err
	}
	return f
}

// diskFault fills a node's data folder, a tmpfs of diskSize, until writes
// fail with ENOSPC. The node must become unhealthy and stop acting, its
// peers take the addresses over; the stop frees the space and restarts the
// node (an unhealthy node stays so until restarted).
func diskFault(c *cluster, log *damageLog) nemesis.Fault {
	var mu sync.Mutex
	full := map[string]bool{}
	filler := func(n string) string { return filepath.Join(c.dataDir(n), "nemesis-filler") }
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			n := nodeArg(v)
			if !slices.Contains(c.nodes, n) {
				return "", fmt.Errorf("disk: %q is not a node", n)
			}
			mu.Lock()
			full[n] = true
			mu.Unlock()
			f, err := os.Create(filler(n))
			if err != nil {
				return n, err
			}
			chunk := make([]byte, 64<<10)
			var wrote int64
			for {
				k, err := f.Write(chunk)
				wrote += int64(k)
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				if err != nil {
					f.Close()
					return n, fmt.Errorf("filling %s's disk: %w", n, err)
				}
			}
			f.Close()
			// The node finds out at its next write or its probe of the
			// folder (once a second).
			code, body := 0, ""
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if code, body = c.healthz(ctx, n); code == 503 {
					break
				}
			}
			desc := fmt.Sprintf("%s: disk full (%d bytes of filler); /healthz %d %s", n, wrote, code, strings.TrimSpace(body))
			log.add(func(l *damageLog) {
				l.fills = append(l.fills, desc)
				if code == 503 {
					l.unhealthy++
				}
			})
			return desc, nil
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			var done []string
			var errs []error
			for _, n := range slices.Sorted(maps.Keys(full)) {
				if err := os.Remove(filler(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
					continue
				}
				if c.Running(n) {
					if err := c.Kill(n); err != nil {
						errs = append(errs, err)
						continue
					}
				}
				if err := c.Restart(ctx, n); err != nil {
					errs = append(errs, fmt.Errorf("restarting %s: %w", n, err))
					continue
				}
				delete(full, n)
				done = append(done, n)
			}
			if len(done) == 0 && len(errs) == 0 {
				return "nothing to free", nil
			}
			return "freed and restarted " + strings.Join(done, ","), errors.Join(errs...)
		},
	}
}

// mountDisks mounts a tmpfs of diskSize as every node's data folder (root
// only); the cluster's stop unmounts them.
func (c *cluster) mountDisks() error {
	for _, n := range c.nodes {
		dir := c.dataDir(n)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("the disk nemesis mounts a tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
		c.mounts = append(c.mounts, dir)
	}
	return nil
}

// unmountDisks unmounts them, lazily: a node killed a moment ago may still
// have its files open.
func (c *cluster) unmountDisks() {
	for _, dir := range c.mounts {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	c.mounts = nil
}

// damageChecker reports what the disk nemeses did and what the nodes
// answered; a node that started on a damaged state file makes it invalid
// (the other faults are judged by the fence, single-holder and
// convergence checkers).
func damageChecker(log *damageLog) checker.Checker {
	return checker.Func(func(context.Context, *checker.Run) checker.Result {
		log.mu.Lock()
		defer log.mu.Unlock()
		valid := linear.True
		if len(log.accepted) > 0 {
			valid = linear.False
		}
		return checker.Result{Valid: valid, Fields: map[string]any{
			"wipes": len(log.wipes), "passive_after_wipe": log.passive, "wiped": first(log.wipes, 10),
			"corruptions_refused": len(log.refused), "refused": first(log.refused, 10),
			"corruptions_accepted": len(log.accepted), "findings": first(log.accepted, 10), "findings_total": len(log.accepted),
			"disks_filled": len(log.fills), "unhealthy_when_full": log.unhealthy, "filled": first(log.fills, 10),
		}}
	})
}
