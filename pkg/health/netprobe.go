package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// The network probe proves that network policy is enforced, not only
// stored: in a scratch namespace of its own it runs a server pod and a
// client pod (agnhost netexec, both), and has the client dial the server
// (netexec's /dial, called through the apiserver's pod proxy, so the
// runner needs no network path to pods) three times: with no policy (the
// pod network carries traffic), under a default-deny ingress policy on
// the server (the deny denies), and with a policy that allows the client
// (the allow allows). Then the namespace is deleted with all in it.
//
// agnhost netexec's /dial (kubernetes test/images/agnhost/README.md,
// netexec, image 2.52): host, port, request, protocol and tries
// parameters; a JSON body {"responses": [...], "errors": [...]}; 200 OK
// when the last request succeeded, 417 Expectation Failed when it did not.

// Network probe names and labels.
const (
	// NetworkProbeLabel marks the scratch namespace (its value the run);
	// a run deletes the namespaces an interrupted run left by it.
	NetworkProbeLabel = "gpufleet.dev/network-probe"
	// NetworkProbeNamespacePrefix prefixes the scratch namespace's name.
	NetworkProbeNamespacePrefix = "gpufleet-netprobe-"
	// netProbeRole labels the two pods server and client.
	netProbeRole = "gpufleet.dev/network-probe-role"
)

// NetworkProbeOptions say what the network probe runs.
type NetworkProbeOptions struct {
	// Image runs agnhost netexec (DefaultProbeAppImage when empty).
	Image string `json:"image,omitempty"`
	// Port both pods listen on (DefaultProbeAppPort when 0).
	Port int32 `json:"port,omitempty"`
	// Timeout bounds the wait for the pods to be Ready, and for each
	// policy to take effect (DefaultProbeAppTimeout when 0).
	Timeout time.Duration `json:"timeout,omitempty"`
	// DryRun sends the namespace as a server-side dry run, lists what a
	// run would create, and creates nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Poll is how often pods and dials are polled (1 s when 0).
	Poll time.Duration `json:"-"`
}

func (o NetworkProbeOptions) withDefaults() NetworkProbeOptions {
	if o.Image == "" {
		o.Image = DefaultProbeAppImage
	}
	if o.Port == 0 {
		o.Port = DefaultProbeAppPort
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultProbeAppTimeout
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// Reach is what one dial from the client to the server found.
type Reach struct {
	// Done says the dial was made.
	Done bool `json:"done"`
	// Reached says the client got an answer.
	Reached bool `json:"reached"`
	// Detail is the answer or the error.
	Detail string `json:"detail,omitempty"`
}

// NetworkProbeResult is what one run found.
type NetworkProbeResult struct {
	// Verdict is PASS, FAIL, UNKNOWN or DRYRUN (the ProbeApp* values).
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// Namespace is the scratch namespace.
	Namespace string `json:"namespace,omitempty"`
	// Open, Deny and Allow are the dials with no policy, under the deny
	// and with the allow.
	Open  Reach `json:"open"`
	Deny  Reach `json:"deny"`
	Allow Reach `json:"allow"`
	// Evidence lists the steps, one a line.
	Evidence []string `json:"evidence,omitempty"`
	// LeftBehind names what could not be deleted.
	LeftBehind []string `json:"leftBehind,omitempty"`
}

// NetworkProbeVerdict judges the three dials: the deny reached the
// server is FAIL (the policy is stored and not enforced), the allow not
// reached is FAIL; the client not reaching the server with no policy at
// all is UNKNOWN (a deny proven on a network that carries nothing proves
// nothing); a dial not made is UNKNOWN.
func NetworkProbeVerdict(open, deny, allow Reach) (string, string) {
	switch {
	case !open.Done:
		return ProbeAppUnknown, "the client pod did not dial the server"
	case !open.Reached:
		return ProbeAppUnknown, "with no policy the client pod could not reach the server pod, so a deny proves nothing: " + open.Detail
	case !deny.Done:
		return ProbeAppUnknown, "the dial under the deny policy was not made"
	case deny.Reached:
		return ProbeAppFail, "a default-deny ingress NetworkPolicy does not deny: the client pod still reached the server pod (" + deny.Detail + "); the CNI stores policies and does not enforce them"
	case !allow.Done:
		return ProbeAppUnknown, "the dial under the allow policy was not made"
	case !allow.Reached:
		return ProbeAppFail, "a NetworkPolicy allowing the client does not allow: the client pod could not reach the server pod (" + allow.Detail + ")"
	}
	return ProbeAppPass, "the deny denies and the allow allows: the client pod reached the server pod with no policy, not under a default-deny ingress policy, and again once a policy allowed it"
}

// NetworkProbeCommand shows what a run created.
func NetworkProbeCommand() string {
	return "kubectl get namespaces -l " + NetworkProbeLabel + "; kubectl get pods,networkpolicies -A -l " + NetworkProbeLabel
}

// NetworkProbeCleanupCommand deletes what a run left behind.
func NetworkProbeCleanupCommand() string {
	return "kubectl delete namespaces -l " + NetworkProbeLabel
}

// networkProbeObjects are what one run creates: the namespace, the two
// pods, the deny and the allow.
func networkProbeObjects(o NetworkProbeOptions, run string) (*corev1.Namespace, []*corev1.Pod, *networkingv1.NetworkPolicy, *networkingv1.NetworkPolicy) {
	ns := NetworkProbeNamespacePrefix + run
	labels := func(extra ...string) map[string]string {
		l := map[string]string{NetworkProbeLabel: run, "app.kubernetes.io/managed-by": "kubectl-skew"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels()}}
	pod := func(role string) *corev1.Pod {
		p, _ := probeAppObjects(ProbeAppOptions{Namespace: ns, Image: o.Image, Port: o.Port, Command: DefaultProbeAppCommand(o.Port)}, run)
		p.Name = "gpufleet-netprobe-" + role
		p.Labels = labels(netProbeRole, role)
		return p
	}
	server, client := pod("server"), pod("client")
	sel := func(role string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{netProbeRole: role}}
	}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-netprobe-deny", Namespace: ns, Labels: labels()},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: sel("server"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	port := intstr.FromInt32(o.Port)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-netprobe-allow-client", Namespace: ns, Labels: labels()},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: sel("server"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: ptr.To(sel("client"))}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}}}}}}
	return nsObj, []*corev1.Pod{server, client}, deny, allow
}

