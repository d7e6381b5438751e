package control

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func requireSudo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sudo"); err != nil {
		testenv.Missing(t, "program sudo on PATH (apt-get install sudo)")
	}
}
