package config

import (
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TypeAzure is the provider type of Azure: secondary private IPs as
// ipConfigurations of network interfaces. Members' targets are NIC names
// in the provider's resource group, or the NICs' full resource ids.
const TypeAzure = "azure"

// Azure configures the Azure driver. Credentials are never in the file:
// azidentity's default chain finds them (the AZURE_* environment, workload
// identity, the VM's managed identity, the Azure CLI's login).
type Azure struct {
	// SubscriptionID holds the members' NICs (required): a GUID.
	SubscriptionID string
	// ResourceGroup holds the members' NICs (required).
	ResourceGroup string
	// AuthorityHost is the Microsoft Entra ID authority tokens come
	// from, an https URL such as https://login.microsoftonline.us/ for a
	// sovereign cloud; empty means the chain's (AZURE_AUTHORITY_HOST, else
	// the public cloud's). Setting it turns instance discovery off, so a
	// host Microsoft does not know (a disconnected cloud's) is never
	// vouched for at login.microsoftonline.com.
	AuthorityHost string
}

// azureSecretKeys are keys that would put a credential in the file,
// refused with a message that says where credentials come from.
var azureSecretKeys = []string{"client_secret", "secret", "password", "client_certificate", "client_certificate_password", "certificate", "token", "access_token", "client_id", "tenant_id"}

// azureCredentials says where the driver's credentials come from.
const azureCredentials = "credentials never go in this file: azidentity's default chain reads them from the environment (AZURE_TENANT_ID, AZURE_CLIENT_ID with AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH), workload identity, the VM's managed identity or the Azure CLI's login"

// checkGUID says what is wrong with s as a subscription id, or "".
func checkGUID(s string) string {
	parts := strings.Split(s, "-")
	want := []int{8, 4, 4, 4, 12}
	if len(parts) != len(want) {
		return "is not a subscription id (a GUID such as 00000000-0000-0000-0000-000000000000)"
	}
	for i, part := range parts {
		if len(part) != want[i] || strings.Trim(part, "0123456789abcdefABCDEF") != "" {
			return "is not a subscription id (a GUID such as 00000000-0000-0000-0000-000000000000)"
		}
	}
	return ""
}

// checkResourceGroup says what is wrong with a resource group name, or
// "": Azure allows 1 to 90 letters, digits, underscores, hyphens, periods
// and parentheses, not ending in a period.
func checkResourceGroup(s string) string {
	switch {
	case s == "" || len(s) > 90:
		return "must be 1 to 90 characters"
	case strings.HasSuffix(s, "."):
		return "must not end in a period"
	case strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '(' || r == ')' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}):
		return "may hold only letters, digits, _ - . ( and )"
	}
	return ""
}

// checkAuthorityHost says what is wrong with an authority host, or "":
// azidentity accepts only https, and MSAL puts the tenant after the host,
// so a path, query or fragment would end up in every token request.
func checkAuthorityHost(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return "is not an https URL with a host, such as https://login.microsoftonline.us/"
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return "must be only https://host[:port]/, without user, query or fragment"
	case u.Path != "" && u.Path != "/":
		return "must have no path: the tenant is put after the host"
	}
	return ""
}

// azure checks the provider's azure mapping: required for type azure,
// refused with any other type.
func (p *parser) azure(ps *section, field, typ string) Azure {
	if typ != TypeAzure {
		if v, ok := ps.vals["azure"]; ok {
			p.fail(v, child(field, "azure"), "only for type azure")
		}
		return Azure{}
	}
	var a Azure
	v, set := ps.vals["azure"]
	if !set {
		p.failAt(ps.absent("azure"), child(field, "azure"), "required for type azure: {subscription: <GUID>, resource_group: <name>}")
		return a
	}
	af := child(field, "azure")
	if v.Kind == yaml.MappingNode {
		// A credential is refused with where it belongs, and left out
		// of the check for unknown keys so it is reported once.
		kept := *v
		kept.Content = nil
		for i := 0; i+1 < len(v.Content); i += 2 {
			if k := v.Content[i]; k.Kind == yaml.ScalarNode && containsFold(azureSecretKeys, k.Value) {
				p.fail(k, child(af, k.Value), "%s", azureCredentials)
				continue
			}
			kept.Content = append(kept.Content, v.Content[i], v.Content[i+1])
		}
		v = &kept
	}
	as := p.fields(v, af, ps.keys["azure"].Line, "subscription", "resource_group", "authority_host")
	if as == nil {
		return a
	}
	if sub, sn := as.text(p, "subscription", true); sn != nil {
		if msg := checkGUID(sub); msg != "" {
			p.fail(sn, child(af, "subscription"), "%q %s", sub, msg)
		}
		a.SubscriptionID = sub
	}
	if rg, rn := as.text(p, "resource_group", true); rn != nil {
		if msg := checkResourceGroup(rg); msg != "" {
			p.fail(rn, child(af, "resource_group"), "%q %s", rg, msg)
		}
		a.ResourceGroup = rg
	}
	if ah, an := as.text(p, "authority_host", false); an != nil {
		if msg := checkAuthorityHost(ah); msg != "" {
			p.fail(an, child(af, "authority_host"), "%q %s", ah, msg)
		}
		a.AuthorityHost = ah
	}
	return a
}

// azureNIC reads a member's target for an Azure provider: a NIC name in
// the provider's resource group, or the NIC's full resource id, which must
// name that subscription and resource group. It returns the name, or
// what is wrong.
func azureNIC(a Azure, target string) (string, string) {
	if !strings.HasPrefix(target, "/") {
		if len(target) > 80 || strings.ContainsAny(target, "/?#%\\") || strings.ContainsFunc(target, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return "", "is not a NIC name (1 to 80 characters without spaces, / ? # % \\) nor a NIC's resource id"
		}
		return target, ""
	}
	segs := strings.Split(strings.TrimPrefix(target, "/"), "/")
	eq := strings.EqualFold
	if len(segs) != 8 || !eq(segs[0], "subscriptions") || !eq(segs[2], "resourceGroups") || !eq(segs[4], "providers") ||
		!eq(segs[5], "Microsoft.Network") || !eq(segs[6], "networkInterfaces") || segs[7] == "" {
		return "", "is not a NIC's resource id (/subscriptions/<GUID>/resourceGroups/<name>/providers/Microsoft.Network/networkInterfaces/<name>)"
	}
	if a.SubscriptionID != "" && !eq(segs[1], a.SubscriptionID) || a.ResourceGroup != "" && !eq(segs[3], a.ResourceGroup) {
		return "", fmt.Sprintf("is in subscription %s, resource group %s; the provider acts in %s, %s", segs[1], segs[3], a.SubscriptionID, a.ResourceGroup)
	}
	return azureNIC(a, segs[7])
}

// azureTarget checks a member's target for an Azure provider and returns
// it as a NIC name, which is what the driver reports NICs by; a bad one is
// reported and returned as given.
func (p *parser) azureTarget(a Azure, n *yaml.Node, field, target string) string {
	name, msg := azureNIC(a, target)
	if msg != "" {
		p.fail(n, field, "%q %s", target, msg)
		return target
	}
	return name
}
