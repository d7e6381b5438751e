//go:build !unix

package vrrp

import (
	"os"
	"os/exec"
)

var sigterm = os.Kill

func ownGroup(*exec.Cmd) {}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
