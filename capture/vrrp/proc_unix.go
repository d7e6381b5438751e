//go:build unix

package vrrp

import (
	"os/exec"
	"syscall"
)

var sigterm = syscall.SIGTERM

// ownGroup puts the command in a process group of its own, which its
// children join, so that killGroup reaches keepalived's VRRP child too.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
