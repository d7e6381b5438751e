package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// NewRunDir makes store/<test>/<timestamp>/ and points store/<test>/latest
// and store/latest at it. The timestamp is UTC, in milliseconds; a run that
// starts within the same millisecond as another gets a suffix.
func NewRunDir(store, test string, now time.Time) (string, error) {
	if test == "" || strings.ContainsAny(test, `/\`) || test == "." || test == ".." || test == "latest" {
		return "", fmt.Errorf("test name %q cannot name a folder", test)
	}
	base := filepath.Join(store, test)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
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
	rel := filepath.Base(dir)
	if err := relink(filepath.Join(base, "latest"), rel); err != nil {
		return "", err
	}
	if err := relink(filepath.Join(store, "latest"), filepath.Join(test, rel)); err != nil {
		return "", err
	}
	return dir, nil
}

// relink points the symbolic link at path to target, replacing whatever
// link was there atomically (a rename over it), so a reader never finds
// the link missing.
func relink(path, target string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s exists and is not a symbolic link; move it away", path)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeJSON writes v, indented, to dir/name through a temporary file, so
// that the file is either the old one or the whole new one.
func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(dir, name, append(b, '\n'))
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
