//go:build e2e

package gangdraine2e

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dumpJobSet logs what a failed wait on a JobSet needs to be understood:
// the JobSet's spec.suspend and status, each of its Jobs' suspend and
// status (active, failed, conditions, uncounted pods) and every pod of the
// namespace with its phase, node, deletion and finalizers.
func (e *env) dumpJobSet(name string) {
	e.t.Helper()
	js, err := e.cp.JobSetClient().JobsetV1alpha2().JobSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Logf("dump: JobSet %s: %v", name, err)
	} else {
		e.t.Logf("dump: JobSet %s suspend=%v status=%s", name, js.Spec.Suspend, asJSON(js.Status))
	}
	jobs, err := e.cp.Client.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("dump: jobs: %v", err)
	} else {
		for _, j := range jobs.Items {
			e.t.Logf("dump: Job %s uid=%s suspend=%v deleting=%v status=%s", j.Name, j.UID, j.Spec.Suspend, j.DeletionTimestamp != nil, asJSON(j.Status))
		}
	}
	pods, err := e.cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("dump: pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		e.t.Logf("dump: Pod %s node=%s phase=%s deleting=%v finalizers=%s owner=%v conditions=%s",
			p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil,
			strings.Join(p.Finalizers, ","), p.OwnerReferences, asJSON(p.Status.Conditions))
	}
	ev, err := e.cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err == nil {
		for _, x := range ev.Items {
			e.t.Logf("dump: event %s %s/%s %s: %s", x.Type, x.InvolvedObject.Kind, x.InvolvedObject.Name, x.Reason, x.Message)
		}
	}
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
