package policy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

func TestAllows(t *testing.T) {
	k := capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.7"), Domain: "d"}
	a := capture.NewAction(capture.Assign, k, "aws", "eni-a", "a", 1, nil)
	cases := []struct {
		p    Policy
		ok   bool
		why  string
		name string
	}{
		{Policy{}, false, "automatic approval is off", "default deny"},
		{Policy{Auto: true}, false, `provider "aws" is not in the allow-list`, "empty lists deny"},
		{Policy{Auto: true, Providers: []string{"aws"}}, false, `action "assign-secondary-ip" is not in the allow-list`, "kind"},
		{Policy{Auto: true, Providers: []string{"aws"}, Kinds: []capture.Kind{capture.Assign}}, false, "address 10.0.0.7 is in no allowed CIDR", "cidr"},
		{Policy{Auto: true, Providers: []string{"aws"}, Kinds: []capture.Kind{capture.Assign}, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}}, true, "", "all match"},
		{Policy{Auto: true, Providers: []string{"oci"}, Kinds: []capture.Kind{"*"}, CIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, false, `provider "aws"`, "other provider"},
		{AllowAll(1), true, "", "allow all"},
	}
	for _, c := range cases {
		ok, why := c.p.Allows(&a)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %q, want %v %q", c.name, ok, why, c.ok, c.why)
		}
	}
}
