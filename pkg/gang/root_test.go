package gang

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRootOfPod(t *testing.T) {
	c := newCluster(t, false)
	d := &Discoverer{Dynamic: c.dyn}
	for pod, want := range map[string]string{
		"train-0": "jobsets.jobset.x-k8s.io ml/train", // through the Job to the JobSet
		"pg-0":    "workloads.kueue.x-k8s.io ml/pg",   // a Kueue pod group: its Workload
		"api-abc": "",                                 // no gang
	} {
		ns := "ml"
		if pod == "api-abc" {
			ns = "web"
		}
		p, err := c.kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.RootOfPod(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		if got != nil {
			s = got.Target().String()
		}
		if s != want {
			t.Errorf("%s: root %q, want %q", pod, s, want)
		}
	}
}

func TestRootRefAndLabels(t *testing.T) {
	o, err := RootRef("", "PyTorchJob", "ml", "bert")
	if err != nil || o.Target().String() != "pytorchjobs.kubeflow.org ml/bert" || o.APIVersion != "kubeflow.org/v1" {
		t.Errorf("%+v %v", o, err)
	}
	if o, err := RootRef("batch.volcano.sh/v1alpha1", "Job", "ml", "v"); err != nil || o.Resource != "jobs" || o.GVR().Group != "batch.volcano.sh" {
		t.Errorf("volcano: %+v %v", o, err)
	}
	for _, bad := range [][2]string{{"", "Deployment"}, {"apps/v1", "StatefulSet"}} {
		if _, err := RootRef(bad[0], bad[1], "ml", "x"); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	if o := RootFromLabels("ml", map[string]string{LabelJobSetName: "llm", "batch.kubernetes.io/job-name": "llm-w-0"}); o == nil || o.Target().String() != "jobsets.jobset.x-k8s.io ml/llm" {
		t.Errorf("jobset labels: %+v", o)
	}
	if o := RootFromLabels("ml", map[string]string{LabelLWSName: "serve"}); o == nil || o.Kind != "LeaderWorkerSet" {
		t.Errorf("lws labels: %+v", o)
	}
	if o := RootFromLabels("ml", map[string]string{"app": "x"}); o != nil {
		t.Errorf("no gang labels: %+v", o)
	}
}
