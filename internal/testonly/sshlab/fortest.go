//go:build linux

package sshlab

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// ForTest builds a lab for t and closes it when t ends. Without root, ip,
// nft or sshd it skips t, or fails it under CI=true (testenv.Missing),
// naming what is missing; any other error fails t.
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
	if _, err := os.Stat(Sshd); err != nil {
		missing = append(missing, "the OpenSSH server "+Sshd+" (apt-get install openssh-server)")
	}
	if len(missing) > 0 {
		testenv.Missing(t, "SSH labs in network namespaces need %s", strings.Join(missing, " and "))
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the SSH lab: %v", err)
		}
	})
	return l
}
