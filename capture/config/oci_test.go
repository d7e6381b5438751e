package config

import (
	"strings"
	"testing"
)

const ociNode = `node: n1
listen: 127.0.0.1:7001
data_dir: /tmp/x
peers: [{name: n2, url: "http://127.0.0.1:7002"}]
federation: {secret_file: testdata/secret}
providers:
  cloud:
    type: oci
    region: us-ashburn-1
    endpoint: http://127.0.0.1:9100
    oci: {subnet: ocid1.subnet.oc1.iad.aaaasub%s}
pools:
  - name: web
    provider: cloud
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: ocid1.vnic.oc1.iad.aaaan1}
      - {node: n2, priority: 2, target: ocid1.vnic.oc1.iad.aaaan2}
`

// An oci provider with its subnet and the members' VNIC OCIDs; auth
// config_file by default, a profile with it, the instance principal
// without.
func TestOCI(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  OCI
	}{
		{"", OCI{SubnetID: "ocid1.subnet.oc1.iad.aaaasub", Auth: OCIAuthConfigFile}},
		{", profile: PROD", OCI{SubnetID: "ocid1.subnet.oc1.iad.aaaasub", Auth: OCIAuthConfigFile, Profile: "PROD"}},
		{", auth: instance_principal", OCI{SubnetID: "ocid1.subnet.oc1.iad.aaaasub", Auth: OCIAuthInstancePrincipal}},
	} {
		n, err := Parse("oci.yaml", []byte(strings.Replace(ociNode, "%s", c.extra, 1)))
		if err != nil {
			t.Fatalf("%q: %v", c.extra, err)
		}
		p := n.Providers["cloud"]
		if p.Type != TypeOCI || p.Region != "us-ashburn-1" || p.Endpoint != "http://127.0.0.1:9100" || p.OCI != c.want {
			t.Errorf("%q: provider %+v, want OCI %+v", c.extra, p, c.want)
		}
		if ms := n.Pools[0].Members; len(ms) != 2 || ms[0].Target != "ocid1.vnic.oc1.iad.aaaan1" || ms[1].Target != "ocid1.vnic.oc1.iad.aaaan2" {
			t.Errorf("%q: members %+v", c.extra, ms)
		}
	}
}

func TestCheckOCID(t *testing.T) {
	for id, want := range map[string]string{
		"ocid1.vnic.oc1.iad.abc":   "",
		"ocid1.vnic.oc1..abc":      "",
		"":                         "must not be empty",
		"ocid1.subnet.oc1.iad.abc": "is not a vnic OCID",
		"ocid1.vnic.abc":           "is not a whole OCID",
		"ocid1.vnic.oc1.iad.a b":   "spaces",
		"ocid1.vnic.oc1.iad.a/b":   "slashes",
		"ocid1.vnic.oc1.iad." + strings.Repeat("a", 300): "longer",
	} {
		got := checkOCID(id, "vnic")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("checkOCID(%.30q) = %q, want %q", id, got, want)
		}
	}
}
