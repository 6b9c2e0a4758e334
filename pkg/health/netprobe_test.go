package health

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestNetworkProbeVerdict(t *testing.T) {
	yes := Reach{Done: true, Reached: true, Detail: "answered gpufleet-netprobe-server"}
	no := Reach{Done: true, Detail: "dial tcp 10.0.0.5:8080: i/o timeout"}
	notMade := Reach{Detail: "the dial through the pod proxy failed"}
	for _, c := range []struct {
		name             string
		open, deny, allo Reach
		want, msg        string
	}{
		{"enforced", yes, no, yes, ProbeAppPass, "the deny denies and the allow allows"},
		{"deny does not deny", yes, yes, Reach{}, ProbeAppFail, "does not deny: the client pod still reached the server pod"},
		{"allow does not allow", yes, no, no, ProbeAppFail, "allowing the client does not allow"},
		{"no traffic at all", no, Reach{}, Reach{}, ProbeAppUnknown, "with no policy the client pod could not reach the server pod"},
		{"open not dialled", notMade, Reach{}, Reach{}, ProbeAppUnknown, "did not dial"},
		{"deny not dialled", yes, notMade, Reach{}, ProbeAppUnknown, "under the deny policy was not made"},
		{"allow not dialled", yes, no, notMade, ProbeAppUnknown, "under the allow policy was not made"},
	} {
		v, m := NetworkProbeVerdict(c.open, c.deny, c.allo)
		if v != c.want || !strings.Contains(m, c.msg) {
			t.Errorf("%s: %s %q, want %s %q", c.name, v, m, c.want, c.msg)
		}
	}
}

// netexec's /dial answers as its README describes: 200 and responses when
// the last try succeeded, 417 and errors when it failed.
func TestParseDial(t *testing.T) {
	if r := ParseDial(http.StatusOK, []byte(`{"responses":["gpufleet-netprobe-server"]}`), nil); !r.Done || !r.Reached || r.Detail != "answered gpufleet-netprobe-server" {
		t.Errorf("200: %+v", r)
	}
	if r := ParseDial(http.StatusExpectationFailed, []byte(`{"errors":["reading from 10.0.0.5:8080: timeout"]}`), errors.New("the server has asked for the client to provide credentials")); !r.Done || r.Reached {
		t.Errorf("417: %+v", r)
	}
	if r := ParseDial(http.StatusServiceUnavailable, []byte(`no endpoints`), errors.New("the server is currently unable to handle the request")); r.Done {
		t.Errorf("503: %+v", r)
	}
}

func kwokNodes() []runtime.Object {
	var out []runtime.Object
	for _, n := range []string{"gpu-0", "gpu-1"} {
		out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{KwokNodeAnnotation: "fake"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	return out
}

// On KWOK's fake nodes the probe is UNKNOWN and creates nothing, and it
// still deletes the namespace an interrupted run left.
func TestRunNetworkProbeKWOK(t *testing.T) {
	left := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NetworkProbeNamespacePrefix + "old01", Labels: map[string]string{NetworkProbeLabel: "old01"}}}
	kube := fake.NewSimpleClientset(append(kwokNodes(), left)...)
	res := RunNetworkProbe(context.Background(), kube, NetworkProbeOptions{})
	if res.Verdict != ProbeAppUnknown || !strings.Contains(res.Message, "all 2 nodes are KWOK fake nodes") {
		t.Errorf("%s %q", res.Verdict, res.Message)
	}
	if !strings.Contains(strings.Join(res.Evidence, "\n"), "deleted what an earlier run left behind: namespace/gpufleet-netprobe-old01") {
		t.Errorf("evidence %q", res.Evidence)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("created %s", a.GetResource().Resource)
		}
	}
	if l, _ := kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("namespaces left: %v", l.Items)
	}
}

// A dry run sends the namespace with dryRun=All, lists what a run would
// create and deletes nothing.
func TestRunNetworkProbeDryRun(t *testing.T) {
	left := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NetworkProbeNamespacePrefix + "old01", Labels: map[string]string{NetworkProbeLabel: "old01"}}}
	kube := fake.NewSimpleClientset(append(kwokNodes(), left)...)
	kube.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if a.GetResource().Resource != "namespaces" || len(ca.CreateOptions.DryRun) != 1 || ca.CreateOptions.DryRun[0] != metav1.DryRunAll {
			t.Errorf("create %s %+v", a.GetResource().Resource, ca.CreateOptions)
		}
		return true, ca.Object, nil
	})
	res := RunNetworkProbe(context.Background(), kube, NetworkProbeOptions{DryRun: true})
	ev := strings.Join(res.Evidence, "\n")
	if res.Verdict != ProbeAppDryRun || !strings.Contains(ev, "would delete namespace/gpufleet-netprobe-old01") ||
		!strings.Contains(ev, "would create networkpolicy "+res.Namespace+"/gpufleet-netprobe-deny") || !strings.Contains(ev, "a real run would be UNKNOWN") {
		t.Errorf("%s %q\n%s", res.Verdict, res.Message, ev)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("deleted %s", a.GetResource().Resource)
		}
	}
}
