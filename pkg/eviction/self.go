package eviction

import (
	"fmt"
	"os"
	"strings"
)

// ArgoWorkflowLabel is the label Argo Workflows sets on every pod of a
// workflow, to the workflow's name (workflow/common.LabelKeyWorkflow in
// argoproj/argo-workflows v3.7.15).
const ArgoWorkflowLabel = "workflows.argoproj.io/workflow"

// Self is the pod this process runs in, when it runs in one.
type Self struct {
	Namespace, Name string
}

// serviceAccountNamespace is the file every pod with a service account
// token has, naming its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// The downward-API variables that name a process's own pod.
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
)

// SelfFromEnv names this process's pod: POD_NAMESPACE and POD_NAME (the
// downward API, as rendered workflow steps set them), else the service
// account's namespace file and HOSTNAME (a pod's hostname is its name).
// Outside a pod it names nothing that a cluster's pods match.
func SelfFromEnv() Self {
	s := Self{Namespace: os.Getenv(EnvPodNamespace), Name: os.Getenv(EnvPodName)}
	if s.Namespace == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			s.Namespace = strings.TrimSpace(string(b))
		}
	}
	if s.Name == "" {
		s.Name = os.Getenv("HOSTNAME")
	}
	return s
}

// SkipRunningWorkflow removes from the snapshot the pods of the Argo
// workflow this process runs in, so that a drain check run by a workflow
// step on its own management cluster does not count the step's pod (a bare
// pod that only the workflow owns, which a drain never evicts by itself)
// and its sibling step pods as blockers. It applies only when self is one
// of the snapshot's pods and carries ArgoWorkflowLabel: then every pod of
// that namespace with the same workflow is skipped. It returns the line to
// show ("skipped 1 pod of the running workflow argo/ring-r1"), "" when
// nothing was skipped.
func (s *Snapshot) SkipRunningWorkflow(self Self) string {
	if self.Name == "" || self.Namespace == "" {
		return ""
	}
	wf := ""
	for _, p := range s.Pods {
		if p.Namespace == self.Namespace && p.Name == self.Name {
			wf = p.Labels[ArgoWorkflowLabel]
			break
		}
	}
	if wf == "" {
		return ""
	}
	kept := s.Pods[:0]
	var skipped []string
	for _, p := range s.Pods {
		if p.Namespace == self.Namespace && p.Labels[ArgoWorkflowLabel] == wf {
			skipped = append(skipped, p.Name)
			continue
		}
		kept = append(kept, p)
	}
	for i := len(kept); i < len(s.Pods); i++ {
		s.Pods[i] = nil
	}
	s.Pods = kept
	noun := "pods"
	if len(skipped) == 1 {
		noun = "pod"
	}
	return fmt.Sprintf("skipped %d %s of the running workflow %s/%s (%s): this step's own, not a drain blocker", len(skipped), noun, self.Namespace, wf, strings.Join(capNames(skipped, 3), ", "))
}

func capNames(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(append([]string{}, names[:n]...), fmt.Sprintf("and %d more", len(names)-n))
}
