//go:build !linux

package fleetrun

import (
	"errors"
	"io"
	"os/exec"
	"time"
)

// holderGone: only Linux tells (supervise_linux.go); elsewhere a dead
// holder's step is taken over once its heartbeat is stale.
func holderGone(string) bool { return false }

// Supervise only runs argv outside Linux, which has no parent-death signal
// to tell it that the step died.
func Supervise(argv []string, stdin io.Reader, stdout, stderr io.Writer, _ time.Duration) int {
	if len(argv) == 0 {
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 2
	}
	return 0
}
