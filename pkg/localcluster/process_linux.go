package localcluster

import (
	"fmt"
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

// listener says who listens on TCP port (any local address): whether
// process pid itself holds such a socket (ours), whether any process in
// its network namespace does (anyone), and whether /proc could tell
// (known). A health check answered while another program holds a port the
// component could not bind must not be taken for the component.
func listener(pid, port int) (ours, anyone, known bool) {
	inodes := map[string]bool{}
	hexPort := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/" + f)
		if err != nil {
			return false, false, false
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// local_address is field 1, st field 3 (0A: LISTEN), inode field 9.
			if len(fs) > 9 && fs[3] == "0A" && strings.HasSuffix(fs[1], hexPort) {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false, false, true
	}
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, true, false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && inodes[l] {
			return true, true, true
		}
	}
	return false, true, true
}
