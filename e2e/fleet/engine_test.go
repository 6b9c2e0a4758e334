//go:build e2e

package fleete2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// renderedWorkflow is the run's Workflow as render wrote it (run.yaml).
func (s *scenario) renderedWorkflow(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "run.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err == io.EOF {
			t.Fatal("run.yaml has no Workflow")
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Workflow" {
			return u
		}
	}
}

// TestFleetWorkflowMutexExitAndPodGC runs the rendered Workflow's own
// settings on the real workflow-controller: two copies of the ring run's
// Workflow (entrypoint: the canary soak, a 3 s suspend) take the run's
// mutex in turn, the second waiting for the lock while the first holds
// it; each one's exit handler records its end in the store; and the pods
// of their succeeded exit handlers are deleted (podGC OnPodSuccess). The
// ring run itself recorded its end the same way.
func TestFleetWorkflowMutexExitAndPodGC(t *testing.T) {
	r := ringByRing(t)
	s, e := r.s, r.s.e
	ctx := context.Background()
	wfs := e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS)
	get := func(name string) *unstructured.Unstructured {
		w, err := wfs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	phase := func(w *unstructured.Unstructured) string {
		p, _, _ := unstructured.NestedString(w.Object, "status", "phase")
		return p
	}
	poll := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v\n--- workflow-controller log\n%s", what, err, e.argo.Log(3000))
		}
	}

	names := []string{s.workflowName() + "-again-a", s.workflowName() + "-again-b"}
	for _, n := range names {
		defer func() { _ = wfs.Delete(context.Background(), n, metav1.DeleteOptions{}) }()
	}
	create := func(name string) {
		w := s.renderedWorkflow(t)
		w.SetName(name)
		if err := unstructured.SetNestedField(w.Object, "soak-canary", "spec", "entrypoint"); err != nil {
			t.Fatal(err)
		}
		if _, err := wfs.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mutex := fleetrun.MutexName(s.name, s.run)
	create(names[0])
	poll(names[0]+" running", time.Minute, func() bool { return phase(get(names[0])) == "Running" })
	create(names[1])
	sawWait := false
	poll(names[1]+" ending", 2*time.Minute, func() bool {
		w := get(names[1])
		msg, _, _ := unstructured.NestedString(w.Object, "status", "message")
		if strings.Contains(msg, "lock") && strings.Contains(msg, mutex) {
			sawWait = true
		}
		return phase(w) == "Succeeded" || phase(w) == "Failed" || phase(w) == "Error"
	})
	poll(names[0]+" ending", time.Minute, func() bool { return phase(get(names[0])) == "Succeeded" })
	if p := phase(get(names[1])); p != "Succeeded" {
		t.Fatalf("%s ended %s", names[1], p)
	}
	if !sawWait {
		t.Errorf("%s never waited for mutex %s while %s held it", names[1], mutex, names[0])
	}
	// The soaks ran one after the other.
	soak := func(name string) (started, finished string) {
		nodes, _, _ := unstructured.NestedMap(get(name).Object, "status", "nodes")
		for _, v := range nodes {
			n, _ := v.(map[string]any)
			if n["templateName"] == "soak-canary" {
				st, _ := n["startedAt"].(string)
				fi, _ := n["finishedAt"].(string)
				return st, fi
			}
		}
		t.Fatalf("%s has no soak-canary node", name)
		return "", ""
	}
	_, aDone := soak(names[0])
	bStart, _ := soak(names[1])
	ta, _ := time.Parse(time.RFC3339, aDone)
	tb, _ := time.Parse(time.RFC3339, bStart)
	if tb.Before(ta) {
		t.Errorf("%s's soak started at %s, before %s's ended at %s: the mutex did not hold", names[1], bStart, names[0], aDone)
	}

	// Each Workflow's exit handler recorded its end.
	st := s.openStore(t)
	ended := map[string]string{}
	poll("the exit handlers' records", time.Minute, func() bool {
		ends, err := fleetrun.ReadEnds(ctx, st, s.run)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ends {
			ended[x.Workflow] = x.Phase
		}
		return len(ended) >= 3
	})
	for _, n := range append([]string{s.workflowName()}, names...) {
		if ended[n] != "Succeeded" {
			t.Errorf("the store's end of %s: %q, want Succeeded (all: %v)", n, ended[n], ended)
		}
	}

	// podGC: the pods the exec node ran to success for the copies (their
	// exit handlers) are deleted; the exec node stands in for the kubelet
	// and leaves a deleted pod terminating, so "deleted" is gone or
	// carrying a deletionTimestamp.
	for _, n := range names {
		var ran []string
		for _, x := range e.node.Ran() {
			if strings.HasPrefix(x.Pod, n+"-") && x.ExitCode == 0 {
				ran = append(ran, x.Pod)
			}
		}
		if len(ran) == 0 {
			t.Errorf("the exec node ran no pod of %s to success (its exit handler)", n)
		}
		for _, pod := range ran {
			poll("pod "+pod+" deleted", time.Minute, func() bool {
				p, err := e.mgmt.Client.CoreV1().Pods(argoNS).Get(ctx, pod, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true
				}
				if err != nil {
					t.Fatal(err)
				}
				return p.DeletionTimestamp != nil
			})
		}
	}
}
