package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Executor runs one command of a step and returns how it ended; err is for
// a command that could not start at all.
type Executor interface {
	Run(ctx context.Context, argv []string, env []string, stdout, stderr io.Writer) (Exit, error)
}

// Exit is how a command ended: its exit code, or the signal that killed
// it (Code is then 128+signal, as a shell reports it).
type Exit struct {
	Code   int
	Signal string
}

// Plugin binaries the steps run.
const (
	BinSkew         = "kubectl-skew"
	BinPDBBlockers  = "kubectl-pdb_blockers"
	BinGangDrain    = "kubectl-gang_drain"
	BinGPUValidate  = "kubectl-gpu_validate"
	BinCRDMigrate   = "kubectl-crd_migrate"
	BinDeprecations = "kubectl-deprecations"
)

// ExecPlugins runs commands as processes. The suite's plugins are looked
// up in BinDir first, then next to the running binary, then on PATH.
type ExecPlugins struct {
	BinDir string
	// Grace is how long a command has after SIGTERM when the step is
	// interrupted (10s when 0).
	Grace time.Duration
	// Supervisor, when set, is the argv prefix that runs a command under
	// Supervise (kubectl-skew fleet supervise --), so that the command and
	// everything it started stop when the step dies, SIGKILL included.
	Supervisor []string
}

func (e ExecPlugins) resolve(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	var dirs []string
	if e.BinDir != "" {
		dirs = append(dirs, e.BinDir)
	}
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

// Run starts argv in its own process group and waits. When ctx ends the
// group gets SIGTERM (the plugins stop cleanly and record their state),
// then SIGKILL after the grace period. A command killed by a signal says
// which; its code is 128+signal, as a shell reports it.
func (e ExecPlugins) Run(ctx context.Context, argv []string, env []string, stdout, stderr io.Writer) (Exit, error) {
	if len(argv) == 0 {
		return Exit{}, errors.New("no command")
	}
	full := append([]string{e.resolve(argv[0])}, argv[1:]...)
	if len(e.Supervisor) > 0 {
		full = append(append([]string{}, e.Supervisor...), full...)
	}
	cmd := exec.Command(full[0], full[1:]...)
	// The store's credentials stay in this process (CommandEnv).
	cmd.Env = CommandEnv(env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ownGroup(cmd, len(e.Supervisor) > 0)
	if err := cmd.Start(); err != nil {
		return Exit{}, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		terminate(cmd, false)
		grace := e.Grace
		if grace == 0 {
			grace = 10 * time.Second
		}
		select {
		case err = <-done:
		case <-time.After(grace):
			terminate(cmd, true)
			err = <-done
		}
	}
	if err == nil {
		return Exit{}, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal().String()}, nil
		}
		return Exit{Code: ee.ExitCode()}, nil
	}
	return Exit{}, err
}
