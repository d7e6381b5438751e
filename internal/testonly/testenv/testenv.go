// Package testenv finds what tests need outside the repository (the shared
// corpus, Porcupine's test data, programs such as chromium) and decides what
// happens when it is absent: the test skips with a message naming it, or
// fails when CI=true, where everything must be present.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Missing skips t, or fails it under CI=true, naming what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("required in CI: "+format, args...)
	}
	t.Skipf("skipped: "+format, args...)
}

// RepoRoot returns the directory holding the module's go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Corpus returns the shared corpus folder (../shared/corpus beside the
// repository, or $IPFENCE_CORPUS).
func Corpus(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("IPFENCE_CORPUS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "..", "shared", "corpus")
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		Missing(t, "the shared history corpus at %s (set IPFENCE_CORPUS)", dir)
	}
	return dir
}

// ModuleDir returns the module cache folder of a module the repository
// requires, such as github.com/anishathalye/porcupine.
func ModuleDir(t testing.TB, module string) string {
	t.Helper()
	root := RepoRoot(t)
	list := func() string {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	dir := list()
	if dir == "" {
		// Not downloaded yet: the module is required, so fetch it.
		cmd := exec.Command("go", "mod", "download", module)
		cmd.Dir = root
		if cmd.Run() == nil {
			dir = list()
		}
	}
	if dir == "" {
		Missing(t, "module %s in the Go module cache (go mod download %s)", module, module)
	}
	return dir
}

// Program returns the path of an executable found on PATH under any of the
// names given.
func Program(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Missing(t, "program %s on PATH", strings.Join(names, " or "))
	return ""
}

// The binaries, each built once per test process.
var (
	toolkit  built
	operator built
)

// built is a binary built once.
type built struct {
	once sync.Once
	path string
	err  error
}

// build builds ./cmd/name once (without the race detector: it runs as the
// system under test, in processes of its own) and returns its path.
func (b *built) build(t testing.TB, name string) string {
	t.Helper()
	root := RepoRoot(t)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Binary builds the toolkit's binary, ./cmd/ipfence-verify, once per test
// process and returns its path: the suites start the cloud simulator and
// their nodes (its serve, wired as the operator's) from it.
func Binary(t testing.TB) string { t.Helper(); return toolkit.build(t, "ipfence-verify") }

// Operator builds the operator's binary, ./cmd/ipfence (serve, ctl,
// doctor), once per test process and returns its path.
func Operator(t testing.TB) string { t.Helper(); return operator.build(t, "ipfence") }
