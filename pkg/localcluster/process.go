package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long a process gets after SIGTERM before SIGKILL. The
// apiserver shuts down gracefully and slowly, so it gets the longest.
const stopTimeout = 15 * time.Second

// process is one running control-plane component.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string
	env     []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	waitErr error
	// logStart is the size of the log before this start: what follows is
	// this run's output.
	logStart int64
}

// start runs the process with its output appended to logPath, in a process
// group of its own and with a parent-death signal, so that a test binary
// that dies takes its children with it.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil {
		p.logStart = st.Size()
	}
	fmt.Fprintf(f, "=== %s %s\n", time.Now().Format(time.RFC3339), p.name)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="), p.env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.logFile, p.done, p.waitErr = cmd, f, make(chan struct{}), nil
	done := p.done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		_ = f.Close()
		close(done)
	}()
	return nil
}

// exited reports whether the process has ended and with which error.
func (p *process) exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, errors.New("not started")
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, waits up to timeout, then sends
// SIGKILL. It is safe to call on a process that never started or has ended.
func (p *process) stop(timeout time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	if timeout <= 0 {
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return
	}
	signalGroup(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	// Children that ignored the signal to their parent still share the group.
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
}

// pid returns the process id, or 0 when not running.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// bindFailure returns the line of this run's log that says a port was
// taken ("bind: address already in use"), or "".
func (p *process) bindFailure() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	p.mu.Lock()
	start := p.logStart
	p.mu.Unlock()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 8<<20))
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte("address already in use")) {
			line = bytes.TrimSpace(line)
			if len(line) > 300 {
				// Structured loggers put a stack trace on the same line.
				if i := bytes.Index(line, []byte("address already in use")); i > 200 {
					line = append([]byte("..."), line[i-200:]...)
				}
				if len(line) > 300 {
					line = append(line[:300:300], "..."...)
				}
			}
			return string(line)
		}
	}
	return ""
}

// tail returns the last n bytes of the process log.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
