//go:build e2e && linux

package gpuvalidatee2e

import "syscall"

// dieWithParent makes the KWOK log server exit with the test process.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
