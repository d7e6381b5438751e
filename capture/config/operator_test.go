package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The operator API's own secret: read like the federation's, and refused
// when it is the federation's, which would let every operator sign node
// events.
func TestOperatorSecret(t *testing.T) {
	dir := t.TempDir()
	fed, op := filepath.Join(dir, "fed"), filepath.Join(dir, "op")
	if err := os.WriteFile(fed, []byte(strings.Repeat("f", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(op, []byte(strings.Repeat("o", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := func(opFile string) []byte {
		return []byte(`node: n1
listen: 127.0.0.1:7001
data_dir: data
federation: {secret_file: fed, operator_secret_file: ` + opFile + `}
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: eni-n1}
`)
	}
	n, err := Parse(filepath.Join(dir, "n1.yaml"), doc("op"))
	if err != nil {
		t.Fatal(err)
	}
	if string(n.Federation.OperatorSecret) != strings.Repeat("o", 40) || string(n.Federation.Secret) != strings.Repeat("f", 40) {
		t.Fatalf("secrets %q %q", n.Federation.OperatorSecret, n.Federation.Secret)
	}
	_, err = Parse(filepath.Join(dir, "n1.yaml"), doc("fed"))
	if err == nil || !strings.Contains(err.Error(), "n1.yaml:4") || !strings.Contains(err.Error(), "federation.operator_secret_file") || !strings.Contains(err.Error(), "must differ") {
		t.Fatalf("the same secret twice: %v", err)
	}
	_, err = Parse(filepath.Join(dir, "n1.yaml"), doc("missing"))
	if err == nil || !strings.Contains(err.Error(), "federation.operator_secret_file") || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a missing operator secret: %v", err)
	}
}
