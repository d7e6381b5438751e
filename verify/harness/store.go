package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Store file names inside a run's folder.
const (
	HistoryFile  = "history.jsonl"
	ResultsFile  = "results.json"
	CommandFile  = "command"
	SeedFile     = "seed"
	TimelineFile = "timeline.html"
	LatencyFile  = "latency.png"
	RateFile     = "rate.png"
	LogDir       = "logs"
)

// timestampLayout names a run's folder: sortable, and free of characters
// that shells or other file systems mind.
const timestampLayout = "20060102T150405.000Z"

// NewRunDir makes store/<test>/<timestamp>/. The timestamp is UTC, in
// milliseconds; a run that starts within the same millisecond as another
// gets a suffix. store/<test>/latest and store/latest are pointed at the
// folder only once the run is complete, when its results.json is written
// (see publish): a run that never started or died halfway never becomes
// "latest".
func NewRunDir(store, test string, now time.Time) (string, error) {
	if test == "" || strings.ContainsAny(test, `/\`) || test == "." || test == ".." || test == "latest" {
		return "", fmt.Errorf("test name %q cannot name a folder", test)
	}
	base := filepath.Join(store, test)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	// A link the run could not replace at the end is refused now, before
	// the run spends its minute.
	for _, l := range []string{filepath.Join(base, "latest"), filepath.Join(store, "latest")} {
		if err := checkLink(l); err != nil {
			return "", err
		}
	}
	stamp := now.UTC().Format(timestampLayout)
	dir := filepath.Join(base, stamp)
	for i := 1; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !os.IsExist(err) || i > 1000 {
			return "", err
		}
		dir = filepath.Join(base, fmt.Sprintf("%s-%d", stamp, i))
	}
	if err := os.Mkdir(filepath.Join(dir, LogDir), 0o755); err != nil {
		return "", err
	}
	pendingMu.Lock()
	pending[dir] = runDir{store: store, test: test}
	pendingMu.Unlock()
	return dir, nil
}

// runDir is where NewRunDir made a run's folder.
type runDir struct{ store, test string }

// pending are the folders NewRunDir made whose runs have not yet written
// their results: the ones publish may point the latest links at.
var (
	pendingMu sync.Mutex
	pending   = map[string]runDir{}
)

// publish points store/<test>/latest and store/latest at dir, a folder
// NewRunDir made, once its results are on disk. Folders given to the
// harness from elsewhere (Test.Dir of a folder NewRunDir did not make)
// are left alone.
func publish(dir string) error {
	pendingMu.Lock()
	rd, ok := pending[dir]
	delete(pending, dir)
	pendingMu.Unlock()
	if !ok {
		return nil
	}
	rel := filepath.Base(dir)
	if err := relink(filepath.Join(rd.store, rd.test, "latest"), rel); err != nil {
		return err
	}
	return relink(filepath.Join(rd.store, "latest"), filepath.Join(rd.test, rel))
}

// checkLink refuses a path that exists and is not a symbolic link: the
// latest links replace only links.
func checkLink(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s exists and is not a symbolic link; move it away", path)
	}
	return nil
}

// relink points the symbolic link at path to target, replacing whatever
// link was there atomically (a rename over it), so a reader never finds
// the link missing.
func relink(path, target string) error {
	if err := checkLink(path); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeJSON writes v, indented, to dir/name through a temporary file, so
// that the file is either the old one or the whole new one. Writing
// results.json completes a run: the latest links then point at it.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(dir, name, append(b, '\n')); err != nil {
		return err
	}
	if name == ResultsFile {
		return publish(dir)
	}
	return nil
}

func writeFile(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// ShellQuote renders args as one line a POSIX shell reads back as the same
// words.
func ShellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
