package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Versions of the fleet programme's e2e components (e2e/tools/build.sh
// argo and versitygw).
const (
	ArgoVersion      = "v3.7.15"
	VersityGWVersion = "v1.8.0"
)

// FleetBinaries are what e2e/fleet runs beside the control planes: the real
// Argo workflow-controller, Argo's validation as a binary, Argo's CRDs, and
// the S3-compatible server.
type FleetBinaries struct {
	WorkflowController string
	Validate           string
	ArgoCRDs           string
	VersityGW          string
}

// FleetBinariesIn returns their paths under the cache dir.
func FleetBinariesIn(dir string) FleetBinaries {
	a := filepath.Join(dir, "argo-"+ArgoVersion)
	return FleetBinaries{
		WorkflowController: filepath.Join(a, "workflow-controller"),
		Validate:           filepath.Join(a, "validate"),
		ArgoCRDs:           filepath.Join(a, "crds"),
		VersityGW:          VersityGWIn(dir),
	}
}

// VersityGWIn is the S3 gateway's binary under the cache dir.
func VersityGWIn(dir string) string {
	return filepath.Join(dir, "versitygw-"+VersityGWVersion, "versitygw")
}

// EnsureFleetBinaries returns them, building what is missing with
// e2e/tools/build.sh argo versitygw unless E2E_NO_BUILD is set.
func EnsureFleetBinaries(log func(string, ...any)) (FleetBinaries, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	dir := CacheDir()
	b := FleetBinariesIn(dir)
	var need []string
	if !allExist(b.WorkflowController, b.Validate, b.ArgoCRDs) {
		need = append(need, "argo")
	}
	if !allExist(b.VersityGW) {
		need = append(need, "versitygw")
	}
	if len(need) == 0 {
		return b, nil
	}
	if os.Getenv("E2E_NO_BUILD") != "" {
		return b, fmt.Errorf("fleet e2e binaries missing in %s; run e2e/tools/build.sh %s", dir, strings.Join(need, " "))
	}
	root, err := RepoRoot()
	if err != nil {
		return b, err
	}
	script := filepath.Join(root, "e2e", "tools", "build.sh")
	log("building %s into %s with %s", strings.Join(need, ", "), dir, script)
	cmd := exec.Command(script, need...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "E2E_BIN_DIR="+dir)
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("%s %s: %w: %s", script, strings.Join(need, " "), err, strings.TrimSpace(errOut.String()))
	}
	return b, nil
}

// ArgoController is the real Argo Workflows workflow-controller, run as a
// local process against a control plane (as Argo's own docs/running-locally.md
// runs it), namespaced to one namespace, leader election off.
type ArgoController struct {
	Namespace string
	proc      *process
}

// argoConfig is the controller's ConfigMap: its metrics and telemetry
// servers off (their default ports are fixed and the suite runs beside
// other processes); the health server on :6060 is hard-coded in
// cmd/workflow-controller/main.go (v3.7.15), so one controller runs per
// machine at a time.
const argoConfig = `metricsConfig:
  enabled: false
telemetryConfig:
  enabled: false
`

// StartArgo applies Argo's CRDs, creates the namespace and the
// controller's ConfigMap and starts the controller.
func (cp *Cluster) StartArgo(ctx context.Context, b FleetBinaries, namespace string) (*ArgoController, error) {
	crds, err := LoadCRDs(b.ArgoCRDs)
	if err != nil {
		return nil, err
	}
	if err := cp.ApplyCRDs(ctx, crds...); err != nil {
		return nil, err
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: namespace}, Data: map[string]string{"config": argoConfig}}
	if _, err := cp.Client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	a := &ArgoController{Namespace: namespace, proc: &process{
		name: "workflow-controller",
		bin:  b.WorkflowController,
		args: []string{"--kubeconfig", cp.Kubeconfig, "--namespaced", "--managed-namespace", namespace, "--namespace", namespace,
			"--configmap", "workflow-controller-configmap", "--executor-image", "quay.io/argoproj/argoexec:" + ArgoVersion,
			"--workflow-workers", "4", "--pod-cleanup-workers", "2", "--qps", "50", "--burst", "100"},
		logPath: cp.logPath("workflow-controller"),
		// Leader election off: one controller, and a restart takes over
		// at once instead of waiting for a lease to expire.
		// DEFAULT_REQUEUE_TIME is the controller's delay before it looks
		// at a workflow again after any change to it or its pods
		// (workflow/controller/rate_limiters.go, 10s by default): every
		// step of a run waited up to 10s for it, so a three-cluster run
		// of 27 steps spent most of its time there. 1s is the floor that
		// file names and the value Argo's own e2e suite runs with
		// (Makefile, "by keeping this short we speed up tests"; both at
		// v3.7.15).
		env: []string{"LEADER_ELECTION_DISABLE=true", "DEFAULT_REQUEUE_TIME=1s"},
	}}
	return a, a.Start(ctx)
}

