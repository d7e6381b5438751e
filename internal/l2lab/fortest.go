//go:build linux

package l2lab

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testenv"
)

// ForTest builds a lab for t and closes it when t ends, failing t if
// closing fails; first it removes the labs that dead test processes left
// (SweepOrphans). Without root, ip or nft it skips t, or fails it under
// CI=true (testenv.Missing); any other error fails t.
func ForTest(t testing.TB, o Options) *Lab {
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
	if err := SweepOrphans(); err != nil {
		t.Logf("removing labs of dead processes: %v", err)
	}
	l, err := New(o)
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
