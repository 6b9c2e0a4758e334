package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ParseSignal reads a signal name such as SIGUSR1, USR1 or a number.
func ParseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := signals[name]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q: want SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGTERM, SIGCONT or a number", s)
}

var signals = map[string]syscall.Signal{
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "HUP": syscall.SIGHUP,
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "CONT": syscall.SIGCONT,
}

// FindProcesses returns the ids of the processes whose command name
// (/proc/PID/comm, at most 15 bytes) or first argument's base name is
// name. With shareProcessNamespace the trainer's processes are visible in
// the agent's /proc. The agent's own process is never returned.
func FindProcesses(proc, name string) ([]int, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if comm, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm")); err == nil && strings.TrimSpace(string(comm)) == name {
			out = append(out, pid)
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline")); err == nil {
			arg0, _, _ := strings.Cut(string(cmd), "\x00")
			if arg0 != "" && filepath.Base(arg0) == name {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// SignalProcesses sends sig to every process named name; it returns how
// many it signalled.
func SignalProcesses(proc, name string, sig syscall.Signal) (int, error) {
	pids, err := FindProcesses(proc, name)
	if err != nil {
		return 0, err
	}
	if len(pids) == 0 {
		return 0, fmt.Errorf("no process named %q (is shareProcessNamespace: true set on the pod?)", name)
	}
	n := 0
	var firstErr error
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("signalling process %d (%s): %w", pid, name, err)
			}
			continue
		}
		n++
	}
	return n, firstErr
}
