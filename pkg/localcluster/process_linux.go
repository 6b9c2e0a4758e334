package localcluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

func terminateGroup(pid int) { signalGroup(pid, syscall.SIGTERM) }
func killGroup(pid int)      { signalGroup(pid, syscall.SIGKILL) }

// isProcess reports whether pid is alive and runs bin, so that a pid the
// system gave to another program since is left alone. A zombie has no
// executable any more, and has closed its sockets.
func isProcess(pid int, bin string) bool {
	if pid <= 0 {
		return false
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	if want, err := filepath.EvalSymlinks(bin); err == nil {
		bin = want
	}
	return exe == bin
}
