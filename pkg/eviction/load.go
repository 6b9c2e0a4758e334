package eviction

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// DefaultPageSize is the page size Load asks the API server for when it
// lists in pages.
const DefaultPageSize = 1000

// LoadOptions say what Load reads.
type LoadOptions struct {
	// Namespace limits pods and PDBs to one namespace ("" for all).
	Namespace string
	// NodeSelector is a label selector for the nodes ("" for all).
	NodeSelector string
	// PageSize is the list page size (0: DefaultPageSize).
	PageSize int64
	// Stream reads each resource with one watch-list request (a watch with
	// sendInitialEvents that ends at the initial-events-end bookmark)
	// before falling back to paged lists. The server encodes while the
	// client decodes, and no page of full objects is ever held at once.
	// Only a real API server does this; fake clientsets never send the
	// bookmark.
	Stream bool
	// NodeStatus keeps each node's conditions, nodeInfo and allocatable
	// in the snapshot, for callers that judge node health from the same
	// read (kubectl skew preflight) instead of listing nodes again.
	NodeStatus bool
	// NodeAnnotations are node annotation keys kept besides the one the
	// Evaluator reads, for callers that take other facts of the nodes from
	// the same read (pkg/skew's inventory: skew.NodeAnnotations).
	NodeAnnotations []string
	// KeepPods names a namespace whose pods are also kept whole (without
	// managed fields) in Snapshot.KeptPods, for callers that judge those
	// pods' health from the same read instead of listing them again
	// (kubectl skew preflight: kube-system).
	KeepPods string
	// StreamTimeout bounds each watch-list stream, the one request that
	// stands for a whole list (the caller's --request-timeout; 0: none).
	// Without it client-go retries a watch that times out, ten times.
	StreamTimeout time.Duration
}

