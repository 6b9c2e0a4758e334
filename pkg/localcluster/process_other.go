//go:build !linux && !windows

package localcluster

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

func terminateGroup(pid int) { signalGroup(pid, syscall.SIGTERM) }
func killGroup(pid int)      { signalGroup(pid, syscall.SIGKILL) }

// isProcess cannot tell here whether pid still runs bin, so Reap leaves
// processes alone and only waits for their ports.
func isProcess(int, string) bool { return false }

// listener cannot tell here which process holds a port.
func listener(int, int) (ours, anyone, known bool) { return false, false, false }
