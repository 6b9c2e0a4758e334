package nccl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Runner creates a rendered test in the cluster, waits for the pod with
// the results, reads its log through the pods/log API and cleans up.
type Runner struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Clock   clock.Clock
	// Poll is the status poll interval (default 2s).
	Poll time.Duration
	// Timeout bounds the wait (default the spec's deadline plus a minute).
	Timeout time.Duration
	// Keep leaves the objects in place for debugging.
	Keep bool
	// OnEvent receives one line per state change.
	OnEvent func(msg string)
}

// RunResult is what a run left behind.
type RunResult struct {
	// Pod is the pod whose log was read.
	Pod string `json:"pod,omitempty"`
	// Phase is that pod's final phase.
	Phase string `json:"phase,omitempty"`
	// Log is the container's log (capped at 16 MiB).
	Log string `json:"-"`
	// CleanupErrors lists objects that could not be deleted.
	CleanupErrors []string `json:"cleanupErrors,omitempty"`
}

// ErrTimeout means the results pod did not finish in time.
var ErrTimeout = errors.New("timed out waiting for the NCCL test")

func (r *Runner) event(format string, args ...any) {
	if r.OnEvent != nil {
		r.OnEvent(fmt.Sprintf(format, args...))
	}
}

// Run creates the manifest's objects, waits and reads the results log.
// Objects are deleted afterwards (also on error) unless Keep is set.
func (r *Runner) Run(ctx context.Context, m *Manifest) (res *RunResult, err error) {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	poll := r.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = m.Spec.Deadline + time.Minute
	}
	res = &RunResult{}
	var created []*unstructured.Unstructured
	defer func() {
		if r.Keep {
			return
		}
		res.CleanupErrors = r.cleanup(ctx, created)
	}()
	for _, o := range m.Objects {
		gvr, err := GVR(o)
		if err != nil {
			return res, err
		}
		_, err = r.Dynamic.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			return res, fmt.Errorf("creating %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		created = append(created, o)
	}
	r.event("created %s in namespace %s", m, m.Spec.Namespace)
	deadline := clk.Now().Add(timeout)
	lastState := ""
	for {
		pods, err := r.Kube.CoreV1().Pods(m.Spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: m.LauncherSelector})
		if err != nil {
			return res, fmt.Errorf("listing the test's pods: %w", err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				res.Pod, res.Phase = p.Name, string(p.Status.Phase)
				r.event("pod %s/%s %s", p.Namespace, p.Name, strings.ToLower(res.Phase))
				res.Log, err = r.readLog(ctx, m, p.Name)
				return res, err
			}
		}
		state := podsState(pods.Items)
		if failed, msg := r.mainFailed(ctx, m); failed {
			return res, fmt.Errorf("%s %s failed before its results pod finished: %s", m.Main().GetKind(), m.Main().GetName(), msg)
		}
		if state != lastState {
			r.event("waiting for %s: %s", m.Main().GetName(), state)
			lastState = state
		}
		if !clk.Now().Before(deadline) {
			return res, fmt.Errorf("%w after %s (%s)", ErrTimeout, timeout, state)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-clk.After(poll):
		}
	}
}

func (r *Runner) readLog(ctx context.Context, m *Manifest, pod string) (string, error) {
	limit := int64(16 << 20)
	req := r.Kube.CoreV1().Pods(m.Spec.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: m.Container, LimitBytes: &limit})
	rc, err := req.Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the log of pod %s/%s: %w", m.Spec.Namespace, pod, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit))
	if err != nil {
		return string(b), fmt.Errorf("reading the log of pod %s/%s: %w", m.Spec.Namespace, pod, err)
	}
	return string(b), nil
}

// mainFailed reports a Failed condition on the main object.
func (r *Runner) mainFailed(ctx context.Context, m *Manifest) (bool, string) {
	main := m.Main()
	gvr, err := GVR(main)
	if err != nil {
		return false, ""
	}
	u, err := r.Dynamic.Resource(gvr).Namespace(main.GetNamespace()).Get(ctx, main.GetName(), metav1.GetOptions{})
	if err != nil {
		return false, ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if cm["type"] == "Failed" && cm["status"] == "True" {
			msg, _ := cm["message"].(string)
			reason, _ := cm["reason"].(string)
			return true, strings.TrimSpace(reason + " " + msg)
		}
	}
	return false, ""
}

func podsState(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no results pod yet"
	}
	var parts []string
	for _, p := range pods {
		s := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				s += " (" + c.Message + ")"
			}
		}
		parts = append(parts, p.Name+" "+s)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// cleanup deletes the created objects, newest first, with their pods.
// It runs after Ctrl-C too, so it keeps the run's context values (the -v
// logger that withholds bodies: one of the objects is the SSH key Secret)
// but not its cancellation.
func (r *Runner) cleanup(runCtx context.Context, created []*unstructured.Unstructured) []string {
	var errs []string
	ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 30*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	for i := len(created) - 1; i >= 0; i-- {
		o := created[i]
		gvr, err := GVR(o)
		if err != nil {
			continue
		}
		err = r.Dynamic.Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	if len(created) > 0 {
		r.event("deleted %d object(s) of the test", len(created)-len(errs))
	}
	return errs
}
