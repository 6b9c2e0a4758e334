package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Ports other than a component's main one (which is keyed by its name).
const (
	portEtcdPeer     = "etcd-peer"
	portKueueHealth  = "kueue-health"
	portJobSetHealth = "jobset-health"
)

// componentPorts lists the ports each component binds, its main one first.
var componentPorts = map[string][]string{
	Etcd:                  {Etcd, portEtcdPeer},
	KubeAPIServer:         {KubeAPIServer},
	KubeControllerManager: {KubeControllerManager},
	KubeScheduler:         {KubeScheduler},
	Kueue:                 {Kueue, portKueueHealth},
	JobSet:                {JobSet, portJobSetHealth},
}

// maxBindAttempts bounds how often a component is started on fresh ports
// after finding one taken.
const maxBindAttempts = 5

// ComponentError says which component did not start and where its log is.
type ComponentError struct {
	Component string
	Log       string
	Err       error
}

func (e *ComponentError) Error() string { return e.Err.Error() }
func (e *ComponentError) Unwrap() error { return e.Err }

// component is how to start one component and tell that it is ready.
type component struct {
	name string
	bin  string
	// args returns the command line for the ports now assigned (cp.port).
	args func(context.Context) ([]string, error)
	// ready waits until the process serves, or returns an error when it
	// exited or ctx ended.
	ready func(context.Context, *process) error
	// keepPorts keeps the ports assigned before (an apiserver restart,
	// whose port the other components' kubeconfigs name).
	keepPorts bool
	// retries is how many more times a start that failed for another
	// reason than a taken port is tried.
	retries int
}

// port returns the port assigned to key.
func (cp *Cluster) port(key string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.ports[key]
}

// Ports returns the loopback ports the components were given, by
// component (etcd's peer port and the health ports of Kueue and JobSet
// under their own names).
func (cp *Cluster) Ports() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int, len(cp.ports))
	for k, v := range cp.ports {
		out[k] = v
	}
	return out
}

// assignPorts gives the component its ports: the one Options.Ports asks
// for on a first try, fresh ones otherwise. A port given up is released.
func (cp *Cluster) assignPorts(c component, first bool) error {
	if c.keepPorts {
		return nil
	}
	for i, key := range componentPorts[c.name] {
		var p int
		if want := cp.Options.Ports[c.name]; first && i == 0 && want > 0 {
			holdPort(want)
			p = want
		} else {
			var err error
			if p, err = reservePort(); err != nil {
				return err
			}
		}
		cp.mu.Lock()
		old := cp.ports[key]
		cp.ports[key] = p
		cp.mu.Unlock()
		if old > 0 && old != p {
			releasePorts(old)
		}
	}
	return nil
}

func (cp *Cluster) portsOf(name string) map[string]int {
	out := map[string]int{}
	for _, key := range componentPorts[name] {
		out[key] = cp.port(key)
	}
	return out
}

// startComponent starts c and waits until it is ready. A component that
// cannot bind one of its ports ("address already in use": the port was
// free when picked, and something took it before the component bound it)
// is stopped and started again on fresh ports, up to maxBindAttempts
// times, each logged; with keepPorts it is started again on the same
// ports after a second. Any other failure is tried c.retries more times.
// The error is a *ComponentError.
func (cp *Cluster) startComponent(ctx context.Context, c component) error {
	bindFails, otherFails := 0, 0
	logPath := cp.logPath(c.name)
	for attempt := 1; ; attempt++ {
		if err := cp.assignPorts(c, attempt == 1); err != nil {
			return &ComponentError{Component: c.name, Log: logPath, Err: err}
		}
		args, err := c.args(ctx)
		if err != nil {
			return &ComponentError{Component: c.name, Log: logPath, Err: err}
		}
		p, err := cp.run(c.name, c.bin, args...)
		if err != nil {
			return &ComponentError{Component: c.name, Log: logPath, Err: err}
		}
		err = c.ready(ctx, p)
		line := ""
		if err == nil {
			if line, err = cp.confirmPorts(p, c.name); err == nil {
				if attempt > 1 {
					logf(cp.Options, "%s started on attempt %d (ports %v)", c.name, attempt, cp.portsOf(c.name))
				}
				return nil
			}
		} else {
			line = p.bindFailure()
		}
		p.stop(5 * time.Second)
		if ctx.Err() != nil {
			return &ComponentError{Component: c.name, Log: logPath, Err: err}
		}
		switch {
		case line != "" && bindFails+1 < maxBindAttempts:
			bindFails++
			how := "on fresh ports"
			if c.keepPorts {
				how = "on the same ports in a second"
				time.Sleep(time.Second)
			}
			logf(cp.Options, "%s could not bind its port (ports %v; its log: %q); starting it again %s (bind attempt %d of %d)",
				c.name, cp.portsOf(c.name), line, how, bindFails+1, maxBindAttempts)
		case line == "" && otherFails < c.retries:
			otherFails++
			logf(cp.Options, "%s did not start: %v\nstarting it again (attempt %d of %d); its log is %s", c.name, err, otherFails+1, c.retries+1, logPath)
		default:
			if line != "" {
				err = fmt.Errorf("%s could not bind a port %d times (last: %s): %w", c.name, maxBindAttempts, line, err)
			}
			return &ComponentError{Component: c.name, Log: logPath, Err: err}
		}
	}
}

