package config

import (
	"strings"
	"testing"
)

const azureSub = "6f0e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"

const azureNode = `node: n1
listen: 127.0.0.1:7001
data_dir: /tmp/x
peers: [{name: n2, url: "http://127.0.0.1:7002"}]
federation: {secret_file: testdata/secret}
providers:
  cloud:
    type: azure
    endpoint: https://127.0.0.1:9200
    azure: {subscription: ` + azureSub + `, resource_group: rg-web}
pools:
  - name: web
    provider: cloud
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: nic-n1}
      - {node: n2, priority: 2, target: %s}
`

// An azure provider with its subscription and resource group; members
// name their NICs by name or by resource id, which is read as the name.
func TestAzure(t *testing.T) {
	for _, target := range []string{"nic-n2", "/subscriptions/" + azureSub + "/resourceGroups/rg-web/providers/Microsoft.Network/networkInterfaces/nic-n2",
		"/subscriptions/" + strings.ToUpper(azureSub) + "/resourcegroups/RG-WEB/providers/microsoft.network/networkinterfaces/nic-n2"} {
		n, err := Parse("azure.yaml", []byte(strings.Replace(azureNode, "%s", target, 1)))
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		p := n.Providers["cloud"]
		want := Azure{SubscriptionID: azureSub, ResourceGroup: "rg-web"}
		if p.Type != TypeAzure || p.Endpoint != "https://127.0.0.1:9200" || p.Azure != want {
			t.Errorf("provider %+v, want Azure %+v", p, want)
		}
		if ms := n.Pools[0].Members; len(ms) != 2 || ms[0].Target != "nic-n1" || ms[1].Target != "nic-n2" {
			t.Errorf("%s: members %+v", target, ms)
		}
	}
}

// The same NIC by name and by id is one NIC: two members cannot share it.
func TestAzureSameNICTwice(t *testing.T) {
	src := strings.Replace(azureNode, "%s", "/subscriptions/"+azureSub+"/resourceGroups/rg-web/providers/Microsoft.Network/networkInterfaces/nic-n1", 1)
	_, err := Parse("azure.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "azure.yaml:17: pools[0].members[1].target: nic-n1 is already the target of n1 at line 16") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckGUIDAndResourceGroup(t *testing.T) {
	for s, ok := range map[string]bool{azureSub: true, strings.ToUpper(azureSub): true, "": false, "6f0e2a4c": false,
		"6f0e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5z": false, "6f0e2a4c1-b3d-4e5f-8a9b-0c1d2e3f4a5b": false} {
		if got := checkGUID(s) == ""; got != ok {
			t.Errorf("checkGUID(%q) = %q", s, checkGUID(s))
		}
	}
	for s, ok := range map[string]bool{"rg-web": true, "a.b_(c)": true, "": false, "rg.": false, "rg web": false, strings.Repeat("r", 91): false} {
		if got := checkResourceGroup(s) == ""; got != ok {
			t.Errorf("checkResourceGroup(%q) = %q", s, checkResourceGroup(s))
		}
	}
}
