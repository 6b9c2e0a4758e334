package nccl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func fakeDynamic() *dynamicfake.FakeDynamicClient {
	kinds := map[schema.GroupVersionResource]string{
		GVRJob: "JobList", GVRService: "ServiceList", GVRSecret: "SecretList", GVRJobSet: "JobSetList", GVRMPIJob: "MPIJobList",
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
}

func TestRunner_ReadsLauncherLogAndCleansUp(t *testing.T) {
	m, err := Render(testSpec(t, LauncherJob, FabricTCP))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gv-nccl-abc-0-x", Namespace: "gpu-validate", Labels: map[string]string{
		RunLabel: "abc", "batch.kubernetes.io/job-name": "gv-nccl-abc", "batch.kubernetes.io/job-completion-index": "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	kube := fake.NewClientset(pod)
	dyn := fakeDynamic()
	var events []string
	r := &Runner{Kube: kube, Dynamic: dyn, Clock: clocktesting.NewFakeClock(time.Now()), OnEvent: func(s string) { events = append(events, s) }}
	res, err := r.Run(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pod != pod.Name || res.Phase != "Succeeded" || res.Log != "fake logs" || len(res.CleanupErrors) != 0 {
		t.Errorf("result %+v", res)
	}
	var creates, deletes []string
	for _, a := range dyn.Actions() {
		switch a.GetVerb() {
		case "create":
			creates = append(creates, a.GetResource().Resource)
		case "delete":
			deletes = append(deletes, a.GetResource().Resource)
		}
	}
	if strings.Join(creates, ",") != "secrets,services,jobs" || strings.Join(deletes, ",") != "jobs,services,secrets" {
		t.Errorf("creates %v deletes %v", creates, deletes)
	}
	if len(events) < 3 || !strings.Contains(events[0], "created job gv-nccl-abc (2 nodes x 8 GPUs, fabric tcp)") {
		t.Errorf("events %q", events)
	}
}

func TestRunner_TimeoutAndFailure(t *testing.T) {
	m, _ := Render(testSpec(t, LauncherJob, FabricTCP))
	clk := clocktesting.NewFakeClock(time.Now())
	kube := fake.NewClientset()
	// Every poll moves the clock past the deadline.
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		clk.Step(time.Hour)
		return false, nil, nil
	})
	r := &Runner{Kube: kube, Dynamic: fakeDynamic(), Clock: clk, Timeout: time.Minute}
	if _, err := r.Run(context.Background(), m); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "no results pod yet") {
		t.Errorf("err %v", err)
	}

	dyn := fakeDynamic()
	dyn.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		u := m.Main().DeepCopy()
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}}}
		return true, u, nil
	})
	r = &Runner{Kube: fake.NewClientset(), Dynamic: dyn, Clock: clocktesting.NewFakeClock(time.Now())}
	if _, err := r.Run(context.Background(), m); err == nil || !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Errorf("err %v", err)
	}

	dyn = fakeDynamic()
	dyn.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server could not find the requested resource")
	})
	r = &Runner{Kube: fake.NewClientset(), Dynamic: dyn}
	if _, err := r.Run(context.Background(), m); err == nil || !strings.Contains(err.Error(), "creating Job gpu-validate/gv-nccl-abc") {
		t.Errorf("err %v", err)
	}
	var deleted int
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "delete" {
			deleted++
		}
	}
	if deleted != 2 {
		t.Errorf("created objects not cleaned up after a failed create: %d deletes", deleted)
	}
}
