package txnsim

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzConfig: Validate never panics and names a field in every error;
// Generate and Write fail exactly when Validate does, and a valid config
// gives a well-formed history.
func FuzzConfig(f *testing.F) {
	f.Add("si", "list-append", 20, 0, 0, 0, 0, 0.0, uint64(1))
	f.Add("ssi", "rw-register", 50, 3, 2, 8, 2, 0.3, uint64(2))
	f.Add("read-committed", "list-append", 1, 1, 1, 1, 1, 1.0, uint64(3))
	f.Add("prefix", "bank", -1, -1, 1<<30, 5000, -7, -0.5, uint64(0))
	fields := []string{"DB", "Workload", "Ops", "Concurrency", "Keys", "MaxTxnLen", "MaxWritesPerKey", "InfoRate"}
	f.Fuzz(func(t *testing.T, db, wl string, ops, conc, keys, txnLen, writes int, info float64, seed uint64) {
		c := Config{DB: db, Workload: wl, Ops: ops, Concurrency: conc, Keys: keys, MaxTxnLen: txnLen, MaxWritesPerKey: writes, InfoRate: info, Seed: seed}
		err := c.Validate()
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				named := false
				for _, f := range fields {
					named = named || strings.HasPrefix(line, "txnsim: "+f+" ")
				}
				if !named {
					t.Fatalf("error line %q names no field", line)
				}
			}
			if _, gerr := Generate(c); gerr == nil {
				t.Fatalf("Generate accepts %+v, which Validate rejects: %v", c, err)
			}
			return
		}
		// Keep the run small; validity does not depend on size.
		c.Ops %= 200
		c.Concurrency %= 100
		c.Keys %= 100
		var buf bytes.Buffer
		if _, err := Write(&buf, c); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if c.Ops > 0 {
			checkShape(t, c, buf.Bytes(), false)
		}
	})
}
