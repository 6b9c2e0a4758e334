//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestControlPlaneRestartStress starts and stops a second control plane
// many times in a row beside the package's shared one, as two `make demo`
// runs or two test packages do, and never lets a bind failure surface:
// every start succeeds, and every stop returns only once each process has
// exited and its ports can be bound again. One cycle asks for ports this
// test holds, so the real components fail to bind and must be restarted on
// fresh ports, as the log then says. E2E_STRESS_CYCLES sets the number of
// cycles (default 4).
func TestControlPlaneRestartStress(t *testing.T) {
	shared := harness.Shared(t)
	cycles := 4
	if n, err := strconv.Atoi(os.Getenv("E2E_STRESS_CYCLES")); err == nil && n > 0 {
		cycles = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cycles)*3*time.Minute)
	defer cancel()
	for i := 1; i <= cycles; i++ {
		logFile, err := os.Create(filepath.Join(t.TempDir(), "start.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		opts := harness.Options{Log: io.MultiWriter(logFile, os.Stderr), StartTimeout: 3 * time.Minute}
		var held []int
		if i == 2 {
			// Ports another program holds: etcd's client port and the
			// controller manager's, the one seen taken in the field.
			opts.Ports = map[string]int{}
			for _, c := range []string{harness.Etcd, harness.KubeControllerManager} {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				port := l.Addr().(*net.TCPAddr).Port
				opts.Ports[c] = port
				held = append(held, port)
			}
		}
		began := time.Now()
		cp, err := harness.Start(ctx, opts)
		if err != nil {
			t.Fatalf("cycle %d: start: %v", i, err)
		}
		started := time.Since(began)
		if _, err := cp.Client.Discovery().ServerVersion(); err != nil {
			cp.Stop()
			t.Fatalf("cycle %d: %v", i, err)
		}
		pids, ports := cp.Pids(), cp.Ports()
		for _, h := range held {
			for c, p := range ports {
				if p == h {
					t.Errorf("cycle %d: %s runs on port %d, which this test holds", i, c, p)
				}
			}
		}
		if i == 2 {
			log, _ := os.ReadFile(logFile.Name())
			for _, want := range []string{"etcd could not bind its port", "kube-controller-manager could not bind its port", "etcd started on attempt 2", "kube-controller-manager started on attempt 2"} {
				if !strings.Contains(string(log), want) {
					t.Errorf("cycle 2: the log lacks %q", want)
				}
			}
		}
		began = time.Now()
		if err := cp.Close(); err != nil {
			t.Fatalf("cycle %d: stop: %v", i, err)
		}
		for c, pid := range pids {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
				if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
					t.Errorf("cycle %d: %s (pid %d) still runs after Close", i, c, pid)
				}
			}
		}
		for c, p := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Errorf("cycle %d: %s's port %d not free after Close: %v", i, c, p, err)
				continue
			}
			l.Close()
		}
		t.Logf("cycle %d: started in %s, stopped in %s, ports %v", i, started.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), ports)
	}
	// The neighbour never noticed.
	if _, err := shared.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the shared control plane: %v", err)
	}
	for _, c := range []string{harness.Etcd, harness.KubeAPIServer, harness.KubeControllerManager, harness.KubeScheduler, harness.Kwok} {
		if dead, err := shared.Exited(c); dead {
			t.Errorf("the shared control plane's %s exited: %v", c, err)
		}
	}
}