// confirmPorts checks that no other program listens on one of the
// component's ports: a health check that passed may have been answered by
// a program holding a port the component could not bind (it then exits, a
// moment later). A port nobody listens on yet is the component's to bind
// (a webhook server may start after the health endpoint). It returns the
// reason as a bind failure line.
//
// The component may also have exited already, between the health check
// and this look: its /proc entries are then gone and say nothing, so
// where this platform can tell who listens, an unreadable answer waits a
// moment for the process to be reaped and counts its exit as the failure.
func (cp *Cluster) confirmPorts(p *process, name string) (string, error) {
	for _, key := range componentPorts[name] {
		port := cp.port(key)
		ours, anyone, known := listener(p.pid(), port)
		if !known && canTellListeners() {
			if line, err := exitedAfterReady(p, name); err != nil {
				return line, err
			}
			continue
		}
		if known && anyone && !ours {
			line := fmt.Sprintf("127.0.0.1:%d: another program listens there, not %s (pid %d): address already in use", port, name, p.pid())
			return line, fmt.Errorf("%s: %s", name, line)
		}
	}
	return "", nil
}

// canTellListeners reports whether listener can say who listens on a
// port here (Linux's /proc): asked of this process, which always exists.
var canTellListeners = sync.OnceValue(func() bool {
	_, _, known := listener(os.Getpid(), 1)
	return known
})

// exitedAfterReady waits up to two seconds for a process whose /proc
// entries could not be read to be reaped, and returns its exit as a
// failure: its bind failure line where its log has one.
func exitedAfterReady(p *process, name string) (string, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		if dead, werr := p.exited(); dead {
			line := p.bindFailure()
			if line == "" {
				return "", fmt.Errorf("%s exited right after its health check passed (%v)", name, werr)
			}
			return line, fmt.Errorf("%s: %s", name, line)
		}
		if time.Now().After(deadline) {
			return "", nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The state file records, in the working directory, every process the
// cluster started with its ports, so that another process (democluster
// down) can make sure they are gone: Reap.
const stateFile = "components.json"

func statePath(dir string) string { return filepath.Join(dir, stateFile) }

// Process is one component as the state file records it.
type Process struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Bin   string `json:"bin"`
	Ports []int  `json:"ports,omitempty"`
}

// State returns the processes a cluster working in dir started, as its
// state file records them; none when there is no state file (the cluster
// stopped, or never started there).
func State(dir string) ([]Process, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st []Process
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(dir), err)
	}
	return st, nil
}

func (cp *Cluster) writeStateLocked() error {
	var st []Process
	for _, name := range cp.order {
		p := cp.procs[name]
		e := Process{Name: name, Pid: p.pid(), Bin: p.bin}
		for _, key := range componentPorts[name] {
			if port := cp.ports[key]; port > 0 {
				e.Ports = append(e.Ports, port)
			}
		}
		st = append(st, e)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(cp.Dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(cp.Dir))
}

// Reap makes sure that nothing a cluster started in dir still runs: it
// reads the state file the cluster keeps there, kills (SIGTERM, then
// SIGKILL, process group and all) any component still alive, waits until
// each has exited, then waits up to timeout until every port they had can
// be bound again. A dir without a state file has nothing to reap.
func Reap(dir string, timeout time.Duration) error {
	st, err := State(dir)
	if err != nil || st == nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var ports []int
	var errs []error
	for _, e := range st {
		ports = append(ports, e.Ports...)
		if !isProcess(e.Pid, e.Bin) {
			continue
		}
		if err := killAndWait(e.Pid, e.Bin, time.Until(deadline)); err != nil {
			errs = append(errs, fmt.Errorf("%s (pid %d): %w", e.Name, e.Pid, err))
		}
	}
	if err := WaitPortsFree(ports, max(time.Until(deadline), time.Second)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(statePath(dir))
}

// killAndWait sends SIGTERM to the process group of pid, SIGKILL after five
// seconds, and waits until the process is gone.
func killAndWait(pid int, bin string, timeout time.Duration) error {
	terminateGroup(pid)
	kill := time.Now().Add(5 * time.Second)
	deadline := time.Now().Add(max(timeout, 6*time.Second))
	killed := false
	for isProcess(pid, bin) {
		if !killed && time.Now().After(kill) {
			killGroup(pid)
			killed = true
		}
		if time.Now().After(deadline) {
			return errors.New("still running after SIGKILL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