// Snapshot is what Load read: every node matching the selector, every pod
// and PodDisruptionBudget (in the namespace, if one was given), slimmed to
// the fields the Evaluator reads.
type Snapshot struct {
	Nodes []*corev1.Node
	Pods  []*corev1.Pod
	PDBs  []*policyv1.PodDisruptionBudget
	// KeptPods are the whole pods of LoadOptions.KeepPods' namespace.
	KeptPods []*corev1.Pod
	// ForbiddenPods and ForbiddenPDBs name the namespaces whose pods or
	// PDBs the caller may not list, with the server's message. The rest
	// was still read.
	ForbiddenPods map[string]string
	ForbiddenPDBs map[string]string
	// ListCalls counts the list requests made (pages included) and
	// StreamCalls the watch-list requests.
	ListCalls   int
	StreamCalls int
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

// Load reads nodes, pods and PodDisruptionBudgets at once, each with one
// request (a watch-list stream, see LoadOptions.Stream) or one paged list,
// never a request per pod. When a cluster-wide read of pods or PDBs is
// forbidden it falls back to one list per namespace and records the
// namespaces it may not read, so that one forbidden namespace does not hide
// the others. Errors other than forbidden namespaces are returned as they
// are.
func Load(ctx context.Context, client kubernetes.Interface, opts LoadOptions) (*Snapshot, error) {
	l := &loader{client: client, opts: opts, page: opts.PageSize}
	if l.page <= 0 {
		l.page = DefaultPageSize
	}
	l.streamOff.Store(!opts.Stream)
	s := &Snapshot{ForbiddenPods: map[string]string{}, ForbiddenPDBs: map[string]string{}}

	nodes := resource[*corev1.Node]{
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
		list: func(ctx context.Context, o metav1.ListOptions, add func(*corev1.Node)) (string, error) {
			r, err := client.CoreV1().Nodes().List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range r.Items {
				add(&r.Items[i])
			}
			return r.Continue, nil
		},
		add: func(n *corev1.Node) {
			sn := slimNode(n)
			if opts.NodeStatus {
				sn.Status = corev1.NodeStatus{Conditions: n.Status.Conditions, NodeInfo: n.Status.NodeInfo, Allocatable: n.Status.Allocatable}
			}
			for _, k := range opts.NodeAnnotations {
				if v, ok := n.Annotations[k]; ok {
					if sn.Annotations == nil {
						sn.Annotations = map[string]string{}
					}
					sn.Annotations[k] = v
				}
			}
			s.Nodes = append(s.Nodes, sn)
		},
	}
	pods := func(ns string) resource[*corev1.Pod] {
		return resource[*corev1.Pod]{
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.CoreV1().Pods(ns).Watch(ctx, o)
			},
			list: func(ctx context.Context, o metav1.ListOptions, add func(*corev1.Pod)) (string, error) {
				r, err := client.CoreV1().Pods(ns).List(ctx, o)
				if err != nil {
					return "", err
				}
				for i := range r.Items {
					add(&r.Items[i])
				}
				return r.Continue, nil
			},
			add: func(p *corev1.Pod) {
				s.Pods = append(s.Pods, Slim(p))
				if opts.KeepPods != "" && p.Namespace == opts.KeepPods {
					c := *p
					c.ManagedFields = nil
					s.KeptPods = append(s.KeptPods, &c)
				}
			},
			// Pods are most of what is read: decoded straight into their
			// slim form when the server streams protobuf.
			open: rawWatcher(client, ns, "pods"),
			fast: func(raw []byte) error {
				p, err := DecodeSlimPod(raw)
				if err != nil {
					return err
				}
				s.Pods = append(s.Pods, p)
				if opts.KeepPods != "" && p.Namespace == opts.KeepPods {
					whole := &corev1.Pod{}
					if err := whole.Unmarshal(raw); err != nil {
						return fmt.Errorf("decoding pod %s/%s: %w", p.Namespace, p.Name, err)
					}
					whole.ManagedFields = nil
					s.KeptPods = append(s.KeptPods, whole)
				}
				return nil
			},
		}
	}
	pdbs := func(ns string) resource[*policyv1.PodDisruptionBudget] {
		return resource[*policyv1.PodDisruptionBudget]{
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, o)
			},
			list: func(ctx context.Context, o metav1.ListOptions, add func(*policyv1.PodDisruptionBudget)) (string, error) {
				r, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, o)
				if err != nil {
					return "", err
				}
				for i := range r.Items {
					add(&r.Items[i])
				}
				return r.Continue, nil
			},
			add: func(b *policyv1.PodDisruptionBudget) {
				c := *b
				c.ManagedFields = nil
				s.PDBs = append(s.PDBs, &c)
			},
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := readAll(gctx, l, nodes, metav1.ListOptions{LabelSelector: opts.NodeSelector}, func() { s.Nodes = nil }); err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		return l.perNamespace(gctx, "pods", s.ForbiddenPods, func(ctx context.Context, ns string) error {
			return readAll(ctx, l, pods(ns), metav1.ListOptions{}, func() {
				s.Pods = dropNamespace(s.Pods, ns)
				s.KeptPods = dropNamespace(s.KeptPods, ns)
			})
		})
	})
	g.Go(func() error {
		return l.perNamespace(gctx, "poddisruptionbudgets", s.ForbiddenPDBs, func(ctx context.Context, ns string) error {
			return readAll(ctx, l, pdbs(ns), metav1.ListOptions{}, func() { s.PDBs = dropNamespace(s.PDBs, ns) })
		})
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.ListCalls, s.StreamCalls = int(l.lists.Load()), int(l.streams.Load())
	return s, nil
}

type loader struct {
	client kubernetes.Interface
	opts   LoadOptions
	page   int64
	// streamOff is set once a watch-list request was refused, so that the
	// per-namespace fallback does not ask again for every namespace.
	streamOff       atomic.Bool
	lists, streams  atomic.Int64
	nsOnce          sync.Once
	namespaces      []string
	namespacesError error
}

// resource reads one kind of object: by a watch-list stream or by pages,
// handing every object to add.
type resource[T runtime.Object] struct {
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	list  func(context.Context, metav1.ListOptions, func(T)) (string, error)
	add   func(T)
	// open and fast, when set, read a protobuf watch-list stream without
	// client-go's decoders: open starts the request and fast takes one
	// object's message (see readProtoWatch). A server that answers in
	// another encoding is read through watch instead.
	open func(context.Context, metav1.ListOptions) (io.ReadCloser, error)
	fast func(raw []byte) error
}

// rawWatcher returns the open function of a resource for client, or nil
// when client has no REST client to stream with (fake clientsets).
func rawWatcher(client kubernetes.Interface, ns, resource string) func(context.Context, metav1.ListOptions) (io.ReadCloser, error) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil
	}
	return func(ctx context.Context, o metav1.ListOptions) (io.ReadCloser, error) {
		return openRawWatch(ctx, rc, ns, resource, o)
	}
}

