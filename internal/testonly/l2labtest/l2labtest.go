//go:build linux

// Package l2labtest builds L2 labs for tests: it skips or fails a test
// that lacks what a lab needs and closes the lab when the test ends.
package l2labtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

// New builds a lab for t and closes it when t ends, failing t if
// closing fails; first it removes the labs that dead test processes left
// (l2lab.SweepOrphans). Without root, ip or nft it skips t, or fails it under
// CI=true (testenv.Missing); any other error fails t.
func New(t testing.TB, o l2lab.Options) *l2lab.Lab {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{"ip (iproute2)", "nft (nftables)"} {
		if _, err := exec.LookPath(strings.Fields(p)[0]); err != nil {
			missing = append(missing, "the program "+p)
		}
	}
	if len(missing) > 0 {
		testenv.Missing(t, "network namespace labs need %s", strings.Join(missing, " and "))
	}
	if err := l2lab.SweepOrphans(); err != nil {
		t.Logf("removing labs of dead processes: %v", err)
	}
	l, err := l2lab.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return l
}
