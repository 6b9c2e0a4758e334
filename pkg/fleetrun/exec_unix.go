//go:build !windows && !linux

package fleetrun

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the command in a process group of its own, so that
// stopping it stops what it started too.
func ownGroup(cmd *exec.Cmd, _ bool) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// terminate sends SIGTERM (or SIGKILL) to the command's process group.
func terminate(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
