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

// KwokUnreadyLabel keeps a pod unready: KWOK starts a pod labelled with
// it set to "true" (phase Running, containers running) but leaves its
// Ready condition False, so that a test sets Ready itself when what the
// pod waits for is done (an inference server's weights loaded).
const KwokUnreadyLabel = "gpufleet.dev/kwok-unready"

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

// podRunningUnreadyStage starts pods labelled KwokUnreadyLabel=true
// without making them Ready. Its selector is KWOK's own pod-ready Stage's
// (kubernetes-sigs/kwok@v0.8.0 kustomize/stage/pod/fast/pod-ready.yaml)
// plus the label, so both match such a pod; KWOK then picks among the
// matching Stages by weight (pkg/utils/lifecycle Lifecycle.Match: a Stage
// of weight 0 is never picked beside one of positive weight), and weight 1
// makes this one win. Once the pod is Running neither matches again.
const podRunningUnreadyStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gpufleet-pod-running-unready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  weight: 1
  selector:
    matchLabels:
      ` + KwokUnreadyLabel + `: "true"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: Ready
        reason: ContainersNotReady
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        type: ContainersReady
        reason: ContainersNotReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
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
	buf.WriteString("---\n")
	buf.WriteString(podRunningUnreadyStage)
	path := filepath.Join(cp.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}
