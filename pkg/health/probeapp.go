package health

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// The synthetic app: a pod running a minimal HTTP server and a Service in
// front of it, called through the apiserver's service proxy
// (GET /api/v1/namespaces/NS/services/NAME:PORT/proxy/), so that the
// runner needs no network path to pods, then deleted.

// Defaults of the probe app.
const (
	// DefaultProbeAppImage is agnhost, the image Kubernetes' own e2e tests
	// serve HTTP from, at a tag their image manifest pins
	// (kubernetes/kubernetes test/utils/image/manifest.go:
	// configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost",
	// "2.52"}); its netexec command answers GET / with the request's
	// timestamp (test/images/agnhost/README.md, netexec). No registry
	// client runs here to hold it: --synthetic-app-image overrides it.
	DefaultProbeAppImage = "registry.k8s.io/e2e-test-images/agnhost:2.52"
	// DefaultProbeAppPort is the port the server listens on (agnhost
	// netexec's --http-port default, 8080).
	DefaultProbeAppPort = 8080
	// DefaultProbeAppTimeout bounds the wait for the pod to be Ready.
	DefaultProbeAppTimeout = 2 * time.Minute
	// ProbeAppLabel marks every object the probe app creates; a run deletes
	// what an interrupted run left behind by it.
	ProbeAppLabel = "gpufleet.dev/probe-app"
	// ProbeAppName prefixes the names of its pod and Service.
	ProbeAppName = "gpufleet-probe-app"
	// KwokNodeAnnotation marks a node KWOK fakes ("fake"): its pods never
	// run (https://kwok.sigs.k8s.io/docs/user/kwok-in-cluster/, KWOK
	// v0.7 "kwok.x-k8s.io/node: fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// DefaultProbeAppCommand runs agnhost's HTTP server on the port.
func DefaultProbeAppCommand(port int32) []string {
	return []string{"/agnhost", "netexec", "--http-port=" + strconv.Itoa(int(port))}
}

// ProbeAppOptions say what the probe app runs and where.
type ProbeAppOptions struct {
	// Namespace the pod and Service are created in.
	Namespace string `json:"namespace"`
	// Image of the HTTP server (DefaultProbeAppImage when empty).
	Image string `json:"image,omitempty"`
	// Command runs the server (DefaultProbeAppCommand when empty); it must
	// answer GET / on Port with a 2xx.
	Command []string `json:"command,omitempty"`
	// Port the server listens on (DefaultProbeAppPort when 0).
	Port int32 `json:"port,omitempty"`
	// Timeout bounds the wait for the pod to be Ready
	// (DefaultProbeAppTimeout when 0); a pod unscheduled then is UNKNOWN, one scheduled and not Ready a FAIL.
	Timeout time.Duration `json:"timeout,omitempty"`
	// DryRun sends the creates as server-side dry runs (nothing is stored)
	// and calls nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Poll is how often the pod and the proxy are polled (1 s when 0).
	Poll time.Duration `json:"-"`
}

func (o ProbeAppOptions) withDefaults() ProbeAppOptions {
	if o.Namespace == "" {
		o.Namespace = metav1.NamespaceDefault
	}
	if o.Image == "" {
		o.Image = DefaultProbeAppImage
	}
	if o.Port == 0 {
		o.Port = DefaultProbeAppPort
	}
	if len(o.Command) == 0 {
		o.Command = DefaultProbeAppCommand(o.Port)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultProbeAppTimeout
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// Probe app verdicts.
const (
	ProbeAppPass    = "PASS"
	ProbeAppFail    = "FAIL"
	ProbeAppUnknown = "UNKNOWN"
	// ProbeAppDryRun: the dry-run creates were admitted; nothing ran.
	ProbeAppDryRun = "DRYRUN"
)

// ProbeAppResult is what one run of the probe app found.
type ProbeAppResult struct {
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// Node is where the pod ran.
	Node string `json:"node,omitempty"`
	// Evidence lists the steps, one a line.
	Evidence []string `json:"evidence,omitempty"`
	// LeftBehind names what could not be deleted.
	LeftBehind []string `json:"leftBehind,omitempty"`
}

// ProbeAppCommand shows the probe app's objects and calls it as the gate
// does.
func ProbeAppCommand(o ProbeAppOptions) string {
	o = o.withDefaults()
	return fmt.Sprintf("kubectl -n %s get pods,services -l %s -o wide", o.Namespace, ProbeAppLabel)
}

// ProbeAppCleanupCommand deletes what a run left behind.
func ProbeAppCleanupCommand(ns string) string {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return fmt.Sprintf("kubectl -n %s delete pods,services -l %s", ns, ProbeAppLabel)
}

// forbidden says which verb on which resource the server refused, or "".
func forbidden(verb, resource string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("forbidden: cannot %s %s: %v", verb, resource, err)
	}
	return ""
}

func failed(verb, resource string, err error) string {
	if f := forbidden(verb, resource, err); f != "" {
		return f
	}
	return fmt.Sprintf("could not %s %s: %v", verb, resource, err)
}

// RunnableNodes splits the nodes into those that can run the probe pod
// (not KWOK's fakes, not cordoned, Ready) and says why the others cannot.
func RunnableNodes(nodes []corev1.Node) (ok []string, why []string) {
	for _, n := range nodes {
		switch {
		case n.Annotations[KwokNodeAnnotation] == "fake":
			why = append(why, fmt.Sprintf("node %s is a KWOK fake node (%s=fake): its pods never run", n.Name, KwokNodeAnnotation))
		case n.Spec.Unschedulable:
			why = append(why, fmt.Sprintf("node %s is cordoned", n.Name))
		case !nodeReady(n):
			why = append(why, fmt.Sprintf("node %s is not Ready", n.Name))
		default:
			ok = append(ok, n.Name)
		}
	}
	return ok, why
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probeAppObjects are the pod and Service of one run.
func probeAppObjects(o ProbeAppOptions, run string) (*corev1.Pod, *corev1.Service) {
	name := ProbeAppName + "-" + run
	labels := map[string]string{ProbeAppLabel: run, "app.kubernetes.io/managed-by": "kubectl-skew"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			// KWOK's fake nodes carry type=kwok by KWOK's convention (and
			// this repository's fixtures): a pod there would be reported
			// Running by KWOK and never answer.
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"kwok"}}}}},
			}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "main", Image: o.Image, Command: o.Command,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: o.Port}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
					PeriodSeconds: 2},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: map[string]string{ProbeAppLabel: run},
			Ports: []corev1.ServicePort{{Name: "http", Port: o.Port, TargetPort: intstr.FromString("http")}}},
	}
	return pod, svc
}

