// Package policy decides which journal rows are approved without an
// operator. The default denies everything: rows wait in pending until an
// operator approves them, unless a policy allows their provider, their kind
// and their address, and the run's cap is not reached.
package policy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipfence/ipfence/capture"
)

// Policy is an auto-approval rule. A list containing "*" (or, for CIDRs,
// 0.0.0.0/0) allows everything; an empty list allows nothing.
type Policy struct {
	// Auto turns automatic approval on; off, every row waits for an
	// operator.
	Auto      bool
	Providers []string
	Kinds     []capture.Kind
	CIDRs     []netip.Prefix
	// MaxPerRun caps the approvals of one reconcile pass: a bug that plans
	// thousands of moves is stopped at the cap.
	MaxPerRun int
}

// Allows reports whether the policy approves the action, and if not, why.
func (p *Policy) Allows(a *capture.Action) (bool, string) {
	switch {
	case !p.Auto:
		return false, "automatic approval is off"
	case !slices.Contains(p.Providers, a.Provider) && !slices.Contains(p.Providers, "*"):
		return false, fmt.Sprintf("provider %q is not in the allow-list", a.Provider)
	case !slices.Contains(p.Kinds, a.Kind) && !slices.Contains(p.Kinds, "*"):
		return false, fmt.Sprintf("action %q is not in the allow-list", a.Kind)
	}
	for _, c := range p.CIDRs {
		if c.Contains(a.Address) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("address %s is in no allowed CIDR", a.Address)
}

// AllowAll is a policy that approves every action, up to max per run.
func AllowAll(max int) Policy {
	return Policy{
		Auto: true, Providers: []string{"*"}, Kinds: []capture.Kind{"*"},
		CIDRs:     []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
		MaxPerRun: max,
	}
}
