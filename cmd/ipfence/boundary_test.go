package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

const module = "github.com/ipfence/ipfence/"

// goList runs go list in the repository with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = testenv.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return strings.Fields(string(out))
}

// The rooms hold: the operator's binary links none of the toolkit and no
// test code; the library (verify) names neither the product (capture) nor
// the suites (jepsen); no package but a test imports the test-only
// helpers. Each rule is checked on what the Go toolchain resolves, so a
// new import that breaks one fails here, naming it.
func TestBoundaries(t *testing.T) {
	testenv.Program(t, "go")
	for _, dep := range goList(t, "-deps", "./cmd/ipfence") {
		for _, banned := range []string{"testing", module + "verify/", module + "jepsen/", module + "internal/testonly/",
			"go.etcd.io/etcd/", "gonum.org/v1/plot", "github.com/anishathalye/porcupine",
			module + "capture/provider/aws/ec2sim", module + "capture/provider/azure/armsim", module + "capture/provider/oci/ocisim"} {
			if dep == banned || strings.HasPrefix(dep, banned) {
				t.Errorf("the operator's binary (cmd/ipfence) links %s", dep)
			}
		}
	}
	for _, dep := range goList(t, "-deps", "./verify/...") {
		if strings.HasPrefix(dep, module+"capture") || strings.HasPrefix(dep, module+"jepsen") || strings.HasPrefix(dep, module+"cmd") {
			t.Errorf("the library (verify/...) imports %s", dep)
		}
	}
	for _, line := range goList(t, "-f", `{{.ImportPath}}:{{join .Imports ","}}`, "./...") {
		pkg, imports, _ := strings.Cut(line, ":")
		if strings.HasPrefix(pkg, module+"internal/testonly/") {
			continue
		}
		for _, imp := range strings.Split(imports, ",") {
			if strings.HasPrefix(imp, module+"internal/testonly/") {
				t.Errorf("%s imports the test-only %s outside its tests", pkg, imp)
			}
		}
	}
}
