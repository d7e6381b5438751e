package nemesis

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
)

// A fault's value comes from a generator or from a history being replayed:
// whatever it holds, reading it gives a grudge over the nodes or an error,
// never a panic.
func FuzzFaultValues(f *testing.F) {
	for _, s := range []string{`{"shape":"isolate","node":"n2"}`, `{"shape":"random-halves","seed":7}`, `{"nodes":["n1","n3"]}`,
		`{"node":"n9"}`, `{"shape":3}`, `[1,2]`, `null`, `{"nodes":[1]}`, `{"node":"n1","offset":"-3s"}`} {
		f.Add(s)
	}
	nodes := []string{"n1", "n2", "n3"}
	f.Fuzz(func(t *testing.T, s string) {
		var raw any
		if json.Unmarshal([]byte(s), &raw) != nil {
			return
		}
		// As a replayed history holds it: numbers as int64 where whole.
		v, err := history.ParseValue(s)
		if err != nil {
			v = raw
		}
		for _, val := range []any{raw, v} {
			if g, err := Grudge(nodes, val); err == nil {
				for _, n := range g.Nodes() {
					if !slices.Contains(nodes, n) {
						t.Fatalf("grudge %v names %q", g, n)
					}
				}
			} else if err.Error() == "" {
				t.Fatal("empty error")
			}
			if ns, err := targets(nodes, val); err == nil {
				for _, n := range ns {
					if !slices.Contains(nodes, n) {
						t.Fatalf("targets %v", ns)
					}
				}
			}
		}
	})
}
