package fleetrun

import (
	"os"
	"os/exec"
	"time"
)

func ownGroup(*exec.Cmd, bool) {}

// terminate stops the command; Windows has no SIGTERM to give it first.
func terminate(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }

func holderGone(string) bool { return false }

// Supervise runs argv (Windows has no process groups to stop).
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
