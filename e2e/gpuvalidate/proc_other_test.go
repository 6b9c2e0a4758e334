//go:build e2e && !linux

package gpuvalidatee2e

import "syscall"

// dieWithParent has no portable equivalent outside Linux; the log server
// lives in the plane's directory and is left to the operating system.
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
