package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// KwokNodeAnnotation marks the nodes KWOK manages; its value must be "fake".
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// KwokCompleteLabel opts a running pod into completion: KWOK moves a pod
// with this label set to "true" to phase Succeeded. Other pods, such as the
// pods of a training gang, stay Running until deleted.
const KwokCompleteLabel = "gpufleet.dev/kwok-complete"

// kwokStageFiles are the Stages taken from KWOK's module: nodes become Ready
// at once and keep a Lease, pods become Ready at once and go away on
// deletion. KWOK's own pod-complete Stage is left out on purpose: it
// finishes every Job pod at once.
var kwokStageFiles = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-delete.yaml",
}

// podCompleteStage finishes only pods labelled KwokCompleteLabel=true.
const podCompleteStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gpufleet-pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      ` + KwokCompleteLabel + `: "true"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: Ready
        reason: PodCompleted
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: ContainersReady
        reason: PodCompleted
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
`

// writeKwokStages concatenates the Stages into one --config file.
func (cp *Cluster) writeKwokStages() (string, error) {
	var buf bytes.Buffer
	for _, f := range kwokStageFiles {
		b, err := os.ReadFile(filepath.Join(cp.Binaries.KwokStages, f))
		if err != nil {
			return "", fmt.Errorf("kwok stage: %w", err)
		}
		buf.WriteString("---\n")
		buf.Write(bytes.TrimSpace(b))
		buf.WriteString("\n")
	}
	buf.WriteString("---\n")
	buf.WriteString(podCompleteStage)
	path := filepath.Join(cp.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}
