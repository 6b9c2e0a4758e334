package eviction

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestLoadForbiddenNamespace(t *testing.T) {
	ns := func(n string) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	a := mkPod("a")
	b := mkPod("b")
	b.Namespace = "secret"
	pdb := mkPDB("web", 1, 3, 2, 3)
	c := fake.NewClientset(ns("ml"), ns("secret"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, a, b, pdb)
	forbid := func(resource string) k8stesting.ReactionFunc {
		return func(act k8stesting.Action) (bool, runtime.Object, error) {
			if act.GetNamespace() == "" || act.GetNamespace() == "secret" {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("no"))
			}
			return false, nil, nil
		}
	}
	c.PrependReactor("list", "pods", forbid("pods"))
	c.PrependReactor("list", "poddisruptionbudgets", forbid("poddisruptionbudgets"))
	s, err := Load(context.Background(), c, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || s.Pods[0].Name != "a" || len(s.PDBs) != 1 {
		t.Errorf("pods %d pdbs %d", len(s.Pods), len(s.PDBs))
	}
	if diff := cmp.Diff([]string{"secret"}, keys(s.ForbiddenPods)); diff != "" {
		t.Errorf("forbidden pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"secret"}, keys(s.ForbiddenPDBs)); diff != "" {
		t.Errorf("forbidden pdbs (-want +got):\n%s", diff)
	}
	// nodes, pods (all, ml, secret), namespaces, pdbs (all, ml, secret)
	if s.ListCalls != 8 {
		t.Errorf("list calls = %d, want 8", s.ListCalls)
	}
	v := Evaluator{Now: t0}.NewSimulation(s.Index()).DrainNode("gpu-1")
	if len(v) != 1 || v[0].Outcome != OutcomeNow || v[0].PDBs[0] != "web" {
		t.Errorf("verdicts = %+v", v)
	}
}

func TestSlimKeepsWhatTheEvaluatorReads(t *testing.T) {
	p := mkPod("a", withEmptyDir, grace(30), doNotDisrupt, terminating(t0, "f"))
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	s := Slim(p)
	if len(s.ManagedFields) != 0 || len(s.Spec.Containers) != 0 {
		t.Error("slim kept what it should drop")
	}
	idx := NewIndex(nil, []*corev1.Pod{p}, nil)
	full := Evaluator{Now: t0}.NewSimulation(idx).Predict(p)
	slim := Evaluator{Now: t0}.NewSimulation(idx).Predict(s)
	if diff := cmp.Diff(full, slim); diff != "" {
		t.Errorf("verdict changed by Slim (-full +slim):\n%s", diff)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
