// Command peakrss runs a command and prints its peak RSS in KiB on the
// last line of stderr ("peakrss: N"), exiting with the command's code.
//
// Benchmarks measure a plugin process with it instead of starting the
// plugin themselves: Linux counts the memory a parent had in use when it
// started a child into that child's ru_maxrss (os/exec shares the parent's
// memory until exec), so a plugin started straight from a test binary of
// 60 MB never shows less than 60 MB. This command is small, so what it
// reports is the plugin's own peak.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peakrss COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintf(os.Stderr, "peakrss: %d\n", ru.Maxrss)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