// NetworkProbePlan lists what a run creates, one object a line.
func NetworkProbePlan(o NetworkProbeOptions, ns string) []string {
	o = o.withDefaults()
	return []string{
		fmt.Sprintf("namespace/%s (labelled %s)", ns, NetworkProbeLabel),
		fmt.Sprintf("pod %s/gpufleet-netprobe-server (%s netexec on port %d)", ns, o.Image, o.Port),
		fmt.Sprintf("pod %s/gpufleet-netprobe-client (%s netexec on port %d; dials the server through the apiserver's pod proxy)", ns, o.Image, o.Port),
		fmt.Sprintf("networkpolicy %s/gpufleet-netprobe-deny (ingress to the server: none)", ns),
		fmt.Sprintf("networkpolicy %s/gpufleet-netprobe-allow-client (ingress to the server from the client, TCP %d)", ns, o.Port),
		fmt.Sprintf("then: delete namespace/%s and all in it", ns),
	}
}

// RunNetworkProbe deletes the namespaces an earlier run left (by
// NetworkProbeLabel), checks that a node can run the pods (KWOK's fake
// nodes cannot: UNKNOWN), creates the namespace, the two pods and, in
// turn, the deny and the allow, dials after each, and deletes the
// namespace whatever happened (also when ctx ends).
func RunNetworkProbe(ctx context.Context, kube kubernetes.Interface, opts NetworkProbeOptions) (res NetworkProbeResult) {
	o := opts.withDefaults()
	step := func(f string, a ...any) { res.Evidence = append(res.Evidence, fmt.Sprintf(f, a...)) }
	unknown := func(msg string) NetworkProbeResult {
		res.Verdict, res.Message = ProbeAppUnknown, msg
		return res
	}
	// What an interrupted run left goes first, even where no pod can run.
	if o.DryRun {
		if left, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: NetworkProbeLabel}); err == nil && len(left.Items) > 0 {
			for _, n := range left.Items {
				step("would delete namespace/%s, left by an earlier run", n.Name)
			}
		}
	} else {
		gone, err := deleteNetworkProbes(context.WithoutCancel(ctx), kube, NetworkProbeLabel)
		if err != nil {
			return unknown(err.Error())
		}
		if len(gone) > 0 {
			step("deleted what an earlier run left behind: %s", strings.Join(gone, ", "))
		}
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return unknown(failed("list", "nodes", err))
	}
	ok, why := RunnableNodes(nodes.Items)
	if len(ok) == 0 && !o.DryRun {
		sort.Strings(why)
		res.Evidence = append(res.Evidence, why...)
		kwok := 0
		for _, n := range nodes.Items {
			if n.Annotations[KwokNodeAnnotation] == "fake" {
				kwok++
			}
		}
		switch {
		case len(nodes.Items) == 0:
			return unknown("no node to run the network probe's pods on")
		case kwok == len(nodes.Items):
			return unknown(fmt.Sprintf("no node can run the network probe's pods: all %d nodes are KWOK fake nodes (%s=fake), whose pods never run, so no policy can be proven enforced", kwok, KwokNodeAnnotation))
		}
		return unknown(fmt.Sprintf("no node can run the network probe's pods: none of %d nodes is Ready, schedulable and real", len(nodes.Items)))
	}

	run := rand.String(5)
	nsObj, pods, deny, allow := networkProbeObjects(o, run)
	ns := nsObj.Name
	res.Namespace = ns
	create := metav1.CreateOptions{FieldManager: "kubectl-skew"}
	if o.DryRun {
		if len(ok) == 0 {
			step("no node of %d can run the pods: a real run would be UNKNOWN", len(nodes.Items))
		}
		create.DryRun = []string{metav1.DryRunAll}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, nsObj, create); err != nil {
			return unknown(failed("create", "namespaces", err))
		}
		for _, l := range NetworkProbePlan(o, ns) {
			step("would create %s", l)
		}
		res.Verdict = ProbeAppDryRun
		res.Message = fmt.Sprintf("dry run: namespace %s admitted (server-side dry run, nothing stored); would create two pods and two NetworkPolicies in it, dial, and delete it", ns)
		return res
	}
	step("%d of %d nodes can run the pods", len(ok), len(nodes.Items))

	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := deleteNetworkProbes(cctx, kube, NetworkProbeLabel+"="+run); err != nil {
			res.LeftBehind = append(res.LeftBehind, fmt.Sprintf("namespace %s: %v; delete it: %s", ns, err, NetworkProbeCleanupCommand()))
			return
		}
		step("deleted namespace %s", ns)
	}()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, nsObj, create); err != nil {
		return unknown(failed("create", "namespaces", err))
	}
	for _, p := range pods {
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, create); err != nil {
			return unknown(failed("create", "pods", err))
		}
	}
	step("created namespace %s with pods gpufleet-netprobe-server and gpufleet-netprobe-client (image %s)", ns, o.Image)
	var ready []*corev1.Pod
	for _, p := range pods {
		cur, msg := waitReady(ctx, kube, ns, p.Name, o)
		if msg != "" {
			return unknown(msg)
		}
		for _, n := range nodes.Items {
			if n.Name == cur.Spec.NodeName && n.Annotations[KwokNodeAnnotation] == "fake" {
				return unknown(fmt.Sprintf("pod %s landed on KWOK fake node %s, which reports pods Running without running them", p.Name, n.Name))
			}
		}
		ready = append(ready, cur)
	}
	server, client := ready[0], ready[1]
	step("pods Ready: server %s on node %s, client on node %s", server.Status.PodIP, server.Spec.NodeName, client.Spec.NodeName)

	dial := func(want bool) Reach {
		return dialUntil(ctx, kube, ns, client.Name, server.Status.PodIP, o, want)
	}
	res.Open = dial(true)
	step("no policy: %s", reachString(res.Open))
	if res.Open.Reached {
		if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, create); err != nil {
			return unknown(failed("create", "networkpolicies", err))
		}
		res.Deny = dial(false)
		step("under %s: %s", deny.Name, reachString(res.Deny))
		if res.Deny.Done && !res.Deny.Reached {
			if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, allow, create); err != nil {
				return unknown(failed("create", "networkpolicies", err))
			}
			res.Allow = dial(true)
			step("with %s: %s", allow.Name, reachString(res.Allow))
		}
	}
	res.Verdict, res.Message = NetworkProbeVerdict(res.Open, res.Deny, res.Allow)
	return res
}

