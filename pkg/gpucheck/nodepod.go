package gpucheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Labels of the per-node check pods.
const (
	CheckPodLabel = "gpufleet.dev/gpu-validate-check"
	RunPodLabel   = "gpufleet.dev/gpu-validate-run"
)

// Default images of the per-node checks.
const (
	DefaultDCGMImage = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
	DefaultXidImage  = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
)

// NodePodSpec is a check that runs one privileged pod on a node.
type NodePodSpec struct {
	// Check is "xid" or "dcgm"; it names the pod and its container.
	Check     string
	Namespace string
	RunID     string
	Image     string
	Command   []string
	// GPUs is how many nvidia.com/gpu the pod takes (0 for none).
	GPUs int
	// HostRoot mounts the node's / read-only at /host.
	HostRoot bool
	// CommandFor and GPUsFor, when set, override Command and GPUs per node.
	CommandFor func(node string) []string `json:"-"`
	GPUsFor    func(node string) int      `json:"-"`
}

// PodName is the check pod's name on a node: gpu-validate-<check>-<node>,
// shortened with a hash when too long. The name is fixed per node and
// check, so two runs cannot test the same node at once.
func PodName(check, node string) string {
	n := "gpu-validate-" + check + "-" + node
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(node))
	return strings.TrimRight(n[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

// XidCommand reads the node's kernel log since a time: journalctl when
// the host has it, dmesg otherwise.
func XidCommand(since time.Time) []string {
	s := since.UTC().Format("2006-01-02 15:04:05")
	return []string{"/bin/sh", "-c", fmt.Sprintf(
		`chroot /host journalctl -k --no-pager -o short-iso --since "%s UTC" 2>/dev/null || chroot /host dmesg --time-format iso 2>/dev/null || dmesg`, s)}
}

// XidCommandFromBoot reads the node's kernel log from the earlier of its
// boot and lastReady, so that the Xids the driver logs while it loads at
// boot are read even when the node became Ready after them: the boot
// time is /proc/stat's btime ("boot time, in seconds since the Epoch",
// proc(5); one kernel, so the pod sees the host's), and journalctl takes
// --since @SECONDS (systemd.time(7)). Without journald, dmesg prints the
// kernel's ring buffer, which starts at boot.
func XidCommandFromBoot(lastReady time.Time) []string {
	return []string{"/bin/sh", "-c", fmt.Sprintf(
		`s=%d; b=; while read -r k v _; do [ "$k" = btime ] && b=$v; done < /proc/stat; [ -n "$b" ] && [ "$b" -lt "$s" ] && s=$b; `+
			`chroot /host journalctl -k --no-pager -o short-iso --since "@$s" 2>/dev/null || chroot /host dmesg --time-format iso 2>/dev/null || dmesg`, lastReady.Unix())}
}

// DCGMCommand runs the level-1 diagnostics twice, with JSON output (error
// codes and severities) and as the human table (DCGM 4.x prints its own
// Warn there, which -j writes as "Fail"), each followed by a line with
// dcgmi's exit status (DCGM 3.x's verdict), starting a host engine first
// when none runs. Level 1 (DCGM's Software plugin) takes seconds; ParseDCGM
// reads the log.
func DCGMCommand() []string {
	return []string{"/bin/sh", "-c", `nv-hostengine >/dev/null 2>&1 || true
dcgmi diag -r 1 -j; echo "gpu-validate: dcgmi diag -r 1 -j exited $?"
dcgmi diag -r 1; echo "gpu-validate: dcgmi diag -r 1 exited $?"`}
}

// Pod returns the pod for a node.
func (s NodePodSpec) Pod(node string) *corev1.Pod {
	if s.CommandFor != nil {
		s.Command = s.CommandFor(node)
	}
	if s.GPUsFor != nil {
		s.GPUs = s.GPUsFor(node)
	}
	c := corev1.Container{
		Name:            s.Check,
		Image:           s.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         s.Command,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: PodName(s.Check, node), Namespace: s.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name": "gpu-validate", "app.kubernetes.io/managed-by": "kubectl-gpu_validate",
				CheckPodLabel: s.Check, RunPodLabel: s.RunID,
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{c},
		},
	}
	if s.GPUs > 0 {
		q := *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: q}, Requests: corev1.ResourceList{GPUResource: q}}
	}
	if s.HostRoot {
		p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host", ReadOnly: true}}
	}
	return p
}