// ProxyPath is the apiserver path the probe app is called through.
func ProxyPath(ns, svc string) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/services/%s:http/proxy/", ns, svc)
}

// RunProbeApp deletes what an earlier run left (by ProbeAppLabel), then
// creates the pod and its Service, waits for the pod to be Ready, calls
// it through the apiserver's service proxy and deletes both, whatever
// happened (also when ctx ends: the deletes get a context of their own).
func RunProbeApp(ctx context.Context, kube kubernetes.Interface, opts ProbeAppOptions) (res ProbeAppResult) {
	o := opts.withDefaults()
	step := func(f string, a ...any) { res.Evidence = append(res.Evidence, fmt.Sprintf(f, a...)) }
	unknown := func(msg string) ProbeAppResult {
		res.Verdict, res.Message = ProbeAppUnknown, msg
		return res
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return unknown(failed("list", "nodes", err))
	}
	ok, why := RunnableNodes(nodes.Items)
	if len(ok) == 0 && o.DryRun {
		// A dry run runs nothing: it still proves admission and RBAC.
		step("no node of %d can run the probe app: a real run would be UNKNOWN", len(nodes.Items))
	} else if len(ok) == 0 {
		sort.Strings(why)
		res.Evidence = why
		kwok := 0
		for _, n := range nodes.Items {
			if n.Annotations[KwokNodeAnnotation] == "fake" {
				kwok++
			}
		}
		switch {
		case len(nodes.Items) == 0:
			return unknown("no node to run the probe app on")
		case kwok == len(nodes.Items):
			return unknown(fmt.Sprintf("no node can run the probe app: all %d nodes are KWOK fake nodes (%s=fake), whose pods never run", kwok, KwokNodeAnnotation))
		}
		return unknown(fmt.Sprintf("no node can run the probe app: none of %d nodes is Ready, schedulable and real", len(nodes.Items)))
	}
	if len(ok) > 0 {
		step("%d of %d nodes can run it", len(ok), len(nodes.Items))
	}

	if !o.DryRun {
		if left, err := deleteProbeApps(context.WithoutCancel(ctx), kube, o.Namespace, ProbeAppLabel); err != nil {
			return unknown(err.Error())
		} else if len(left) > 0 {
			step("deleted what an earlier run left behind: %s", strings.Join(left, ", "))
		}
	}

	run := rand.String(5)
	pod, svc := probeAppObjects(o, run)
	create := metav1.CreateOptions{FieldManager: "kubectl-skew"}
	if o.DryRun {
		create.DryRun = []string{metav1.DryRunAll}
	}
	if !o.DryRun {
		defer func() {
			// The objects go even when ctx ended (an interrupt): a
			// context of its own, bounded.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			sel := ProbeAppLabel + "=" + run
			if _, err := deleteProbeApps(cctx, kube, o.Namespace, sel); err != nil {
				res.LeftBehind = append(res.LeftBehind, fmt.Sprintf("pod and service %s/%s: %v; delete them: %s", o.Namespace, pod.Name, err, ProbeAppCleanupCommand(o.Namespace)))
				return
			}
			step("deleted pod and service %s/%s", o.Namespace, pod.Name)
		}()
	}
	if _, err := kube.CoreV1().Services(o.Namespace).Create(ctx, svc, create); err != nil {
		return unknown(failed("create", "services", err))
	}
	if _, err := kube.CoreV1().Pods(o.Namespace).Create(ctx, pod, create); err != nil {
		return unknown(failed("create", "pods", err))
	}
	if o.DryRun {
		res.Verdict = ProbeAppDryRun
		res.Message = fmt.Sprintf("dry run: pod and service %s/%s admitted (server-side dry run, nothing stored); the probe app was not deployed or called", o.Namespace, pod.Name)
		return res
	}
	step("created pod and service %s/%s (image %s)", o.Namespace, pod.Name, o.Image)

	// Wait for the pod to be Ready.
	var cur *corev1.Pod
	deadline := time.Now().Add(o.Timeout)
	for {
		cur, err = kube.CoreV1().Pods(o.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return unknown(failed("get", "pods", err))
		}
		if cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded {
			res.Verdict, res.Node = ProbeAppFail, cur.Spec.NodeName
			res.Message = fmt.Sprintf("the probe pod %s/%s ended (%s) on node %s: %s", o.Namespace, pod.Name, cur.Status.Phase, orDash(cur.Spec.NodeName), containerState(cur))
			return res
		}
		if podReady(cur) {
			break
		}
		if time.Now().After(deadline) {
			res.Node = cur.Spec.NodeName
			// Unscheduled (no node could take it) is UNKNOWN: the gate
			// learnt nothing of the app path. So is a pod bound to a KWOK
			// fake node, which runs nothing (the local control plane's KWOK
			// makes such pods Ready at once, caught below). A pod bound to
			// a real node that never got Ready (sandbox or image pull
			// failing, crash) is the node failing to run an app: FAIL, or
			// verify would drop it as an UNKNOWN the baseline also had.
			if cur.Spec.NodeName == "" {
				return unknown(fmt.Sprintf("the probe pod stayed Pending for %s, so no node ran it: %s", o.Timeout, pendingReason(cur)))
			}
			if kwokNode(nodes.Items, cur.Spec.NodeName) {
				return unknown(fmt.Sprintf("the probe pod was bound to KWOK fake node %s, which runs no pods", cur.Spec.NodeName))
			}
			res.Verdict = ProbeAppFail
			if cur.Status.Phase == corev1.PodPending {
				res.Message = fmt.Sprintf("the probe pod was scheduled to node %s and stayed Pending for %s: %s", cur.Spec.NodeName, o.Timeout, containerState(cur))
			} else {
				res.Message = fmt.Sprintf("the probe pod runs on node %s and was not Ready within %s: %s", cur.Spec.NodeName, o.Timeout, containerState(cur))
			}
			return res
		}
		if err := transient.Sleep(ctx, o.Poll); err != nil {
			return unknown("interrupted while waiting for the probe pod: " + err.Error())
		}
	}
	res.Node = cur.Spec.NodeName
	step("pod Ready on node %s", cur.Spec.NodeName)
	// The nodes listed at the start say whether it is a fake one (the
	// read-only role lists nodes and does not get them).
	if kwokNode(nodes.Items, cur.Spec.NodeName) {
		return unknown(fmt.Sprintf("the probe pod landed on KWOK fake node %s, which reports pods Running without running them", cur.Spec.NodeName))
	}

	// Call it through the service proxy until it answers; the endpoint
	// controllers need a moment to publish the pod's address.
	path := ProxyPath(o.Namespace, svc.Name)
	var last error
	start := time.Now()
	callDeadline := time.Now().Add(min(o.Timeout, 30*time.Second))
	for {
		body, err := kube.CoreV1().Services(o.Namespace).ProxyGet("http", svc.Name, "http", "/", nil).DoRaw(ctx)
		if err == nil {
			res.Verdict = ProbeAppPass
			res.Message = fmt.Sprintf("probe app on node %s answered GET %s through the apiserver's service proxy (%d bytes, %s)", res.Node, path, len(body), time.Since(start).Round(time.Millisecond))
			return res
		}
		if f := forbidden("get", "services/proxy", err); f != "" {
			return unknown(f)
		}
		last = err
		if time.Now().After(callDeadline) || ctx.Err() != nil {
			break
		}
		if err := transient.Sleep(ctx, o.Poll); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return unknown("interrupted while calling the probe app: " + ctx.Err().Error())
	}
	res.Verdict = ProbeAppFail
	res.Message = fmt.Sprintf("probe pod Ready on node %s but GET %s did not answer: %v", res.Node, path, last)
	return res
}

