//go:build !linux

package runbooke2e

import "syscall"

// dieWithParent has no portable equivalent outside Linux; Close stops the
// log server.
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
