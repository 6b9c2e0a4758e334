package fleetrun

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the command in a process group of its own, so that
// stopping it stops what it started too, and kills it when the step dies
// (a killed pod takes every process of its container with it; so does a
// killed step here).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminate sends SIGTERM (or SIGKILL) to the command's process group.
func terminate(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
