package gang

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A pod that a Job of the gang creates after the stop (its controller had
// not yet seen the suspension) is waited for; other new pods are not.
func TestGangPodsAdoptRecreatedPods(t *testing.T) {
	gp := &gangPods{uids: map[types.UID]bool{"old": true}, left: map[types.UID]bool{}, jobs: map[types.UID]bool{"job-a": true}}
	pod := func(uid, owner string, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", UID: types.UID(owner), Controller: ptr.To(true)}}
		}
		return p
	}
	gp.adopt(pod("new", "job-a", corev1.PodPending))
	gp.adopt(pod("other-job", "job-b", corev1.PodRunning))
	gp.adopt(pod("bare", "", corev1.PodRunning))
	gp.adopt(pod("finished", "job-a", corev1.PodSucceeded))
	if !gp.left["new"] || len(gp.left) != 1 {
		t.Fatalf("left %v, want only the pod job-a created after the stop", gp.left)
	}
	gp.jobs = nil // the Job controller deletes the pods itself: nothing adopted
	gp.adopt(pod("new2", "job-a", corev1.PodPending))
	if gp.left["new2"] {
		t.Fatal("adopted a pod while gang-drain deletes no pods itself")
	}
}
