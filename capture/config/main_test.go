package config

import (
	"fmt"
	"os"
	"testing"
)

// TestMain makes the secret files the tests read private, as Load
// requires: git keeps no file modes but the executable bit, so a fresh
// clone has them readable by every user.
func TestMain(m *testing.M) {
	for _, f := range []string{"testdata/secret", "testdata/short-secret", "../../examples/cluster/secret", "../../examples/onprem/secret"} {
		if err := os.Chmod(f, 0o600); err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// This one is the case of a secret left readable by every user.
	if err := os.Chmod("testdata/world-readable-secret", 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
