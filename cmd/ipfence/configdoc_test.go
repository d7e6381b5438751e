package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// schemaKeys are the keys capture/config's parser accepts, read from its
// source: the key lists of its fields and sub calls, which are what makes
// any other key an error.
// inspectKeys adds the keys a file of the config package checks for (the
// known keys of its fields and sub calls).
func inspectKeys(f *ast.File, seen map[string]bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		from := map[string]int{"fields": 3, "sub": 1}[sel.Sel.Name]
		if from == 0 {
			return true
		}
		for _, a := range call.Args[min(from, len(call.Args)):] {
			if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				seen[s] = true
			}
		}
		return true
	})
}

func schemaKeys(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "capture/config/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		inspectKeys(f, seen)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	if len(keys) < 40 {
		t.Fatalf("read only %d keys from schema.go: %v", len(keys), keys)
	}
	return keys
}

// yamlPaths walks a YAML document and returns every key's path, lists as
// [] and the providers' references as <ref>, and whether each is a leaf.
func yamlPaths(n *yaml.Node, prefix string, out map[string]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			yamlPaths(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if prefix == "providers" {
				k = "<ref>"
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			leaf := v.Kind == yaml.ScalarNode || v.Kind == yaml.SequenceNode && (len(v.Content) == 0 || v.Content[0].Kind == yaml.ScalarNode)
			out[p] = out[p] || leaf
			if !leaf {
				if v.Kind == yaml.SequenceNode {
					for _, c := range v.Content {
						yamlPaths(c, p+"[]", out)
					}
				} else {
					yamlPaths(v, p, out)
				}
			}
		}
	}
}

// TestConfigReference keeps docs/config.md true to the parser: its example
// files load, they hold every key the parser accepts, and its tables
// describe exactly the keys of the examples.
func TestConfigReference(t *testing.T) {
	root := testenv.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs/config.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"secret": strings.Repeat("s", 40), "operator-secret": strings.Repeat("o", 40),
		"node.crt": "cert", "node.key": "key", "ca.crt": "ca",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) != 2 {
		t.Fatalf("docs/config.md has %d yaml blocks, want the full file and the TLS one", len(blocks))
	}
	paths := map[string]bool{} // path → leaf
	for i, b := range blocks {
		path := filepath.Join(dir, "example"+strconv.Itoa(i)+".yaml")
		if _, err := config.Parse(path, []byte(b[1])); err != nil {
			t.Errorf("example %d of docs/config.md does not load:\n%v", i+1, err)
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(b[1]), &n); err != nil {
			t.Fatal(err)
		}
		yamlPaths(&n, "", paths)
	}
	last := map[string]bool{}
	for p := range paths {
		parts := strings.Split(strings.ReplaceAll(p, "[]", ""), ".")
		last[parts[len(parts)-1]] = true
	}
	for _, k := range schemaKeys(t, root) {
		if !last[k] {
			t.Errorf("key %q of capture/config is in no example of docs/config.md", k)
		}
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		if rows[m[1]] {
			t.Errorf("docs/config.md describes %s twice", m[1])
		}
		rows[m[1]] = true
		if _, ok := paths[m[1]]; !ok {
			t.Errorf("docs/config.md describes %s, which no example holds", m[1])
		}
	}
	for p, leaf := range paths {
		if leaf && !rows[p] {
			t.Errorf("docs/config.md has no row for %s", p)
		}
	}
}