// Start (re)starts the controller process and waits for its health
// endpoint.
func (a *ArgoController) Start(ctx context.Context) error {
	if err := a.proc.start(); err != nil {
		return err
	}
	return Poll(ctx, "the workflow-controller's /healthz", 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		if exited, err := a.proc.exited(); exited {
			return false, fmt.Errorf("workflow-controller exited: %v; log:\n%s", err, a.proc.tail(3000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:6060/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Kill ends the controller with SIGKILL, as a crashed pod would.
func (a *ArgoController) Kill() { a.proc.stop(0) }

// Stop ends the controller.
func (a *ArgoController) Stop() { a.proc.stop(5 * time.Second) }

// Log returns the end of the controller's log.
func (a *ArgoController) Log(n int) string { return a.proc.tail(n) }

// S3Server is the Versity S3 Gateway (versitygw) serving an S3 API on
// 127.0.0.1 from a directory (its posix backend), the object store the
// fleet programme's store runs on in e2e. It checks If-Match and
// If-None-Match on PutObject under the object's publish lock
// (versitygw@v1.8.0 backend/posix/posix.go checkPutPreconditions), so the
// store's compare-and-swap meets a production gateway that enforces it.
type S3Server struct {
	// Endpoint is http://127.0.0.1:<port>.
	Endpoint string
	proc     *process
}

// The root credentials the server is started with: every client signs with
// them (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
const (
	S3AccessKey = "e2e"
	S3SecretKey = "e2e-secret"
)

// StartS3 starts the fleet's S3 server with one bucket.
func StartS3(ctx context.Context, b FleetBinaries, dir, bucket string) (*S3Server, error) {
	return StartVersityGW(ctx, b.VersityGW, dir, bucket)
}

// StartVersityGW starts versitygw's posix backend on dir/s3-objects with one
// bucket (a directory there), its metadata (ETags) in sidecar files under
// dir/s3-meta rather than extended attributes, which tmpfs may lack.
func StartVersityGW(ctx context.Context, bin, dir, bucket string) (*S3Server, error) {
	root, meta := filepath.Join(dir, "s3-objects"), filepath.Join(dir, "s3-meta")
	for _, d := range []string{filepath.Join(root, bucket), meta} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	port, err := reservePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// versitygw v1.8.0 cmd/versitygw: --access, --secret and --port are
	// the gateway's; --sidecar is the posix backend's (`versitygw posix
	// --help`).
	s := &S3Server{Endpoint: "http://" + addr, proc: &process{name: "versitygw", bin: bin,
		args:    []string{"--access", S3AccessKey, "--secret", S3SecretKey, "--port", addr, "--quiet", "posix", "--sidecar", meta, root},
		logPath: filepath.Join(dir, "versitygw.log")}}
	if err := s.proc.start(); err != nil {
		return nil, err
	}
	err = Poll(ctx, "versitygw on "+addr, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if exited, err := s.proc.exited(); exited {
			return false, fmt.Errorf("versitygw exited: %v: %s", err, s.proc.tail(2000))
		}
		// Any answer (an unsigned request is 403) means it serves.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/"+bucket, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Log returns the end of the server's log.
func (s *S3Server) Log(n int) string { return s.proc.tail(n) }

// Stop ends the server.
func (s *S3Server) Stop() { s.proc.stop(2 * time.Second) }
