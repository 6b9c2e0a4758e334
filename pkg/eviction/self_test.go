package eviction

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func workflowPod(ns, name, wf, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if wf != "" {
		p.Labels = map[string]string{ArgoWorkflowLabel: wf}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf, Controller: ptr.To(true)}}
	}
	return p
}

func TestSkipRunningWorkflow(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	c := fake.NewClientset(node,
		workflowPod("argo", "ring-r1-step-1", "ring-r1", "n1"),     // this step
		workflowPod("argo", "ring-r1-step-2", "ring-r1", "n1"),     // its sibling
		workflowPod("argo", "other-run-step-1", "other-run", "n1"), // another workflow: still counted
		workflowPod("team", "ring-r1-step-9", "ring-r1", "n1"),     // same name, other namespace
		workflowPod("team", "trainer", "", "n1"))
	load := func() *Snapshot {
		s, err := Load(context.Background(), c, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	names := func(s *Snapshot) string {
		var n []string
		for _, p := range s.Pods {
			n = append(n, p.Namespace+"/"+p.Name)
		}
		return strings.Join(n, " ")
	}
	s := load()
	note := s.SkipRunningWorkflow(Self{Namespace: "argo", Name: "ring-r1-step-1"})
	if got := names(s); got != "argo/other-run-step-1 team/ring-r1-step-9 team/trainer" {
		t.Errorf("pods kept: %s", got)
	}
	if !strings.HasPrefix(note, "skipped 2 pods of the running workflow argo/ring-r1 (ring-r1-step-1, ring-r1-step-2)") {
		t.Errorf("note %q", note)
	}
	// The skipped pods are no blockers; the other workflow's bare pod still is.
	sim := Evaluator{}.NewSimulation(s.Index())
	for _, v := range sim.DrainNode("n1") {
		if v.Namespace == "argo" && strings.HasPrefix(v.Name, "ring-r1-") {
			t.Errorf("%s/%s evaluated", v.Namespace, v.Name)
		}
	}
	// Run elsewhere (self not among the cluster's pods), or not in a
	// workflow pod: nothing skipped, nothing said.
	for _, self := range []Self{{Namespace: "argo", Name: "laptop"}, {Namespace: "team", Name: "trainer"}, {}} {
		s := load()
		if note := s.SkipRunningWorkflow(self); note != "" || len(s.Pods) != 5 {
			t.Errorf("%+v: note %q, %d pods", self, note, len(s.Pods))
		}
	}
}

func TestSelfFromEnv(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "argo")
	t.Setenv("POD_NAME", "ring-r1-step-1")
	t.Setenv("HOSTNAME", "ignored")
	if s := SelfFromEnv(); s != (Self{Namespace: "argo", Name: "ring-r1-step-1"}) {
		t.Errorf("%+v", s)
	}
	t.Setenv("POD_NAME", "")
	if s := SelfFromEnv(); s.Name != "ignored" {
		t.Errorf("HOSTNAME fallback: %+v", s)
	}
}
