package harness

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var shared *ControlPlane

// Main is the TestMain of an e2e package: it starts one control plane for
// the package, runs the tests, stops the plane and exits. It exits 1 with a
// message when the plane cannot start (for example when the binaries are
// missing and cannot be built). SIGINT and SIGTERM stop the plane first.
// With E2E_KEEP=1 the working directory (logs, audit log) is kept.
func Main(m *testing.M, opts Options) {
	os.Exit(runMain(m, opts))
}

func runMain(m *testing.M, opts Options) int {
	if os.Getenv("E2E_KEEP") != "" {
		opts.KeepDir = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	started := make(chan *ControlPlane, 1)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "harness: %v: stopping the control plane\n", sig)
		// While starting, cancelling makes Start stop what it started.
		cancel()
		select {
		case cp := <-started:
			cp.Stop()
			os.Exit(130)
		default:
		}
	}()

	cp, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: cannot start the e2e control plane: %v\n", err)
		return 1
	}
	started <- cp
	shared = cp
	code := m.Run()
	if code != 0 && opts.KeepDir {
		fmt.Fprintf(os.Stderr, "harness: logs kept in %s\n", cp.Dir)
	}
	// Take the plane back from the signal goroutine so it is stopped once.
	select {
	case <-started:
	default:
	}
	cp.Stop()
	return code
}

// Shared returns the control plane started by Main. It fails the test when
// Main did not start one.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	if shared == nil {
		t.Fatal("no control plane: call harness.Main from TestMain")
	}
	return shared
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named after the test and deletes it when the
// test ends.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	return cp.NamespaceFrom(t, base)
}

// NamespaceFrom creates a namespace named base, a dash and a suffix the
// apiserver generates, for a test whose output shows the namespace (the
// test's name, Namespace's base, can be too long for a table), and
// deletes it when the test ends.
func (cp *ControlPlane) NamespaceFrom(t testing.TB, base string) string {
	t.Helper()
	ns, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-", Labels: map[string]string{"gpufleet.dev/e2e": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
