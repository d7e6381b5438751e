package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/cli"
)

func TestServeBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	os.WriteFile(path, []byte("node: n1\nlisten: nowhere\ndata_dir: d\nbogus: 1\n"), 0o600)
	code, _, stderr := runCLI("serve", "--config", path)
	if code != cli.ExitError {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{path + ":2: listen:", path + ":4: bogus:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := runCLI("serve"); code != cli.ExitError || !strings.Contains(stderr, "--config is required") {
		t.Errorf("no config: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI("serve", "--config", filepath.Join(dir, "missing.yaml")); code != cli.ExitError || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing config: %d %s", code, stderr)
	}
}