func reachString(r Reach) string {
	switch {
	case !r.Done:
		return "not dialled: " + r.Detail
	case r.Reached:
		return "client reached server (" + r.Detail + ")"
	}
	return "client did not reach server (" + r.Detail + ")"
}

// waitReady waits for the pod to be Ready; "" when it is, else why not.
func waitReady(ctx context.Context, kube kubernetes.Interface, ns, name string, o NetworkProbeOptions) (*corev1.Pod, string) {
	deadline := time.Now().Add(o.Timeout)
	for {
		cur, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, failed("get", "pods", err)
		}
		if cur.Status.Phase == corev1.PodFailed || cur.Status.Phase == corev1.PodSucceeded {
			return nil, fmt.Sprintf("pod %s/%s ended (%s) on node %s: %s", ns, name, cur.Status.Phase, orDash(cur.Spec.NodeName), containerState(cur))
		}
		if podReady(cur) {
			return cur, ""
		}
		if time.Now().After(deadline) {
			return nil, fmt.Sprintf("pod %s/%s was not Ready within %s: %s", ns, name, o.Timeout, pendingReason(cur))
		}
		if err := transient.Sleep(ctx, o.Poll); err != nil {
			return nil, "interrupted while waiting for pod " + name + ": " + err.Error()
		}
	}
}

