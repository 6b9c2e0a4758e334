package health

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

type proxyAnswer struct {
	body []byte
	err  error
}

func (p proxyAnswer) DoRaw(context.Context) ([]byte, error) { return p.body, p.err }
func (p proxyAnswer) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(p.body))), p.err
}

func node(name string, kwok bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if kwok {
		n.Annotations = map[string]string{KwokNodeAnnotation: "fake"}
	}
	return n
}

// probeFake is a clientset whose pods are scheduled to nodeName and made
// Ready on create when ready is set, and whose service proxy answers with
// answer.
func probeFake(nodeName string, ready bool, answer proxyAnswer, objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if ready {
			p.Spec.NodeName = nodeName
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
		}
		return false, nil, nil
	})
	c.PrependProxyReactor("services", func(k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		return true, answer, nil
	})
	return c
}

func leftovers(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	var out []string
	pods, _ := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: ProbeAppLabel})
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	svcs, _ := c.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{LabelSelector: ProbeAppLabel})
	for _, s := range svcs.Items {
		out = append(out, "service/"+s.Name)
	}
	return out
}

func creates(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "create" {
			n++
		}
	}
	return n
}

var fast = ProbeAppOptions{Timeout: 300 * time.Millisecond, Poll: 10 * time.Millisecond}

func TestProbeAppKwokOnlyIsUnknownAndCreatesNothing(t *testing.T) {
	c := probeFake("", true, proxyAnswer{body: []byte("NOW")}, node("kwok-0", true), node("kwok-1", true))
	res := RunProbeApp(context.Background(), c, fast)
	if res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "all 2 nodes are KWOK fake nodes") {
		t.Fatalf("got %s %q", res.Verdict, res.Message)
	}
	if n := creates(c); n != 0 {
		t.Fatalf("%d creates on a cluster no node of which runs pods", n)
	}
}

func TestProbeAppPassDeletesLeftoversAndItsOwn(t *testing.T) {
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ProbeAppName + "-old", Namespace: "default", Labels: map[string]string{ProbeAppLabel: "old"}}}
	oldSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ProbeAppName + "-old", Namespace: "default", Labels: map[string]string{ProbeAppLabel: "old"}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	c := probeFake("exec-0", true, proxyAnswer{body: []byte("NOW: 2026")}, node("exec-0", false), node("kwok-0", true), old, oldSvc, other)
	res := RunProbeApp(context.Background(), c, fast)
	if res.Verdict != ProbeAppPass || res.Node != "exec-0" || !strings.Contains(res.Message, "answered GET /api/v1/namespaces/default/services/"+ProbeAppName+"-") {
		t.Fatalf("got %s %q %q", res.Verdict, res.Message, res.Evidence)
	}
	if !strings.Contains(strings.Join(res.Evidence, "\n"), "earlier run left behind: pod/"+ProbeAppName+"-old, service/"+ProbeAppName+"-old") {
		t.Errorf("the earlier run's objects are not named as deleted: %q", res.Evidence)
	}
	if l := leftovers(t, c); len(l) != 0 {
		t.Fatalf("left behind: %v", l)
	}
	if _, err := c.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("a pod without the label was touched: %v", err)
	}
	// The pod is shaped to pass Pod Security "restricted".
	for _, a := range c.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			p := ca.GetObject().(*corev1.Pod)
			sc := p.Spec.Containers[0].SecurityContext
			if p.Spec.SecurityContext.RunAsNonRoot == nil || !*p.Spec.SecurityContext.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				len(sc.Capabilities.Drop) != 1 || p.Spec.Containers[0].Image != DefaultProbeAppImage || p.Labels[ProbeAppLabel] == "" {
				t.Errorf("pod spec: %+v", p.Spec)
			}
		}
	}
}

func TestProbeAppNoAnswerIsFail(t *testing.T) {
	c := probeFake("exec-0", true, proxyAnswer{err: apierrors.NewServiceUnavailable("no endpoints available for service")}, node("exec-0", false))
	res := RunProbeApp(context.Background(), c, fast)
	if res.Verdict != ProbeAppFail || !strings.Contains(res.Message, "did not answer") || !strings.Contains(res.Message, "no endpoints available") {
		t.Fatalf("got %s %q", res.Verdict, res.Message)
	}
	if l := leftovers(t, c); len(l) != 0 {
		t.Fatalf("left behind: %v", l)
	}
}

