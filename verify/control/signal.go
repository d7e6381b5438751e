package control

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is sig's name without "SIG", as SSH names signals.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return sig.String()
}
