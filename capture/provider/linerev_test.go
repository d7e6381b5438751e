package provider_test

import (
	"slices"
	"testing"

	"github.com/ipfence/ipfence/capture/provider"
)

// The line-revision header's value: written only when a request carries a
// revision, one per request in order; read back only as positive decimals.
func TestLineRevisions(t *testing.T) {
	for _, c := range []struct {
		revs []int64
		want string
	}{{nil, ""}, {[]int64{0}, ""}, {[]int64{0, 0}, ""}, {[]int64{98}, "98"}, {[]int64{98, 101}, "98,101"}} {
		reqs := make([]provider.Request, len(c.revs))
		for i, r := range c.revs {
			reqs[i].LineRevision = r
		}
		if got := provider.LineRevisions(reqs...); got != c.want {
			t.Errorf("%v: %q, want %q", c.revs, got, c.want)
		}
		if c.want == "" {
			continue
		}
		if back, err := provider.ParseLineRevisions(c.want); err != nil || !slices.Equal(back, c.revs) {
			t.Errorf("%q read back as %v (%v)", c.want, back, err)
		}
	}
	for _, bad := range []string{"", "0", "-1", "+1", " 1", "1,", ",1", "1,,2", "x", "9223372036854775808", "1.5"} {
		if got, err := provider.ParseLineRevisions(bad); err == nil {
			t.Errorf("%q read as %v", bad, got)
		}
	}
}
