package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// RootOptions say how the agent finds its gang's root object, in order:
// Root names it; else the pod's labels (a downward-API file) name a JobSet,
// LeaderWorkerSet or Kueue pod group; else the agent reads its own pod and
// walks its owners as `kubectl gang-drain` does (which needs get on pods
// and on every owner kind on the way).
type RootOptions struct {
	Namespace string
	// Root is KIND/NAME, e.g. JobSet/llm or PyTorchJob/bert.
	Root string
	// RootAPIVersion overrides the usual apiVersion of Root's kind.
	RootAPIVersion string
	// LabelsFile is a downward-API file of the pod's labels (key="value"
	// lines); a missing file is skipped.
	LabelsFile string
	// PodName is the agent's own pod.
	PodName string
}

// ResolveTarget finds the root object; how says which way, for the log.
func ResolveTarget(ctx context.Context, dyn dynamic.Interface, o RootOptions) (t checkpoint.Target, how string, err error) {
	if o.Namespace == "" {
		return t, "", errors.New("no namespace: set --namespace or POD_NAMESPACE (downward API metadata.namespace)")
	}
	if o.Root != "" {
		kind, name, ok := strings.Cut(o.Root, "/")
		if !ok || kind == "" || name == "" {
			return t, "", fmt.Errorf("--root %q: want KIND/NAME, e.g. JobSet/llm-pretrain", o.Root)
		}
		obj, err := gang.RootRef(o.RootAPIVersion, kind, o.Namespace, name)
		if err != nil {
			return t, "", fmt.Errorf("--root %q: %w", o.Root, err)
		}
		return obj.Target(), "--root", nil
	}
	if o.LabelsFile != "" {
		labels, err := ReadLabelsFile(o.LabelsFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return t, "", fmt.Errorf("reading the pod's labels: %w", err)
		}
		if obj := gang.RootFromLabels(o.Namespace, labels); obj != nil {
			return obj.Target(), "the pod's labels in " + o.LabelsFile, nil
		}
	}
	if o.PodName == "" {
		return t, "", errors.New("cannot find the gang's root object: set --root KIND/NAME, mount the pod's labels (--labels-file), or set --pod-name (POD_NAME)")
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	u, err := dyn.Resource(pods).Namespace(o.Namespace).Get(ctx, o.PodName, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return t, "", fmt.Errorf("forbidden: the agent may not get pod %s/%s to find its owners (set --root KIND/NAME instead): %v", o.Namespace, o.PodName, apiMessage(err))
		}
		return t, "", fmt.Errorf("reading pod %s/%s: %w", o.Namespace, o.PodName, err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		return t, "", err
	}
	d := &gang.Discoverer{Dynamic: dyn}
	obj, err := d.RootOfPod(ctx, &pod)
	if err != nil {
		return t, "", fmt.Errorf("walking the owners of pod %s/%s: %w (set --root KIND/NAME instead)", o.Namespace, o.PodName, err)
	}
	if obj == nil {
		return t, "", fmt.Errorf("pod %s/%s belongs to no gang gang-drain knows: set --root KIND/NAME", o.Namespace, o.PodName)
	}
	return obj.Target(), "the owners of pod " + o.PodName, nil
}

// ReadLabelsFile parses a downward-API labels file: one key="value" per
// line, the value quoted as Go quotes strings.
func ReadLabelsFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not key=\"value\"", path, line)
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		out[k] = v
	}
	return out, sc.Err()
}

// rankLabels mark a pod's place in its gang; a pod is rank 0 when every
// one of them it carries says 0.
var rankLabels = []string{
	// The completion index of an Indexed Job's pod, a label since
	// Kubernetes 1.28 (k8s.io/api batch/v1 JobCompletionIndexAnnotation).
	"batch.kubernetes.io/job-completion-index",
	// Which Job of a replicated job (sigs.k8s.io/jobset api/jobset/v1alpha2 JobIndexKey).
	"jobset.sigs.k8s.io/job-index",
	// Kubeflow training operator replicas.
	"training.kubeflow.org/replica-index",
}

// NotRankZero reports the first rank label that says the pod is not rank
// 0 (ok false when it is rank 0 or carries none).
func NotRankZero(labels map[string]string) (label, value string, ok bool) {
	for _, l := range rankLabels {
		if v, has := labels[l]; has && v != "0" {
			return l, v, true
		}
	}
	return "", "", false
}
