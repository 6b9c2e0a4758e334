package eviction

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultPageSize is the page size Load asks the API server for.
const DefaultPageSize = 1000

// LoadOptions say what Load reads.
type LoadOptions struct {
	// Namespace limits pods and PDBs to one namespace ("" for all).
	Namespace string
	// NodeSelector is a label selector for the nodes ("" for all).
	NodeSelector string
	// PageSize is the list page size (0: DefaultPageSize).
	PageSize int64
}

// Snapshot is what Load read: every node matching the selector, every pod
// and PodDisruptionBudget (in the namespace, if one was given), slimmed to
// the fields the Evaluator reads.
type Snapshot struct {
	Nodes []*corev1.Node
	Pods  []*corev1.Pod
	PDBs  []*policyv1.PodDisruptionBudget
	// ForbiddenPods and ForbiddenPDBs name the namespaces whose pods or
	// PDBs the caller may not list, with the server's message. The rest
	// was still read.
	ForbiddenPods map[string]string
	ForbiddenPDBs map[string]string
	// ListCalls counts the list requests made (pages included).
	ListCalls int
}

// Index builds the Evaluator's index from the snapshot, marking the
// namespaces whose PDBs could not be read.
func (s *Snapshot) Index() *Index {
	idx := NewIndex(s.Nodes, s.Pods, s.PDBs)
	for ns, why := range s.ForbiddenPDBs {
		idx.SetPDBsUnknown(ns, why)
	}
	return idx
}

// Load reads nodes, pods and PodDisruptionBudgets with a fixed number of
// paged list calls (one list of each, cluster-wide), never a request per
// pod. When a cluster-wide list of pods or PDBs is forbidden it falls back
// to one list per namespace and records the namespaces it may not read,
// so that one forbidden namespace does not hide the others. Errors other
// than forbidden namespaces are returned as they are.
func Load(ctx context.Context, client kubernetes.Interface, opts LoadOptions) (*Snapshot, error) {
	page := opts.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	s := &Snapshot{ForbiddenPods: map[string]string{}, ForbiddenPDBs: map[string]string{}}

	err := listPages(ctx, page, &s.ListCalls, metav1.ListOptions{LabelSelector: opts.NodeSelector},
		func(ctx context.Context, o metav1.ListOptions) (string, error) {
			l, err := client.CoreV1().Nodes().List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				s.Nodes = append(s.Nodes, slimNode(&l.Items[i]))
			}
			return l.Continue, nil
		})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}

	listPods := func(ns string) error {
		return listPages(ctx, page, &s.ListCalls, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) (string, error) {
			l, err := client.CoreV1().Pods(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				s.Pods = append(s.Pods, Slim(&l.Items[i]))
			}
			return l.Continue, nil
		})
	}
	listPDBs := func(ns string) error {
		return listPages(ctx, page, &s.ListCalls, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) (string, error) {
			l, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				b := l.Items[i]
				b.ManagedFields = nil
				s.PDBs = append(s.PDBs, &b)
			}
			return l.Continue, nil
		})
	}

	var namespaces []string
	nsList := func() ([]string, error) {
		if namespaces != nil {
			return namespaces, nil
		}
		s.ListCalls++
		l, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, n := range l.Items {
			namespaces = append(namespaces, n.Name)
		}
		sort.Strings(namespaces)
		return namespaces, nil
	}

	perNamespace := func(what string, list func(string) error, forbidden map[string]string) error {
		err := list(opts.Namespace)
		if err == nil || !apierrors.IsForbidden(err) {
			if err != nil {
				return fmt.Errorf("listing %s: %w", what, err)
			}
			return nil
		}
		if opts.Namespace != "" {
			forbidden[opts.Namespace] = err.Error()
			return nil
		}
		nss, nerr := nsList()
		if nerr != nil {
			return fmt.Errorf("listing %s in all namespaces: %w (and listing namespaces to check them one by one: %v)", what, err, nerr)
		}
		for _, ns := range nss {
			if err := list(ns); err != nil {
				if !apierrors.IsForbidden(err) {
					return fmt.Errorf("listing %s in namespace %s: %w", what, ns, err)
				}
				forbidden[ns] = err.Error()
			}
		}
		return nil
	}
	if err := perNamespace("pods", listPods, s.ForbiddenPods); err != nil {
		return nil, err
	}
	if err := perNamespace("poddisruptionbudgets", listPDBs, s.ForbiddenPDBs); err != nil {
		return nil, err
	}
	return s, nil
}

func listPages(ctx context.Context, limit int64, calls *int, base metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (string, error)) error {
	o := base
	o.Limit = limit
	for {
		*calls++
		next, err := list(ctx, o)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		o.Continue = next
	}
}

func slimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: n.Labels}, Spec: n.Spec}
	if v, ok := n.Annotations[DoNotDisruptAnnotation]; ok {
		out.Annotations = map[string]string{DoNotDisruptAnnotation: v}
	}
	for _, mf := range n.ManagedFields {
		if mf.FieldsV1 != nil && containsUnschedulable(mf.FieldsV1.Raw) {
			out.ManagedFields = append(out.ManagedFields, mf)
		}
	}
	return out
}

func containsUnschedulable(raw []byte) bool {
	return strings.Contains(string(raw), `"f:unschedulable"`)
}

// Slim returns a copy of pod with only the fields the Evaluator reads, so
// that tens of thousands of pods fit in little memory.
func Slim(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels,
			DeletionTimestamp: p.DeletionTimestamp, Finalizers: p.Finalizers,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for k, v := range p.Annotations {
		if k == corev1.MirrorPodAnnotationKey || k == DoNotDisruptAnnotation {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out
}