// dialUntil has the client dial the server until the outcome is want or
// the timeout passes (a policy takes a moment to be programmed); it
// returns the last outcome.
func dialUntil(ctx context.Context, kube kubernetes.Interface, ns, client, serverIP string, o NetworkProbeOptions, want bool) Reach {
	deadline := time.Now().Add(min(o.Timeout, time.Minute))
	var last Reach
	for {
		last = dialOnce(ctx, kube, ns, client, serverIP, o.Port)
		if (last.Done && last.Reached == want) || time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		if err := transient.Sleep(ctx, o.Poll); err != nil {
			return last
		}
	}
}

// dialOnce calls the client's /dial through the apiserver's pod proxy.
func dialOnce(ctx context.Context, kube kubernetes.Interface, ns, client, serverIP string, port int32) Reach {
	p := strconv.Itoa(int(port))
	params := map[string]string{"request": "hostname", "protocol": "http", "host": serverIP, "port": p, "tries": "1"}
	// DoRaw returns the body also with the error of a non-2xx answer,
	// whose status carries the code.
	body, err := kube.CoreV1().Pods(ns).ProxyGet("http", client, p, "/dial", params).DoRaw(ctx)
	code := http.StatusOK
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code = int(st.Status().Code)
	} else if err != nil {
		code = 0
	}
	return ParseDial(code, body, err)
}

// DialAnswer is netexec's /dial body.
type DialAnswer struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// ParseDial reads one /dial answer: 200 with a response is reached; 417
// (netexec's "the last request failed") is not reached; anything else is
// a dial not made (the proxy or the client failed).
func ParseDial(code int, body []byte, err error) Reach {
	var a DialAnswer
	jerr := json.Unmarshal(body, &a)
	switch {
	case code == http.StatusOK && jerr == nil && len(a.Responses) > 0:
		return Reach{Done: true, Reached: true, Detail: "answered " + strings.Join(a.Responses, ", ")}
	case code == http.StatusExpectationFailed && jerr == nil:
		return Reach{Done: true, Detail: strings.Join(a.Errors, "; ")}
	}
	if err == nil {
		err = fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(string(body)))
	}
	if f := forbidden("get", "pods/proxy", err); f != "" {
		return Reach{Detail: f}
	}
	return Reach{Detail: "the dial through the pod proxy failed: " + err.Error()}
}

// deleteNetworkProbes deletes the namespaces the selector picks and names
// them.
func deleteNetworkProbes(ctx context.Context, kube kubernetes.Interface, selector string) ([]string, error) {
	l, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, errors.New(failed("list", "namespaces", err))
	}
	var gone []string
	for _, n := range l.Items {
		if n.DeletionTimestamp != nil {
			continue
		}
		if err := kube.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return gone, errors.New(failed("delete", "namespaces", err))
		}
		gone = append(gone, "namespace/"+n.Name)
	}
	return gone, nil
}
