//go:build !windows && !linux

package fleetrun

import (
	"os"
	"os/exec"
	"syscall"
	"time"
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

// holderGone: only Linux tells (supervise_linux.go).
func holderGone(string) bool { return false }

// Supervise runs argv (Linux only supervises; elsewhere it only runs it).
func Supervise(argv []string, _ time.Duration) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 2
	}
	return 0
}
