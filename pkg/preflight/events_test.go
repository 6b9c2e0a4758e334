package preflight

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kube-system pods a node-pool upgrade recreates get new names; their
// events count per controller, read from the pod while it exists and from
// its generated name once it is gone.
func TestWarningFactsGroupPerController(t *testing.T) {
	at := func(m int) metav1.Time { return metav1.NewTime(now.Add(time.Duration(m) * time.Minute)) }
	ev := func(reason, pod string, first, last int, count int32) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: pod + "." + reason}, Type: corev1.EventTypeWarning, Reason: reason,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: pod}, FirstTimestamp: at(first), LastTimestamp: at(last), Count: count, Message: reason + " of " + pod}
	}
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-7db6d8ff4d-x2b4n", Labels: map[string]string{"pod-template-hash": "7db6d8ff4d"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "coredns-7db6d8ff4d", Controller: ptr(true)}}}}
	evs := []corev1.Event{
		ev("BackOff", "kube-proxy-4xq2z", 1, 3, 4), // gone: its DaemonSet from the name
		ev("BackOff", "kube-proxy-9vwpt", 2, 6, 2), // the same DaemonSet's pod on another node
		ev("Unhealthy", "coredns-7db6d8ff4d-x2b4n", 0, 1, 1),
		ev("Unhealthy", "coredns-5d78c9869d-q8vzb", 0, 2, 1), // an older ReplicaSet's pod, gone
		ev("BackOff", "etcd-cp-1", 0, 1, 1),                  // a static pod: itself
		{Type: corev1.EventTypeNormal, Reason: "Pulled", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "kube-proxy-4xq2z"}},
	}
	got := warningFacts(evs, []*corev1.Pod{live}, map[string]string{"kube-proxy": "daemonset/kube-proxy", "coredns": "deployment/coredns"})
	want := map[string]int32{"BackOff daemonset/kube-proxy": 6, "Unhealthy deployment/coredns": 2, "BackOff pod/etcd-cp-1": 1}
	if len(got) != len(want) {
		t.Fatalf("facts: %+v", got)
	}
	for _, f := range got {
		if want[f.Reason+" "+f.Object] != f.Count {
			t.Errorf("%s %s x%d, want x%d", f.Reason, f.Object, f.Count, want[f.Reason+" "+f.Object])
		}
		if f.Reason == "BackOff" && f.Object == "daemonset/kube-proxy" && (!f.First.Equal(at(1).Time) || !f.Last.Equal(at(6).Time)) {
			t.Errorf("kube-proxy BackOff spans %s..%s", f.First, f.Last)
		}
		// Two pods, the longer firing 4 minutes (2..6), not the 5 minutes
		// from the first pod's first event to the second's last.
		if f.Reason == "BackOff" && f.Object == "daemonset/kube-proxy" && (f.Objects != 2 || f.Longest != 240) {
			t.Errorf("kube-proxy BackOff: %d objects, longest %ds, want 2 and 240s", f.Objects, f.Longest)
		}
	}
}

// Verify judges each reason and object against the baseline: the noise of
// a node-pool upgrade passes while it settles and once it has stopped, and
// fails only when it is still firing after the settle time; a reason an
// upgrade does not cause fails at once, and what fired before is not new.
func TestVerifyWarningEvents(t *testing.T) {
	base := Evidence{CollectedAt: now.Add(-time.Hour), SystemWarnings: []WarningFact{
		{Reason: "FailedMount", Object: "daemonset/csi-node", First: now.Add(-3 * time.Hour), Last: now.Add(-2 * time.Hour), Count: 4}}}
	settle := 15 * time.Minute
	min := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		name   string
		fact   WarningFact
		status Status // "" for nothing listed
	}{
		{"restarts while the pool rolled, now quiet", WarningFact{Reason: "BackOff", Object: "daemonset/kube-proxy", First: min(-50), Last: min(-40)}, ""},
		{"sandboxes while the CNI came up", WarningFact{Reason: "FailedCreatePodSandBox", Object: "daemonset/nvidia-device-plugin", First: min(-30), Last: min(-25)}, ""},
		{"network not ready on a new node", WarningFact{Reason: "NetworkNotReady", Object: "deployment/coredns", First: min(-5), Last: min(-1)}, StatusWarn},
		{"probe failures still going after the settle time", WarningFact{Reason: "Unhealthy", Object: "deployment/coredns", First: min(-45), Last: min(-1)}, StatusFail},
		{"a reason an upgrade does not cause", WarningFact{Reason: "FailedCreate", Object: "daemonset/kube-proxy", First: min(-2), Last: min(-2)}, StatusFail},
		{"firing already at the baseline", WarningFact{Reason: "FailedMount", Object: "daemonset/csi-node", First: min(-10), Last: min(-1)}, ""},
		{"older than the baseline", WarningFact{Reason: "Evicted", Object: "pod/x", First: min(-70), Last: min(-65)}, ""},
		// A pool rolled node by node for 50 minutes, each node's pod of the
		// DaemonSet failing its sandbox for at most 2 minutes.
		{"a rolling upgrade's short restarts on many nodes, now quiet", WarningFact{Reason: "FailedCreatePodSandBox", Object: "daemonset/kube-proxy", First: min(-55), Last: min(-20), Objects: 25, Longest: 120}, ""},
		{"a rolling upgrade's last node just restarted", WarningFact{Reason: "FailedCreatePodSandBox", Object: "daemonset/kube-proxy", First: min(-55), Last: min(-2), Objects: 25, Longest: 120}, StatusWarn},
		{"one pod of a rolled DaemonSet still failing", WarningFact{Reason: "BackOff", Object: "daemonset/kube-proxy", First: min(-55), Last: min(-1), Objects: 25, Longest: 40 * 60}, StatusFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regs := verifyWarnings(base, Evidence{CollectedAt: now, SystemWarnings: []WarningFact{tc.fact}}, settle)
			switch {
			case tc.status == "" && len(regs) != 0:
				t.Errorf("listed: %+v", regs)
			case tc.status != "" && (len(regs) != 1 || regs[0].Status != tc.status || regs[0].Object != tc.fact.Object || !strings.Contains(regs[0].Message, tc.fact.Reason)):
				t.Errorf("want one %s naming %s %s, got %+v", tc.status, tc.fact.Reason, tc.fact.Object, regs)
			}
		})
	}
}
