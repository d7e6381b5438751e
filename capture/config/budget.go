package config

import (
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/ipfence/ipfence/capture/provider/callbudget"
)

// DefaultBudget is the API budget a cloud provider's driver paces its calls
// by when the file sets none (see callbudget for where each figure comes
// from); ok is false for types that call no cloud API.
func DefaultBudget(typ string) (l callbudget.Limits, ok bool) {
	switch typ {
	case TypeAWS, TypeCloudsim:
		return callbudget.EC2, true
	case TypeAzure:
		return callbudget.ARM, true
	case TypeOCI:
		return callbudget.OCI, true
	}
	return callbudget.Limits{}, false
}

// budgetKeys are the keys of api_budget.
var budgetKeys = []string{"read_burst", "read_rate", "write_burst", "write_rate"}

// Bounds of an api_budget's values: a bucket of more than 10,000 calls or
// a refill faster than 10,000 a second is no budget any cloud keeps.
const (
	maxBudgetBurst = 10000
	maxBudgetRate  = 10000
)

// budget checks the provider's api_budget mapping: only for a type that
// calls a cloud API; each key left out keeps the type's default. It
// returns nil when the mapping is not set.
func (p *parser) budget(ps *section, field, typ string) *callbudget.Limits {
	v, set := ps.vals["api_budget"]
	if !set {
		return nil
	}
	bf := child(field, "api_budget")
	l, ok := DefaultBudget(typ)
	if !ok {
		p.fail(v, bf, "only for types %s, %s, %s and %s, which call a cloud API", TypeAWS, TypeCloudsim, TypeAzure, TypeOCI)
		return nil
	}
	bs := p.fields(v, bf, ps.keys["api_budget"].Line, budgetKeys...)
	if bs == nil {
		return nil
	}
	burst := func(key string, dst *int) {
		n, set := bs.vals[key]
		if !set {
			return
		}
		f := child(bf, key)
		if v, ok := p.integer(n, f); ok {
			if v < 1 || v > maxBudgetBurst {
				p.fail(n, f, "must be from 1 to %d calls, found %d", maxBudgetBurst, v)
				return
			}
			*dst = v
		}
	}
	rate := func(key string, dst *float64) {
		n, set := bs.vals[key]
		if !set {
			return
		}
		f := child(bf, key)
		var v float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil {
			p.fail(n, f, "must be a number of calls a second, found %s", describe(n))
			return
		}
		if !(v > 0) || v > maxBudgetRate || math.IsInf(v, 0) {
			p.fail(n, f, "must be more than 0 and at most %d calls a second, found %s", maxBudgetRate, n.Value)
			return
		}
		*dst = v
	}
	burst("read_burst", &l.Read.Burst)
	rate("read_rate", &l.Read.Rate)
	burst("write_burst", &l.Write.Burst)
	rate("write_rate", &l.Write.Rate)
	return &l
}
