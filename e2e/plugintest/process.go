package plugintest

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a plugin running in the background, for tests that interrupt
// it, watch what it leaves in the cluster meanwhile, or measure it.
type Process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr syncBuffer
	done   chan struct{}
	began  time.Time
	// Set when done is closed.
	wall   time.Duration
	rusage *syscall.Rusage
	exit   int
	// measured: started under hack/peakrss, which reports peakKiB.
	measured bool
	peakKiB  int64
}

// syncBuffer is a bytes.Buffer that may be read while the process writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start starts the plugin binary name with args. Its stderr also goes to
// tee, if not nil, as it is written. A process still running when the test
// ends is killed.
func Start(t testing.TB, name string, tee io.Writer, args ...string) *Process {
	t.Helper()
	return start(t, &Process{}, tee, Binary(t, name), args...)
}

// StartMeasured starts the plugin under hack/peakrss (see PeakRSS), so that
// Wait can read the plugin's own peak RSS (PeakKiB).
func StartMeasured(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	return start(t, &Process{measured: true}, nil, PeakRSS(t), append([]string{Binary(t, name)}, args...)...)
}

func start(t testing.TB, p *Process, tee io.Writer, path string, args ...string) *Process {
	t.Helper()
	p.done = make(chan struct{})
	p.cmd = exec.Command(path, args...)
	// hack/peakrss and the plugin form a process group, killed together.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: p.measured}
	p.cmd.Env = baseEnv()
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if tee != nil {
		p.cmd.Stderr = io.MultiWriter(&p.stderr, tee)
	}
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.wall = time.Since(p.began)
		p.exit = p.cmd.ProcessState.ExitCode()
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			p.rusage = ru
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.Kill()
			<-p.done
		}
	})
	return p
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code, once Done is closed.
func (p *Process) ExitCode() int { return p.exit }

// Stderr is what the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Pid is the process id (of hack/peakrss, for a measured process).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (and, when measured, to the plugin
// under hack/peakrss too).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.measured {
		return syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill ends the process, stopped or not.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGKILL)
}

// CPU is the user and system time the process used, once Done is closed
// (for a measured process it includes hack/peakrss's little).
func (p *Process) CPU() time.Duration {
	if p.rusage == nil {
		return 0
	}
	return time.Duration(p.rusage.Utime.Nano() + p.rusage.Stime.Nano())
}

// PeakKiB is the plugin's peak RSS, once Wait returned for a measured
// process.
func (p *Process) PeakKiB() int64 { return p.peakKiB }

// Wait waits up to timeout for the process to exit (then kills it and
// fails the test) and returns its result.
func (p *Process) Wait(t testing.TB, timeout time.Duration) Result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		<-p.done
		t.Fatalf("%s did not finish within %s\n%s", p.cmd.Path, timeout, LastLines(p.Stderr(), 40))
	}
	res := Result{Stdout: p.stdout.String(), Stderr: p.Stderr(), ExitCode: p.exit, Duration: p.wall}
	if p.measured {
		var ok bool
		if res.Stderr, p.peakKiB, ok = SplitPeakRSS(res.Stderr); !ok {
			t.Fatalf("no peak RSS from hack/peakrss\n%s", LastLines(res.Stderr, 40))
		}
	}
	return res
}

// LastLines returns the last n lines of s, saying how many went before.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
