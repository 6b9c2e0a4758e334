package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as a control-plane component: with
// LOCALCLUSTER_FAKE set it listens on the port its --port flag names and
// answers /healthz, as the real components do, or ends as they do when the
// port is taken. LOCALCLUSTER_FAKE=crash makes it end at once with an error
// of another kind. (Returning from TestMain ends the process, with m.Run's
// status when it ran.)
func TestMain(m *testing.M) {
	switch os.Getenv("LOCALCLUSTER_FAKE") {
	case "":
		m.Run()
	case "crash":
		fmt.Fprintln(os.Stderr, "E0101 fake: cannot load the configuration")
	default:
		port := strings.TrimPrefix(os.Args[len(os.Args)-1], "--port=")
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			// Go's own wording, which the real components print too.
			fmt.Fprintf(os.Stderr, "E0101 fake: failed to listen: %v\n", err)
			return
		}
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testCluster(t *testing.T, opts Options) (*Cluster, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	opts.Log = log
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	cp := &Cluster{Dir: dir, Options: opts, ports: map[string]int{}, procs: map[string]*process{}}
	t.Cleanup(func() {
		if err := cp.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return cp, log
}

// hold listens on 127.0.0.1:port until the test ends; with answer set it
// answers every HTTP request with 200 ok, as an unrelated server would,
// otherwise it closes each connection it accepts.
func hold(t *testing.T, port int, answer bool) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if answer {
		go func() {
			_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
		}()
		return
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// fake returns a component run by the test binary on the component's main
// port; before each start, grab (when it returns true) takes that port the
// way another process might between the pick and the bind, with a server
// that answers the health check when answer is set.
func fake(t *testing.T, cp *Cluster, mode string, answer bool, grab func(attempt int) bool) component {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCALCLUSTER_FAKE", mode)
	attempt := 0
	return component{
		name: KubeControllerManager,
		bin:  self,
		args: func(context.Context) ([]string, error) {
			attempt++
			port := cp.port(KubeControllerManager)
			if grab != nil && grab(attempt) {
				hold(t, port, answer)
			}
			return []string{"--port=" + strconv.Itoa(port)}, nil
		},
		ready: func(ctx context.Context, p *process) error {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			return cp.waitFor(ctx, p, "/healthz", func(ctx context.Context) error {
				return httpGetOK(ctx, loopbackHTTP, "http://127.0.0.1:"+strconv.Itoa(cp.port(KubeControllerManager))+"/healthz")
			})
		},
	}
}

// A port taken between the pick and the bind costs a restart on a fresh
// port, logged, and never surfaces as an error.
func TestStartComponentRestartsOnFreshPortWhenTaken(t *testing.T) {
	cp, log := testCluster(t, Options{})
	taken := map[int]bool{}
	c := fake(t, cp, "serve", false, func(attempt int) bool {
		if attempt <= 2 {
			taken[cp.port(KubeControllerManager)] = true
			return true
		}
		return false
	})
	if err := cp.startComponent(context.Background(), c); err != nil {
		t.Fatalf("startComponent: %v\nlog:\n%s", err, log)
	}
	got := cp.port(KubeControllerManager)
	if taken[got] || len(taken) != 2 {
		t.Errorf("runs on port %d; ports taken before the bind: %v", got, taken)
	}
	out := log.String()
	for _, want := range []string{
		"kube-controller-manager could not bind its port",
		"address already in use",
		"starting it again on fresh ports (bind attempt 2 of 5)",
		"(bind attempt 3 of 5)",
		"kube-controller-manager started on attempt 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if dead, err := cp.Exited(KubeControllerManager); dead {
		t.Errorf("component exited: %v", err)
	}
}

// A port asked for in Options.Ports that is taken is replaced, and said so.
func TestStartComponentReplacesTakenFixedPort(t *testing.T) {
	held, err := kernelPort()
	if err != nil {
		t.Fatal(err)
	}
	hold(t, held, false)
	cp, log := testCluster(t, Options{Ports: map[string]int{KubeControllerManager: held}})
	if err := cp.startComponent(context.Background(), fake(t, cp, "serve", false, nil)); err != nil {
		t.Fatalf("startComponent: %v\nlog:\n%s", err, log)
	}
	if got := cp.Ports()[KubeControllerManager]; got == held || got == 0 {
		t.Errorf("port %d, want a fresh one instead of the taken %d", got, held)
	}
	if !strings.Contains(log.String(), fmt.Sprintf("ports map[kube-controller-manager:%d]", held)) {
		t.Errorf("log does not name the taken port %d:\n%s", held, log)
	}
}

// A health check answered by another program on the component's port does
// not count: the component failed to bind, and starts again elsewhere.
func TestStartComponentIgnoresImpostorAnswering(t *testing.T) {
	if _, _, known := listener(os.Getpid(), 1); !known {
		t.Skip("cannot tell which process listens on a port here")
	}
	cp, log := testCluster(t, Options{})
	var impostor int
	c := fake(t, cp, "serve", true, func(attempt int) bool {
		if attempt == 1 {
			impostor = cp.port(KubeControllerManager)
			return true
		}
		return false
	})
	if err := cp.startComponent(context.Background(), c); err != nil {
		t.Fatalf("startComponent: %v\nlog:\n%s", err, log)
	}
	got := cp.port(KubeControllerManager)
	if ours, _, _ := listener(cp.Pids()[KubeControllerManager], got); got == impostor || !ours {
		t.Errorf("component on port %d (ours %v), the impostor on %d\n%s", got, ours, impostor, log)
	}
	if !strings.Contains(log.String(), "could not bind its port") {
		t.Errorf("log:\n%s", log)
	}
}

// The same, when the component has already exited by the time its ports
// are looked at (a loaded machine: the impostor answered the health check
// while the component was still failing to bind): its exit is the bind
// failure, never a start.
func TestStartComponentExitedAfterImpostorAnswered(t *testing.T) {
	if _, _, known := listener(os.Getpid(), 1); !known {
		t.Skip("cannot tell which process listens on a port here")
	}
	cp, log := testCluster(t, Options{})
	attempts := 0
	c := fake(t, cp, "serve", true, func(attempt int) bool {
		attempts = attempt
		return attempt == 1
	})
	health := c.ready
	c.ready = func(ctx context.Context, p *process) error {
		if attempts > 1 {
			return health(ctx, p)
		}
		// The impostor answers; the health check returns only once the
		// component, unable to bind, is gone.
		if err := health(ctx, p); err != nil {
			return err
		}
		for dead, _ := p.exited(); !dead; dead, _ = p.exited() {
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	if err := cp.startComponent(context.Background(), c); err != nil {
		t.Fatalf("startComponent: %v\nlog:\n%s", err, log)
	}
	if dead, _ := cp.procs[KubeControllerManager].exited(); dead || attempts != 2 {
		t.Errorf("component dead %v after %d attempts, want it running after 2\n%s", dead, attempts, log)
	}
	if !strings.Contains(log.String(), "could not bind its port") {
		t.Errorf("log:\n%s", log)
	}
}

// The attempts are bounded: a port taken every time ends in an error that
// names the component, its log and the cause.
func TestStartComponentGivesUpAfterBoundedAttempts(t *testing.T) {
	cp, log := testCluster(t, Options{})
	tries := 0
	err := cp.startComponent(context.Background(), fake(t, cp, "serve", false, func(int) bool { tries++; return true }))
	var ce *ComponentError
	if !errors.As(err, &ce) || ce.Component != KubeControllerManager || ce.Log != cp.LogPath(KubeControllerManager) {
		t.Fatalf("error %T %v, want a ComponentError for kube-controller-manager", err, err)
	}
	if tries != maxBindAttempts || !strings.Contains(err.Error(), "could not bind a port 5 times") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("%d tries, error: %v", tries, err)
	}
	if n := strings.Count(log.String(), "could not bind its port"); n != maxBindAttempts-1 {
		t.Errorf("%d restarts logged, want %d:\n%s", n, maxBindAttempts-1, log)
	}
}

// Another failure is tried again only as often as the component allows,
// each try logged, and the error points at the log.
func TestStartComponentRetriesOtherFailures(t *testing.T) {
	cp, log := testCluster(t, Options{})
	c := fake(t, cp, "crash", false, nil)
	c.retries = 2
	err := cp.startComponent(context.Background(), c)
	var ce *ComponentError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cannot load the configuration") {
		t.Fatalf("error: %v", err)
	}
	if n := strings.Count(log.String(), "did not start"); n != 2 {
		t.Errorf("%d retries logged, want 2:\n%s", n, log)
	}
	if !strings.Contains(log.String(), "(attempt 3 of 3); its log is "+cp.LogPath(KubeControllerManager)) {
		t.Errorf("log:\n%s", log)
	}
}

// Two clusters in one process never get the same port, and a released
// port can be handed out again.
func TestReservePortNeverHandsOutHeldPort(t *testing.T) {
	seen := map[int]bool{}
	var all []int
	for range 300 {
		p, err := reservePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if s := pickSpan(); s.hi > 0 && (p < s.lo || p > s.hi) {
			t.Fatalf("port %d outside %d-%d", p, s.lo, s.hi)
		}
		seen[p] = true
		all = append(all, p)
	}
	releasePorts(all...)
	portMu.Lock()
	defer portMu.Unlock()
	if len(inUse) != 0 {
		t.Errorf("%d ports still held after release", len(inUse))
	}
}

// The span avoids the ephemeral range, where outgoing connections take
// their ports.
func TestPickSpanAvoidsEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Fatal(err)
	}
	s := pickSpan()
	if s.hi == 0 {
		t.Skipf("ephemeral range %d-%d leaves no span", lo, hi)
	}
	if s.hi >= lo && s.lo <= hi {
		t.Errorf("span %d-%d overlaps the ephemeral range %d-%d", s.lo, s.hi, lo, hi)
	}
}

// Close returns once every process has exited and its port is free.
func TestCloseWaitsForPortsFree(t *testing.T) {
	cp, log := testCluster(t, Options{})
	if err := cp.startComponent(context.Background(), fake(t, cp, "serve", false, nil)); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	port := cp.port(KubeControllerManager)
	if portFree(port) {
		t.Fatalf("port %d free while the component runs", port)
	}
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if !portFree(port) {
		t.Errorf("port %d still taken after Close", port)
	}
	if _, err := os.Stat(statePath(cp.Dir)); !os.IsNotExist(err) {
		t.Errorf("state file left: %v", err)
	}
}

// Reap, from the state file alone, ends what a cluster whose owner died
// left running, and waits for its ports.
func TestReapEndsLeftoverComponents(t *testing.T) {
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		t.Skip("Reap identifies processes through /proc")
	}
	cp, log := testCluster(t, Options{})
	if err := cp.startComponent(context.Background(), fake(t, cp, "serve", false, nil)); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	port := cp.port(KubeControllerManager)
	pid := cp.Pids()[KubeControllerManager]
	// As if the owner had died: only the state file knows the process.
	if err := Reap(cp.Dir, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if isProcess(pid, cp.Binaries.KubeControllerManager) || !portFree(port) {
		t.Errorf("pid %d or port %d survived Reap", pid, port)
	}
	if err := exec.Command("kill", "-0", strconv.Itoa(pid)).Run(); err == nil {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
			t.Errorf("pid %d still runs: %s", pid, b)
		}
	}
	if err := Reap(cp.Dir, time.Second); err != nil {
		t.Errorf("second Reap: %v", err)
	}
}