// deleteProbeApps deletes the pods and Services the selector picks in ns
// and names them.
func deleteProbeApps(ctx context.Context, kube kubernetes.Interface, ns, selector string) ([]string, error) {
	var gone []string
	opts := metav1.ListOptions{LabelSelector: selector}
	del := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, errors.New(failed("list", "pods", err))
	}
	for _, p := range pods.Items {
		if err := kube.CoreV1().Pods(ns).Delete(ctx, p.Name, del); err != nil && !apierrors.IsNotFound(err) {
			return gone, errors.New(failed("delete", "pods", err))
		}
		gone = append(gone, "pod/"+p.Name)
	}
	svcs, err := kube.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return gone, errors.New(failed("list", "services", err))
	}
	for _, s := range svcs.Items {
		if err := kube.CoreV1().Services(ns).Delete(ctx, s.Name, del); err != nil && !apierrors.IsNotFound(err) {
			return gone, errors.New(failed("delete", "services", err))
		}
		gone = append(gone, "service/"+s.Name)
	}
	return gone, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pendingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			return c.Reason + ": " + c.Message
		}
	}
	if p.Spec.NodeName == "" {
		return "not scheduled"
	}
	return "scheduled to " + p.Spec.NodeName + ", " + containerState(p)
}

// kwokNode says whether the named node is a KWOK fake node.
func kwokNode(nodes []corev1.Node, name string) bool {
	for _, n := range nodes {
		if n.Name == name && n.Annotations[KwokNodeAnnotation] == "fake" {
			return true
		}
	}
	return false
}

func containerState(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			return fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			return fmt.Sprintf("container %s terminated: exit %d %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		case cs.State.Running != nil && !cs.Ready:
			return fmt.Sprintf("container %s running, not ready (%d restarts)", cs.Name, cs.RestartCount)
		}
	}
	if p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 0 {
		// A sandbox that fails to start (FailedCreatePodSandBox) leaves no
		// container status; the reason is in the pod's events.
		return fmt.Sprintf("no container started (phase Pending); see kubectl describe pod -n %s %s", p.Namespace, p.Name)
	}
	return "phase " + string(p.Status.Phase)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