// NodePodRunner runs a check pod on each node, reads its log through the
// pods/log API and deletes it.
type NodePodRunner struct {
	Kube  kubernetes.Interface
	Clock clock.Clock
	// Poll interval (default 2s) and Timeout per pod (default 10m).
	Poll, Timeout time.Duration
	// Parallel bounds concurrent pods (default 8).
	Parallel int
	Keep     bool
	OnEvent  func(msg string)
}

// NodePodResult is one node's outcome.
type NodePodResult struct {
	Node  string
	Pod   string
	Phase corev1.PodPhase
	// Reason is the pod's status reason and message when it failed
	// (for example OutOfnvidia.com/gpu when the GPUs are still in use).
	Reason string
	Log    string
	Err    error
}

// Run runs the spec on every node and returns results in node order.
func (r *NodePodRunner) Run(ctx context.Context, spec NodePodSpec, nodes []string) []NodePodResult {
	out := make([]NodePodResult, len(nodes))
	par := r.Parallel
	if par <= 0 {
		par = 8
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func(i int, n string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = r.runOne(ctx, spec, n)
		}(i, n)
	}
	wg.Wait()
	return out
}

func (r *NodePodRunner) event(format string, args ...any) {
	if r.OnEvent != nil {
		r.OnEvent(fmt.Sprintf(format, args...))
	}
}

func (r *NodePodRunner) runOne(ctx context.Context, spec NodePodSpec, node string) (res NodePodResult) {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	poll, timeout := r.Poll, r.Timeout
	if poll <= 0 {
		poll = 2 * time.Second
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	pod := spec.Pod(node)
	res = NodePodResult{Node: node, Pod: pod.Name}
	pods := r.Kube.CoreV1().Pods(spec.Namespace)
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && r.removeFinished(ctx, spec, pod.Name) {
		_, err = pods.Create(ctx, pod, metav1.CreateOptions{})
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			res.Err = fmt.Errorf("pod %s/%s already exists: another gpu-validate run may be testing node %s (delete the pod if not)", spec.Namespace, pod.Name, node)
		} else {
			res.Err = fmt.Errorf("creating pod %s/%s: %w", spec.Namespace, pod.Name, err)
		}
		return res
	}
	r.event("started %s check pod %s/%s on node %s", spec.Check, spec.Namespace, pod.Name, node)
	if !r.Keep {
		defer func() {
			// Not cancelled with the run (the pod must go even after
			// Ctrl-C), but with its values: the -v logger that withholds
			// bodies among them.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := pods.Delete(dctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) && res.Err == nil {
				res.Err = fmt.Errorf("deleting pod %s/%s: %w", spec.Namespace, pod.Name, err)
			}
		}()
	}
	deadline := clk.Now().Add(timeout)
	for {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			res.Err = fmt.Errorf("reading pod %s/%s: %w", spec.Namespace, pod.Name, err)
			return res
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			res.Phase = p.Status.Phase
			res.Reason = strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
			break
		}
		if !clk.Now().Before(deadline) {
			res.Err = fmt.Errorf("pod %s/%s on node %s did not finish within %s (phase %s)", spec.Namespace, pod.Name, node, timeout, p.Status.Phase)
			return res
		}
		select {
		case <-ctx.Done():
			res.Err = ctx.Err()
			return res
		case <-clk.After(poll):
		}
	}
	limit := int64(16 << 20)
	rc, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{Container: spec.Check, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		res.Err = fmt.Errorf("reading the log of pod %s/%s: %w", spec.Namespace, pod.Name, err)
		return res
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit))
	res.Log = string(b)
	if err != nil {
		res.Err = fmt.Errorf("reading the log of pod %s/%s: %w", spec.Namespace, pod.Name, err)
	}
	return res
}

// removeFinished deletes a check pod of the same name that has finished
// (phase Succeeded or Failed): what an earlier run left when it kept its
// pods (--keep) or was killed before its cleanup, which tests nothing
// now. It waits until the pod is gone and reports whether the name is
// free. A pod still pending or running may be another run's test of the
// node and stays.
func (r *NodePodRunner) removeFinished(ctx context.Context, spec NodePodSpec, name string) bool {
	pods := r.Kube.CoreV1().Pods(spec.Namespace)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) || p.Labels[CheckPodLabel] != spec.Check {
		return false
	}
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil && !apierrors.IsNotFound(err) {
		return false
	}
	r.event("deleted pod %s/%s, which an earlier run left finished (%s)", spec.Namespace, name, p.Status.Phase)
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	for i := 0; i < 30; i++ {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-clk.After(time.Second):
		}
	}
	return false
}
