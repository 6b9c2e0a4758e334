package preflight

import (
	"fmt"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Status is a gate's verdict. In Go it keeps pkg/preflight's words; -o
// json and -o yaml write it as the table's word in lower case
// (MarshalText: "ok", "warn", "unknown", "fail"; gpufleet.dev/v1alpha3 of
// SkewPreflightReport, v1alpha2 of SkewVerifyReport). Earlier versions
// wrote the words themselves ("PASS", "WARN", "UNKNOWN", "FAIL"), which
// UnmarshalText still reads, so a baseline saved by an earlier release
// loads.
type Status string

// Gate verdicts, from best to worst.
const (
	StatusPass    Status = "PASS"
	StatusWarn    Status = "WARN"
	StatusUnknown Status = "UNKNOWN"
	StatusFail    Status = "FAIL"
)

// statuses are the verdicts, from best to worst.
var statuses = []Status{StatusPass, StatusWarn, StatusUnknown, StatusFail}

// Word is the status's word in a table's STATUS column: OK for PASS, as
// in every plugin's tables.
func (s Status) Word() string {
	if s == StatusPass {
		return cli.StatusOK.String()
	}
	return string(s)
}

// JSONWord is the status as reports write it: its table word in lower
// case.
func (s Status) JSONWord() string { return cli.Status(s.Word()).JSONWord() }

// MarshalText writes the status as JSONWord.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.JSONWord()), nil }

// UnmarshalText reads a status as MarshalText writes it or as an earlier
// release did (PASS, WARN, UNKNOWN, FAIL).
func (s *Status) UnmarshalText(b []byte) error {
	v, err := cli.ReadEnumWord(b, statuses, Status.JSONWord)
	if err != nil {
		return fmt.Errorf("status %w", err)
	}
	*s = v
	return nil
}

// Words are the status words Word returns, for a command's legend.
var Words = []cli.Status{cli.StatusOK, cli.StatusWarn, cli.StatusUnknown, cli.StatusFail}

// Rank orders statuses, worst highest.
func (s Status) Rank() int {
	switch s {
	case StatusPass:
		return 0
	case StatusWarn:
		return 1
	case StatusUnknown:
		return 2
	case StatusFail:
		return 3
	}
	return 2
}

// Worse returns the worse of two statuses.
func Worse(a, b Status) Status {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// Gate names.
const (
	GateSupport     = "support-window"
	GateRemovedAPIs = "removed-apis"
	GateAddons      = "addons"
	GateWebhooks    = "webhooks"
	GateEtcd        = "etcd"
	GateNodes       = "nodes-ready"
	GateSystemPods  = "kube-system-pods"
	GateDrains      = "drains"
	GateCRDs        = "crd-storage"
	GatePSA         = "pod-security-latest"
	GateLegacyToken = "legacy-sa-tokens"
)

// GateOrder is the order gates are reported in.
var GateOrder = []string{GateSupport, GateRemovedAPIs, GateAddons, GateWebhooks, GateEtcd, GateNodes, GateSystemPods, GateDrains, GateCRDs, GatePSA, GateLegacyToken,
	GatePSAPins, GateAdmission, GateRBAC, GatePatch, GateCerts, GateImages}

// Gate is one row of the pre-flight report.
type Gate struct {
	// Name identifies the gate.
	Name string `json:"name"`
	// Status is the gate's verdict (JSON: ok, warn, unknown, fail).
	Status Status `json:"status"`
	// Message says the verdict in one line.
	Message string `json:"message"`
	// Evidence lists what the verdict rests on, one fact a line.
	Evidence []string `json:"evidence,omitempty"`
	// Command fixes or investigates the gate.
	Command string `json:"command,omitempty"`
}

// Evidence is what the gates read, saved with the report so that
// `kubectl skew verify` compares against it rather than against memory.
type Evidence struct {
	// CollectedAt is when it was read.
	CollectedAt time.Time `json:"collectedAt"`
	// Target is the minor the pre-flight judged against.
	Target string `json:"target,omitempty"`
	// Inventory is pkg/skew's version inventory.
	Inventory skew.Inventory `json:"inventory"`
	// Nodes are every node's facts.
	Nodes []NodeFact `json:"nodes,omitempty"`
	// SystemPods are the kube-system pods.
	SystemPods []PodFact `json:"systemPods,omitempty"`
	// Addons are the addons found in any namespace.
	Addons []Addon `json:"addons,omitempty"`
	// RemovedAPICallers are the users of APIs removed at the target, one
	// key each (source, location, apiVersion, kind).
	RemovedAPICallers []string `json:"removedAPICallers,omitempty"`
	// LastSystemWarning is the newest Warning event in kube-system.
	LastSystemWarning *time.Time `json:"lastSystemWarning,omitempty"`
	// SystemWarnings are kube-system's Warning events, one per reason and
	// object (events.go), which verify compares.
	SystemWarnings []WarningFact `json:"systemWarnings,omitempty"`
	// Policy is what the policy-continuity gates read (policy.go).
	Policy *PolicyEvidence `json:"policy,omitempty"`
	// Health is what the health gates read (health.go).
	Health *HealthEvidence `json:"health,omitempty"`
}

// NodeFact is one node's state.
type NodeFact struct {
	Name    string `json:"name"`
	Pool    string `json:"pool"`
	Kubelet string `json:"kubelet"`
	Ready   bool   `json:"ready"`
	// NotReady says why, when not Ready.
	NotReady string `json:"notReady,omitempty"`
	// GPUAllocatable is nvidia.com/gpu allocatable (0 without GPUs).
	GPUAllocatable int `json:"gpuAllocatable,omitempty"`
}

// PodFact is one kube-system pod's health.
type PodFact struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Restarts int32  `json:"restarts"`
	// Problem is empty for a healthy pod, else CrashLoopBackOff, Pending,
	// Failed or another waiting reason.
	Problem string `json:"problem,omitempty"`
}

// Addon is an addon the inventory found.
type Addon struct {
	// Name is the addon (kube-proxy, coredns, cert-manager ...).
	Name string `json:"name"`
	// Namespace and Workload (kind/name) locate it.
	Namespace string `json:"namespace"`
	Workload  string `json:"workload"`
	// Image is the container image, Version its tag (or, found by Helm
	// alone, the chart's appVersion).
	Image   string `json:"image"`
	Version string `json:"version"`
	// Source is how it was found: image, workload (name or labels) or helm.
	Source string `json:"source,omitempty"`
	// HelmRelease is the deployed Helm release that installed it
	// (namespace/name and chart), when one did.
	HelmRelease string `json:"helmRelease,omitempty"`
	// Also are the other workloads in the namespace that run the same
	// addon at the same version (kind/name).
	Also []string `json:"also,omitempty"`
}

// Result is a pre-flight run.
type Result struct {
	Gates    []Gate   `json:"gates"`
	Evidence Evidence `json:"evidence"`
}
