package localcluster

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

func signalGroup(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func terminateGroup(pid int) { signalGroup(pid, 0) }
func killGroup(pid int)      { signalGroup(pid, 0) }

// isProcess cannot tell here whether pid still runs bin, so Reap leaves
// processes alone and only waits for their ports.
func isProcess(int, string) bool { return false }

// listener cannot tell here which process holds a port.
func listener(int, int) (ours, anyone, known bool) { return false, false, false }
