//go:build linux

package runbooke2e

import "syscall"

// dieWithParent makes the KWOK log server exit with the test process.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
