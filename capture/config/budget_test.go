package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfence/ipfence/capture/provider/callbudget"
)

// An api_budget overrides the keys it sets and keeps the type's default
// for the rest; a provider without one has none in the file (the daemon
// then uses DefaultBudget).
func TestLoadBudget(t *testing.T) {
	dir := t.TempDir()
	secret, err := os.ReadFile("testdata/secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte(`node: n1
listen: 127.0.0.1:7001
data_dir: state
federation:
  secret_file: secret
providers:
  slow:
    type: azure
    azure: {subscription: 6f0e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b, resource_group: rg}
    api_budget:
      write_burst: 20
      write_rate: 0.5
  plain:
    type: oci
    oci: {subnet: ocid1.subnet.oc1.iad.aaaa}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := callbudget.Limits{Read: callbudget.ARM.Read, Write: callbudget.Limit{Burst: 20, Rate: 0.5}}
	if got := n.Providers["slow"].Budget; got == nil || *got != want {
		t.Fatalf("slow's budget %+v, want %+v", got, want)
	}
	if got := n.Providers["plain"].Budget; got != nil {
		t.Fatalf("plain's budget %+v, want none in the file", got)
	}
	for typ, want := range map[string]callbudget.Limits{TypeAWS: callbudget.EC2, TypeCloudsim: callbudget.EC2, TypeAzure: callbudget.ARM, TypeOCI: callbudget.OCI} {
		if got, ok := DefaultBudget(typ); !ok || got != want {
			t.Errorf("DefaultBudget(%s) = %+v %v, want %+v", typ, got, ok, want)
		}
	}
	if _, ok := DefaultBudget(TypeMemory); ok {
		t.Error("the memory provider has a default API budget")
	}
}
