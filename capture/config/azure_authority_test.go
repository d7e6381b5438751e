package config

import (
	"strings"
	"testing"
)

// azure.authority_host is read as given when it is an https URL with a
// host and nothing after it, and refused with what is wrong otherwise.
func TestAzureAuthorityHost(t *testing.T) {
	withHost := func(v string) []byte {
		src := strings.Replace(azureNode, "%s", "nic-n2", 1)
		return []byte(strings.Replace(src, "resource_group: rg-web}", "resource_group: rg-web, authority_host: \""+v+"\"}", 1))
	}
	for _, ok := range []string{"https://login.microsoftonline.us/", "https://127.0.0.1:9443", "https://login.chinacloudapi.cn"} {
		n, err := Parse("azure.yaml", withHost(ok))
		if err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
		if got := n.Providers["cloud"].Azure.AuthorityHost; got != ok {
			t.Errorf("authority host %q, want %q", got, ok)
		}
	}
	for bad, msg := range map[string]string{
		"http://login.microsoftonline.us/":           "is not an https URL with a host",
		"login.microsoftonline.us":                   "is not an https URL with a host",
		"https://":                                   "is not an https URL with a host",
		"https://login.microsoftonline.us/tenant":    "must have no path",
		"https://login.microsoftonline.us/?x=1":      "without user, query or fragment",
		"https://u:p@login.microsoftonline.us/":      "without user, query or fragment",
		"https://login.microsoftonline.us/#frag":     "without user, query or fragment",
		"https://login.microsoftonline.us:notaport/": "is not an https URL with a host",
	} {
		_, err := Parse("azure.yaml", withHost(bad))
		want := "azure.yaml:10: providers.cloud.azure.authority_host: \"" + bad + "\" "
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v, want %s", bad, err, want)
		}
	}
	// Unset, it is empty: the chain's own authority.
	n, err := Parse("azure.yaml", []byte(strings.Replace(azureNode, "%s", "nic-n2", 1)))
	if err != nil || n.Providers["cloud"].Azure.AuthorityHost != "" {
		t.Fatalf("unset: %v %+v", err, n)
	}
}