// readAll reads every object of r, streaming when allowed and falling back
// to paged lists when the stream is refused (a server without watch-list,
// a role without watch) or cut short; reset discards what a broken stream
// had added. Other errors are returned as they are.
func readAll[T runtime.Object](ctx context.Context, l *loader, r resource[T], base metav1.ListOptions, reset func()) error {
	if !l.streamOff.Load() {
		l.streams.Add(1)
		err := stream(ctx, r, base, l.opts.StreamTimeout)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		refused := apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
		if !refused && !errors.Is(err, errStreamEnded) {
			// A throttled, failing or hanging server fails a list the
			// same way; client-go has already retried what it retries.
			return err
		}
		reset()
		if refused {
			l.streamOff.Store(true)
		}
	}
	o := base
	o.Limit = l.page
	for {
		l.lists.Add(1)
		next, err := r.list(ctx, o, r.add)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		o.Continue = next
	}
}

// errStreamEnded is a watch-list stream that closed before its
// initial-events-end bookmark.
var errStreamEnded = errors.New("watch-list stream ended before all objects were sent")

// errStreamTimeout is a watch-list stream that did not finish within
// LoadOptions.StreamTimeout.
var errStreamTimeout = errors.New("the server did not send the whole list in time (--request-timeout)")

func stream[T runtime.Object](ctx context.Context, r resource[T], base metav1.ListOptions, timeout time.Duration) error {
	o := base
	o.SendInitialEvents = ptr.To(true)
	o.AllowWatchBookmarks = true
	o.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	o.ResourceVersion = ""
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errStreamTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	var w watch.Interface
	var err error
	if r.open != nil && r.fast != nil {
		w, err = streamRaw(ctx, r, o)
		if context.Cause(ctx) == errStreamTimeout {
			return fmt.Errorf("%w after %s", errStreamTimeout, timeout)
		}
		if w == nil {
			return err
		}
	} else {
		w, err = r.watch(ctx, o)
	}
	if err != nil && context.Cause(ctx) == errStreamTimeout {
		return fmt.Errorf("%w after %s: %w", errStreamTimeout, timeout, err)
	}
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == errStreamTimeout {
				return fmt.Errorf("%w after %s", errStreamTimeout, timeout)
			}
			return ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				return errStreamEnded
			}
			switch ev.Type {
			case watch.Added:
				if obj, ok := ev.Object.(T); ok {
					r.add(obj)
				}
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					return nil
				}
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			}
		}
	}
}

// streamRaw reads r's watch-list stream with readProtoWatch and returns
// its outcome, or, when the server answered in JSON, a watcher over the
// same response for stream to read.
func streamRaw[T runtime.Object](ctx context.Context, r resource[T], o metav1.ListOptions) (watch.Interface, error) {
	body, err := r.open(ctx, o)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(body, 256<<10)
	if first, _ := br.Peek(1); len(first) == 1 && first[0] == '{' {
		return jsonWatcher(body, br), nil
	}
	defer body.Close()
	return nil, readProtoWatch(ctx, br, r.fast)
}

// perNamespace reads all namespaces (or the one of the options) with read;
// when that is forbidden cluster-wide it reads namespace by namespace and
// records the ones it may not read in forbidden.
func (l *loader) perNamespace(ctx context.Context, what string, forbidden map[string]string, read func(context.Context, string) error) error {
	err := read(ctx, l.opts.Namespace)
	if err == nil || !apierrors.IsForbidden(err) {
		if err != nil {
			return fmt.Errorf("listing %s: %w", what, err)
		}
		return nil
	}
	if l.opts.Namespace != "" {
		forbidden[l.opts.Namespace] = err.Error()
		return nil
	}
	nss, nerr := l.namespaceList(ctx)
	if nerr != nil {
		return fmt.Errorf("listing %s in all namespaces: %w (and listing namespaces to check them one by one: %v)", what, err, nerr)
	}
	for _, ns := range nss {
		if err := read(ctx, ns); err != nil {
			if !apierrors.IsForbidden(err) {
				return fmt.Errorf("listing %s in namespace %s: %w", what, ns, err)
			}
			forbidden[ns] = err.Error()
		}
	}
	return nil
}

func (l *loader) namespaceList(ctx context.Context) ([]string, error) {
	l.nsOnce.Do(func() {
		l.lists.Add(1)
		r, err := l.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			l.namespacesError = err
			return
		}
		for _, n := range r.Items {
			l.namespaces = append(l.namespaces, n.Name)
		}
		sort.Strings(l.namespaces)
	})
	return l.namespaces, l.namespacesError
}

// dropNamespace removes the objects of namespace ns ("" for all).
func dropNamespace[T metav1.Object](objs []T, ns string) []T {
	if ns == "" {
		return objs[:0]
	}
	out := objs[:0]
	for _, o := range objs {
		if o.GetNamespace() != ns {
			out = append(out, o)
		}
	}
	return out
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
