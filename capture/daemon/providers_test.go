package daemon

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/oci"
)

const cloudNode = `node: n1
listen: 127.0.0.1:7001
data_dir: /tmp/x
peers: [{name: n2, url: "http://127.0.0.1:7002"}]
federation: {secret_file: %SECRET%}
providers:
  az:
    type: azure
    endpoint: https://127.0.0.1:9200
    azure: {subscription: 00000000-0000-4000-8000-000000000001, resource_group: rg-web}
  oc:
    type: oci
    endpoint: https://127.0.0.1:9300
    region: us-ashburn-1
    oci: {subnet: ocid1.subnet.oc1.iad.aaaa}
pools:
  - name: web
    provider: az
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: nic-n1}
      - {node: n2, priority: 2, target: nic-n2}
  - name: db
    provider: oc
    addresses: [10.0.1.10]
    members:
      - {node: n1, priority: 1, target: ocid1.vnic.oc1.iad.n1}
      - {node: n2, priority: 2, target: ocid1.vnic.oc1.iad.n2}
`

// The daemon builds the Azure and OCI drivers a config names, with their
// credentials from the SDKs' chains: an OCI config file here (no request
// is made), azidentity's default chain for Azure (built without a
// request). Without an OCI config file, the daemon refuses to start and
// names the provider.
func TestProvidersBuildAzureAndOCI(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("cloud.yaml", []byte(strings.ReplaceAll(cloudNode, "%SECRET%", secret)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	ociConfig := filepath.Join(dir, "oci-config")
	if err := os.WriteFile(ociConfig, []byte("[DEFAULT]\nuser=ocid1.user.oc1..u\nfingerprint=aa:bb\ntenancy=ocid1.tenancy.oc1..t\nregion=us-ashburn-1\nkey_file="+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("OCI_CONFIG_FILE", ociConfig)
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	ps, err := providers(t.Context(), cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps["az"].(*azure.Driver); !ok {
		t.Errorf("provider az is %T, want *azure.Driver", ps["az"])
	}
	if _, ok := ps["oc"].(*oci.Driver); !ok {
		t.Errorf("provider oc is %T, want *oci.Driver", ps["oc"])
	}

	t.Setenv("OCI_CONFIG_FILE", filepath.Join(dir, "absent"))
	_, err = providers(t.Context(), cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "provider oc: oci:") {
		t.Fatalf("without an OCI config file: %v, want an error naming provider oc", err)
	}
}
