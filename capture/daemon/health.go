package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// A node that cannot write its state (a full disk, a file system gone
// read-only, an I/O error) can no longer persist before it acts, so it
// stops acting: it becomes unhealthy, its executor refuses every claim,
// it stops heartbeating so that its peers find it stale and take its
// addresses, and /healthz answers 503 with the reason. It stays so until
// it is restarted: a node whose writes failed may have missed its peers'
// epoch records, and a restart is the path on which it learns them again
// before acting.

// health is the node's write health.
type health struct {
	mu sync.Mutex
	// err is the first storage failure; nil while healthy.
	err error
	at  time.Time
	// stopBeats ends the federation's run (heartbeats and deliveries).
	stopBeats context.CancelFunc
	// lastProbe is when the data folder was last probed.
	lastProbe time.Time
}

// errUnhealthy wraps the storage failure that made the node unhealthy.
var errUnhealthy = errors.New("this node cannot write its state")

// storageError says whether err is the disk refusing a write, as opposed
// to a logical error (a refused row, a stale action).
func storageError(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EROFS, syscall.EIO, syscall.EDQUOT, syscall.EFBIG, berrors.ErrDatabaseReadOnly} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unhealthy returns the reason the node is unhealthy, or nil.
func (d *Daemon) unhealthy() error {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	if d.health.err == nil {
		return nil
	}
	return fmt.Errorf("%w since %s: %v", errUnhealthy, d.health.at.UTC().Format(time.RFC3339), d.health.err)
}

// noteWrite records the outcome of a write the node made (where says
// which); a storage failure makes the node unhealthy. It returns err.
func (d *Daemon) noteWrite(where string, err error) error {
	if err == nil || !storageError(err) {
		return err
	}
	d.health.mu.Lock()
	first := d.health.err == nil
	if first {
		d.health.err, d.health.at = fmt.Errorf("%s: %w", where, err), time.Now()
	}
	stop := d.health.stopBeats
	d.health.mu.Unlock()
	if !first {
		return err
	}
	d.log.Error("node unhealthy: a write failed; it stops acting and heartbeating so that its peers take its addresses; free the disk and restart it",
		"where", where, "err", err, "data_dir", d.cfg.DataDir)
	d.mets.unhealthy.Set(1)
	if stop != nil {
		stop()
	}
	d.wake.Publish(struct{}{})
	return err
}

// probeInterval spaces the probes of the data folder.
const probeInterval = time.Second

// probe writes, syncs and removes a small file in the data folder at most
// once per probeInterval: a pass that changes nothing writes nothing, and
// would not notice the disk filling up or going read-only until the
// moment it must act.
func (d *Daemon) probe() {
	d.health.mu.Lock()
	due := d.health.err == nil && time.Since(d.health.lastProbe) >= probeInterval
	if due {
		d.health.lastProbe = time.Now()
	}
	d.health.mu.Unlock()
	if !due {
		return
	}
	d.noteWrite("probing the data folder", probeDir(d.cfg.DataDir))
}

// probeDir is one probe: create, write 4 KiB, fsync, remove.
func probeDir(dir string) error {
	path := filepath.Join(dir, ".write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, 4096))
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(path)
	return errors.Join(werr, serr, cerr, rerr)
}