func TestProbeAppPendingIsUnknown(t *testing.T) {
	c := probeFake("", false, proxyAnswer{body: []byte("x")}, node("exec-0", false))
	res := RunProbeApp(context.Background(), c, fast)
	if res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "stayed Pending for 300ms") || !strings.Contains(res.Message, "0/1 nodes are available") {
		t.Fatalf("got %s %q", res.Verdict, res.Message)
	}
	if l := leftovers(t, c); len(l) != 0 {
		t.Fatalf("left behind: %v", l)
	}
}

// A pod a node took and never ran (image pull failing, sandbox failing) is
// the node failing to run an app, not a gap in what the gate could see.
func TestProbeAppScheduledPendingIsFail(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []corev1.ContainerStatus
		want     string
	}{
		{"image pull", []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}},
			"container main waiting: ImagePullBackOff"},
		{"sandbox", nil, "no container started (phase Pending); see kubectl describe pod -n default " + ProbeAppName + "-"},
	} {
		c := fake.NewClientset(node("exec-0", false))
		c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			p.Spec.NodeName = "exec-0"
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses = tc.statuses
			return false, nil, nil
		})
		res := RunProbeApp(context.Background(), c, fast)
		if res.Verdict != ProbeAppFail || res.Node != "exec-0" || !strings.Contains(res.Message, "scheduled to node exec-0 and stayed Pending for 300ms") || !strings.Contains(res.Message, tc.want) {
			t.Errorf("%s: got %s %q", tc.name, res.Verdict, res.Message)
		}
		if l := leftovers(t, c); len(l) != 0 {
			t.Errorf("%s: left behind: %v", tc.name, l)
		}
	}
}

func TestProbeAppForbiddenNamesVerbAndResource(t *testing.T) {
	for _, tc := range []struct{ verb, resource, want string }{
		{"create", "pods", "cannot create pods"},
		{"create", "services", "cannot create services"},
		{"list", "pods", "cannot list pods"},
		{"list", "nodes", "cannot list nodes"},
	} {
		c := probeFake("exec-0", true, proxyAnswer{body: []byte("x")}, node("exec-0", false))
		c.PrependReactor(tc.verb, tc.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.resource}, "", errors.New("RBAC: denied"))
		})
		res := RunProbeApp(context.Background(), c, fast)
		if res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "forbidden: "+tc.want) {
			t.Errorf("%s %s refused: got %s %q", tc.verb, tc.resource, res.Verdict, res.Message)
		}
	}
	c := probeFake("exec-0", true, proxyAnswer{err: apierrors.NewForbidden(schema.GroupResource{Resource: "services/proxy"}, "x", errors.New("RBAC: denied"))}, node("exec-0", false))
	if res := RunProbeApp(context.Background(), c, fast); res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "forbidden: cannot get services/proxy") {
		t.Errorf("proxy refused: got %s %q", res.Verdict, res.Message)
	}
}

func TestProbeAppDryRunStoresNothing(t *testing.T) {
	c := probeFake("exec-0", true, proxyAnswer{body: []byte("x")}, node("kwok-0", true))
	o := fast
	o.DryRun = true
	res := RunProbeApp(context.Background(), c, o)
	if res.Verdict != ProbeAppDryRun || !strings.Contains(res.Message, "dry run") {
		t.Fatalf("got %s %q", res.Verdict, res.Message)
	}
	n := 0
	for _, a := range c.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			n++
			if len(a.CreateOptions.DryRun) != 1 || a.CreateOptions.DryRun[0] != metav1.DryRunAll {
				t.Errorf("%s created without dryRun=All", a.GetResource().Resource)
			}
		case k8stesting.ProxyGetAction:
			t.Errorf("a dry run called the service proxy")
		}
		if a.GetVerb() == "delete" {
			t.Errorf("a dry run deleted %s", a.GetResource().Resource)
		}
	}
	if n != 2 {
		t.Fatalf("%d creates, want the pod and the service", n)
	}
}

// An interrupt while the pod starts still deletes what the run created.
func TestProbeAppInterruptCleansUp(t *testing.T) {
	c := probeFake("", false, proxyAnswer{body: []byte("x")}, node("exec-0", false))
	ctx, cancel := context.WithCancel(context.Background())
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return false, nil, nil
	})
	o := fast
	o.Timeout = time.Minute
	res := RunProbeApp(ctx, c, o)
	if res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "interrupted") {
		t.Fatalf("got %s %q", res.Verdict, res.Message)
	}
	if l := leftovers(t, c); len(l) != 0 {
		t.Fatalf("left behind after an interrupt: %v", l)
	}
}
