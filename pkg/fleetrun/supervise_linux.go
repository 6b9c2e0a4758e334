package fleetrun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownGroup starts the command in a process group of its own, so that
// stopping it stops what it started too. With a supervisor the command is
// the supervisor, which the kernel tells with SIGTERM when the step dies
// (however it dies: SIGKILL included), and which then stops the whole
// group; without one the command itself is killed with the step, but not
// what it started.
func ownGroup(cmd *exec.Cmd, supervised bool) {
	sig := syscall.SIGKILL
	if supervised {
		sig = syscall.SIGTERM
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// terminate sends SIGTERM (or SIGKILL) to the command's process group.
func terminate(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// Supervise runs argv as a step's command under this process, the leader
// of the command's process group (ExecPlugins starts it so): when this
// process is told to stop (SIGTERM or SIGINT, which the kernel sends when
// the step that started it dies) or finds its parent gone, the whole group
// gets SIGTERM and, after grace, SIGKILL, so no provider CLI the command
// started keeps upgrading after the step is gone. It exits as the command
// did; a command killed by a signal kills this process with the same one.
func Supervise(argv []string, stdin io.Reader, stdout, stderr io.Writer, grace time.Duration) int {
	if len(argv) == 0 {
		return 2
	}
	parent := os.Getppid()
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "starting %s: %v\n", argv[0], err)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var err error
	stopGroup := func() {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		_ = syscall.Kill(-os.Getpid(), syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-os.Getpid(), syscall.SIGKILL) // this process too
			err = <-done
		}
	}
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-stop:
			stopGroup()
			break wait
		case <-tick.C:
			if os.Getppid() != parent {
				stopGroup()
				break wait
			}
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signal.Reset()
			_ = syscall.Kill(os.Getpid(), ws.Signal())
			time.Sleep(time.Second)
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 2
	}
	return 0
}

// holderGone reports whether the holder of a step ("host/pid") is a
// process of this machine that no longer runs: a step killed here is
// taken over at once instead of after its heartbeat goes stale.
func holderGone(holder string) bool {
	host, pid, ok := strings.Cut(holder, "/")
	if !ok {
		return false
	}
	if h, _ := os.Hostname(); h != host {
		return false
	}
	n, err := strconv.Atoi(strings.SplitN(pid, "/", 2)[0])
	if err != nil || n <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(n, 0), syscall.ESRCH)
}
