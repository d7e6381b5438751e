package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// TypeOCI is the provider type of Oracle Cloud Infrastructure: secondary
// private IPs on VNICs. Members' targets are VNIC OCIDs.
const TypeOCI = "oci"

// OCI configures the OCI driver. Credentials are never in the file: they
// come from the SDK's chain, the OCI config file (and the OCI_*
// environment) or the instance's own principal.
type OCI struct {
	// SubnetID is the OCID of the subnet the members' VNICs are in
	// (required): a private IP is found by subnet and address.
	SubnetID string
	// Auth is "config_file" (the default) or "instance_principal".
	Auth string
	// Profile is the config file's profile; empty means DEFAULT. Only
	// with auth config_file.
	Profile string
}

// OCI auth values.
const (
	OCIAuthConfigFile        = "config_file"
	OCIAuthInstancePrincipal = "instance_principal"
)

// ociSecretKeys are keys of an OCI config file that hold or point at
// credentials: refused with a message that says where they belong.
var ociSecretKeys = []string{"key_file", "private_key", "pass_phrase", "passphrase", "fingerprint", "user", "tenancy", "security_token_file"}

// maxOCID bounds an OCID's length; OCI's are well under it.
const maxOCID = 255

// checkOCID says what is wrong with id as an OCID of the given resource
// type ("vnic", "subnet"), or "" when nothing is: ocid1.<type>.<realm>.…
func checkOCID(id, typ string) string {
	switch {
	case id == "":
		return "must not be empty"
	case len(id) > maxOCID:
		return "is longer than an OCID"
	case strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' }):
		return "holds spaces, slashes or control characters, which no OCID does"
	case !strings.HasPrefix(id, "ocid1."+typ+"."):
		return "is not a " + typ + " OCID (ocid1." + typ + ".<realm>.<region>.<id>)"
	case strings.Count(id, ".") < 4:
		return "is not a whole OCID (ocid1." + typ + ".<realm>.<region>.<id>)"
	}
	return ""
}

// oci checks the provider's oci mapping: required for type oci, refused
// with any other type.
func (p *parser) oci(ps *section, field, typ string) OCI {
	if typ != TypeOCI {
		if v, ok := ps.vals["oci"]; ok {
			p.fail(v, child(field, "oci"), "only for type oci")
		}
		return OCI{}
	}
	var o OCI
	v, set := ps.vals["oci"]
	if !set {
		p.failAt(ps.absent("oci"), child(field, "oci"), "required for type oci: {subnet: ocid1.subnet.…, auth: config_file|instance_principal}")
		return o
	}
	of := child(field, "oci")
	if v.Kind == yaml.MappingNode {
		// A credential is refused with where it belongs, and left out
		// of the check for unknown keys so it is reported once.
		kept := *v
		kept.Content = nil
		for i := 0; i+1 < len(v.Content); i += 2 {
			if k := v.Content[i]; k.Kind == yaml.ScalarNode && containsFold(ociSecretKeys, k.Value) {
				p.fail(k, child(of, k.Value), "credentials never go in this file: the OCI SDK reads them from its config file (~/.oci/config or OCI_CONFIG_FILE, with auth: config_file and profile) or from the instance principal (auth: instance_principal)")
				continue
			}
			kept.Content = append(kept.Content, v.Content[i], v.Content[i+1])
		}
		v = &kept
	}
	os := p.fields(v, of, ps.keys["oci"].Line, "subnet", "auth", "profile")
	if os == nil {
		return o
	}
	if sub, sn := os.text(p, "subnet", true); sn != nil {
		if msg := checkOCID(sub, "subnet"); msg != "" {
			p.fail(sn, child(os.field, "subnet"), "%q %s", sub, msg)
		}
		o.SubnetID = sub
	}
	o.Auth = OCIAuthConfigFile
	if a, an := os.text(p, "auth", false); an != nil {
		if a != OCIAuthConfigFile && a != OCIAuthInstancePrincipal {
			p.fail(an, child(os.field, "auth"), "%q: want %s or %s", a, OCIAuthConfigFile, OCIAuthInstancePrincipal)
		}
		o.Auth = a
	}
	if prof, pn := os.text(p, "profile", false); pn != nil {
		if prof == "" {
			p.fail(pn, child(os.field, "profile"), "must not be empty; leave profile out for DEFAULT")
		} else if o.Auth != OCIAuthConfigFile {
			p.fail(pn, child(os.field, "profile"), "only with auth %s: an instance principal has no profile", OCIAuthConfigFile)
		}
		o.Profile = prof
	}
	return o
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// checkTarget checks a member's target against its provider's type: for
// oci, a VNIC OCID.
func (p *parser) checkTarget(typ string, n *yaml.Node, field, target string) {
	if typ == TypeOCI && strings.TrimSpace(target) != "" {
		if msg := checkOCID(target, "vnic"); msg != "" {
			p.fail(n, field, "%q %s: the OCID of the member's VNIC", target, msg)
		}
	}
}
