package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfence/ipfence/capture/auth"
)

// FuzzParse feeds Parse arbitrary files. It must never panic, and every
// outcome must be either a node that keeps the promises the daemon relies
// on, or errors that are all *Error values placed in the file.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	bad, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range append(seeds, bad...) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		// Bad files name the secret as ../secret; from testdata it is
		// secret.
		f.Add(bytes.ReplaceAll(data, []byte("../"), nil))
	}
	// The path only places relative files: testdata/secret and testdata/tls.
	const path = "testdata/fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Parse(path, data)
		if err != nil {
			if n != nil {
				t.Fatalf("a node as well as an error: %v", err)
			}
			for _, e := range configErrors(t, err) {
				if e.File != path || e.Line < 0 || e.Msg == "" {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		if checkName(n.Name) != "" || n.Advertise == "" || n.StatePath != filepath.Join(n.DataDir, "state.db") {
			t.Fatalf("node %q, advertise %q, data_dir %q, state %q", n.Name, n.Advertise, n.DataDir, n.StatePath)
		}
		if (n.Federation.TLS == nil) == (n.Federation.Secret == nil) || (n.Federation.TLS == nil && len(n.Federation.Secret) < auth.MinSecretLen) {
			t.Fatalf("federation %+v", n.Federation)
		}
		if n.Timing.HeartbeatTTL <= n.Timing.HeartbeatInterval || n.Timing.ReconcileInterval <= 0 {
			t.Fatalf("timing %+v", n.Timing)
		}
		seen := make(map[string]bool)
		for _, pool := range n.Pools {
			if _, ok := n.Providers[pool.Provider]; !ok {
				t.Fatalf("pool %s names provider %q, not among %v", pool.Name, pool.Provider, n.Providers)
			}
			if len(pool.Addresses) == 0 || len(pool.Members) == 0 {
				t.Fatalf("pool %+v", pool)
			}
			for _, a := range pool.Addresses {
				if seen[a.String()] {
					t.Fatalf("address %s twice", a)
				}
				seen[a.String()] = true
			}
			for _, m := range pool.Members {
				if m.Priority < 0 || m.Target == "" || m.Drained || m.Stale {
					t.Fatalf("member %+v", m)
				}
			}
		}
	})
}
