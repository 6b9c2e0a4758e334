package fleetrun

import (
	"os/exec"
)

func ownGroup(*exec.Cmd, bool) {}

// terminate stops the command; Windows has no SIGTERM to give it first.
func terminate(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }
