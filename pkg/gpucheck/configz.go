package gpucheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// ConfigzFetcher returns the raw body of /api/v1/nodes/NAME/proxy/configz.
type ConfigzFetcher func(ctx context.Context, node string) ([]byte, error)

// ErrConfigzForbidden means the caller may not get nodes/proxy.
var ErrConfigzForbidden = errors.New("forbidden: reading the kubelet configuration needs get on nodes/proxy")

// ErrKubeletRefused means the apiserver let the caller through but the
// kubelet answered 403: its own authorization (webhook mode) does not let
// the apiserver's kubelet client identity read configz.
var ErrKubeletRefused = errors.New("the kubelet refused the apiserver's proxied request (403): the kubelet's authorization does not let the apiserver's kubelet client read configz (give that identity get on nodes/configz and nodes/proxy, e.g. the system:kubelet-api-admin role); the caller's permissions are not the cause")

// callerDenied tells the apiserver's own authorization denying the caller
// (a Status naming the nodes/proxy resource) from a 403 that the kubelet
// returned through the proxy (a plain-text body such as "Forbidden
// (user=..., verb=get, resource=nodes, subresource=configz)").
func callerDenied(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return true
	}
	st := se.Status()
	if st.Details != nil && st.Details.Kind == "nodes" && strings.Contains(st.Message, "nodes/proxy") {
		return true
	}
	return strings.Contains(st.Message, `cannot get resource "nodes/proxy"`)
}

// NewConfigzFetcher reads configz through the apiserver's node proxy.
func NewConfigzFetcher(kube kubernetes.Interface) ConfigzFetcher {
	return func(ctx context.Context, node string) ([]byte, error) {
		// Do, not DoRaw: DoRaw leaves an apiserver Status undecoded
		// ("unknown"), and the Status is what tells the apiserver's denial
		// from the kubelet's.
		res := kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").Do(ctx)
		b, _ := res.Raw()
		err := res.Error()
		if apierrors.IsForbidden(err) {
			if callerDenied(err) {
				return nil, fmt.Errorf("node %s: %w", node, ErrConfigzForbidden)
			}
			return nil, fmt.Errorf("node %s: %w", node, ErrKubeletRefused)
		}
		if err != nil {
			return nil, fmt.Errorf("reading configz of node %s: %w", node, err)
		}
		return b, nil
	}
}

// ParseConfigz reads a configz body ({"kubeletconfig": {...}}) into a
// generic map, so fields of any kubelet version can be compared.
func ParseConfigz(b []byte) (map[string]any, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("configz is not JSON: %w", err)
	}
	raw, ok := doc["kubeletconfig"]
	if !ok {
		return nil, errors.New("configz has no kubeletconfig")
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg == nil {
		return nil, fmt.Errorf("configz kubeletconfig is not an object: %v", err)
	}
	return cfg, nil
}

// DriftClass grades a configuration difference.
type DriftClass string

// Drift classes.
const (
	// DriftGPU is drift in a field that changes how GPU workloads are
	// placed, pinned or evicted: a failing finding.
	DriftGPU DriftClass = "gpu-relevant"
	// DriftOther is drift elsewhere: a warning.
	DriftOther DriftClass = "other"
	// DriftExpected is a default that changed between the two kubelet
	// versions, or a field only one of them knows: informational.
	DriftExpected DriftClass = "expected"
)

// ConfigDiff is one differing field (dotted path).
type ConfigDiff struct {
	Field string     `json:"field"`
	Old   string     `json:"old"`
	New   string     `json:"new"`
	Class DriftClass `json:"class"`
	Note  string     `json:"note,omitempty"`
}

// GPURelevantFields are the KubeletConfiguration fields (and prefixes of
// nested ones) whose drift fails the gate: topology, CPU and memory
// managers, reserved resources, feature gates, cgroups and swap, eviction
// thresholds, and pod limits.
var GPURelevantFields = []string{
	"topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
	"cpuManagerPolicy", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
	"memoryManagerPolicy", "reservedMemory", "reservedSystemCPUs",
	"featureGates",
	"cgroupDriver", "cgroupRoot", "cgroupsPerQOS", "kubeletCgroups", "systemCgroups",
	"kubeReservedCgroup", "systemReservedCgroup", "enforceNodeAllocatable",
	"kubeReserved", "systemReserved", "failSwapOn", "memorySwap", "singleProcessOOMKill",
	"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMaxPodGracePeriod",
	"evictionPressureTransitionPeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings",
	"maxPods", "podPidsLimit",
}

// DefaultChange records a KubeletConfiguration default that changed (or a
// field that appeared with a default) in a Kubernetes minor release. Drift
// that matches an entry when the baseline is older than Since and the node
// is at Since or newer is expected.
type DefaultChange struct {
	Field string
	// Since is the minor release ("1.35") that brought the new default.
	Since string
	// Old is the earlier value as JSON ("" = the field was absent).
	Old string
	// New is the new default as JSON.
	New string
	// FieldAdded says the field itself first appears in k8s.io/kubelet's
	// config/v1beta1 types in Since (a test checks this against the
	// module cache when those versions are there).
	FieldAdded bool
	Note       string
	// Source is where the fact comes from: the release's k8s.io/kubelet
	// types (field and "Default:" comment), the defaulting code, the
	// feature gate's version history, a KEP or a release note.
	Source string
}

// kubeletTypes and kubeletDefaults are the primary sources most facts
// below are read from.
const (
	kubeletTypes    = "k8s.io/kubelet@v0.%s.0 config/v1beta1/types.go"
	kubeletDefaults = "k8s.io/kubernetes@v1.37.2 pkg/kubelet/apis/config/v1beta1/defaults.go"
)

// DefaultChanges is the table of defaults that changed between releases
// the plugin is expected to see across an upgrade (1.29 to 1.37). Every
// entry names its source; TestDefaultChanges has one case per entry.
var DefaultChanges = []DefaultChange{
	{Field: "containerLogMaxWorkers", Since: "1.30", Old: "", New: "1", FieldAdded: true, Note: "new field in 1.30 (parallel log rotation)",
		Source: fmt.Sprintf(kubeletTypes, "30") + " (first release with the field, Default: 1); " + kubeletDefaults},
	{Field: "containerLogMonitorInterval", Since: "1.30", Old: "", New: `"10s"`, FieldAdded: true, Note: "new field in 1.30",
		Source: fmt.Sprintf(kubeletTypes, "30") + " (first release with the field, Default: 10s); " + kubeletDefaults},
	{Field: "podLogsDir", Since: "1.30", Old: "", New: `"/var/log/pods"`, FieldAdded: true, Note: "new field in 1.30",
		Source: fmt.Sprintf(kubeletTypes, "30") + " (first release with the field); " + kubeletDefaults + " (DefaultPodLogsDir)"},
	{Field: "failCgroupV1", Since: "1.31", Old: "", New: "false", FieldAdded: true, Note: "new field in 1.31 (cgroup v1 in maintenance mode)",
		Source: fmt.Sprintf(kubeletTypes, "31") + " (first release with the field, Default: false); KEP-4569; https://kubernetes.io/blog/2024/08/14/kubernetes-1-31-moving-cgroup-v1-support-maintenance-mode/"},
	{Field: "mergeDefaultEvictionSettings", Since: "1.33", Old: "", New: "false", FieldAdded: true, Note: "new field in 1.33",
		Source: fmt.Sprintf(kubeletTypes, "33") + " (first release with the field, Default: false); " + kubeletDefaults},
	{Field: "failCgroupV1", Since: "1.35", Old: "false", New: "true", Note: "1.35 refuses cgroup v1 by default",
		Source: fmt.Sprintf(kubeletTypes, "35") + " (Default: true; false up to v0.34.0); KEP-4569; kubeadm upgrade docs for 1.35"},
	{Field: "failCgroupV1", Since: "1.35", Old: "", New: "true", Note: "1.35 refuses cgroup v1 by default",
		Source: fmt.Sprintf(kubeletTypes, "35") + " (Default: true); KEP-4569"},
	{Field: "imagePullCredentialsVerificationPolicy", Since: "1.35", Old: "", New: `"NeverVerifyPreloadedImages"`,
		Note:   "defaulted since 1.35, when KubeletEnsureSecretPulledImages became beta and on (KEP-2535; the field exists since 1.33 but stays unset while the gate is off)",
		Source: kubeletDefaults + " (set only when KubeletEnsureSecretPulledImages is on); k8s.io/kubernetes@v1.37.2 pkg/features/kube_features.go (alpha off 1.33, beta on 1.35); KEP-2535"},
	{Field: "crashLoopBackOff.maxContainerRestartPeriod", Since: "1.35", Old: "", New: `"5m0s"`,
		Note:   "defaulted since 1.35, when KubeletCrashLoopBackOffMax became beta and on (KEP-4603)",
		Source: kubeletDefaults + " (set only when KubeletCrashLoopBackOffMax is on); k8s.io/kubernetes@v1.37.2 pkg/features/kube_features.go (alpha off 1.32, beta on 1.35); KEP-4603"},
	{Field: "memoryReservationPolicy", Since: "1.36", Old: "", New: `"None"`, FieldAdded: true, Note: "new field in 1.36 (KEP-2570)",
		Source: fmt.Sprintf(kubeletTypes, "36") + " (first release with the field, Default: None); " + kubeletDefaults + "; KEP-2570"},
}

// IgnoredFields differ between nodes by design and are never compared.
var IgnoredFields = []string{"kind", "apiVersion", "tlsCertFile", "tlsPrivateKeyFile", "staticPodURL", "providerID"}

func matchesField(field string, list []string) bool {
	for _, f := range list {
		if field == f || strings.HasPrefix(field, f+".") {
			return true
		}
	}
	return false
}

// flatten turns nested maps into dotted paths; lists are leaves.
func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, vv := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, vv, out)
		}
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	out[prefix] = string(b)
}

func minor(v string) *version.Version {
	pv, err := version.ParseGeneric(strings.TrimPrefix(strings.TrimSpace(v), "v"))
	if err != nil {
		return nil
	}
	return version.MajorMinor(pv.Major(), pv.Minor())
}

func expectedChange(field, old, new, oldVer, newVer string) (DefaultChange, bool) {
	ov, nv := minor(oldVer), minor(newVer)
	for _, d := range DefaultChanges {
		if d.Field != field || d.Old != old || d.New != new {
			continue
		}
		since := minor(d.Since)
		if ov == nil || nv == nil || since == nil {
			continue
		}
		if ov.LessThan(since) && !nv.LessThan(since) {
			return d, true
		}
	}
	return DefaultChange{}, false
}

// DiffKubeletConfig compares a node's configuration with a baseline's,
// judging removed feature gates by the embedded data
// (apilifecycle.DefaultFeatureGates).
func DiffKubeletConfig(baseline, node map[string]any, baselineVersion, nodeVersion string) []ConfigDiff {
	return DiffKubeletConfigGates(baseline, node, baselineVersion, nodeVersion, nil)
}

// removedGate reports a feature gate the baseline sets and the node does
// not, which a release between the two versions removed: the node's
// kubelet refuses it, so the operator had to delete it.
func removedGate(field string, inNode bool, baselineVersion, nodeVersion string, gates *apilifecycle.FeatureGates) (string, bool) {
	name, ok := strings.CutPrefix(field, "featureGates.")
	if !ok || inNode || strings.Contains(name, ".") {
		return "", false
	}
	ov, nv := minor(baselineVersion), minor(nodeVersion)
	if ov == nil || nv == nil {
		return "", false
	}
	g, ok := gates.RemovedBetween(name, apilifecycle.R(int(ov.Major()), int(ov.Minor())), apilifecycle.R(int(nv.Major()), int(nv.Minor())))
	if !ok {
		return "", false
	}
	return fmt.Sprintf("feature gate %s was removed in %s (last %s): a %s kubelet refuses it", name, g.RemovedIn, strings.ToLower(g.LastStage), g.RemovedIn), true
}

// DiffKubeletConfigGates compares a node's configuration with a
// baseline's. Known default changes between the two versions, fields only
// one version knows and feature gates a release between them removed
// (gates; the embedded data when nil) are expected; other drift is classed
// by GPURelevantFields.
func DiffKubeletConfigGates(baseline, node map[string]any, baselineVersion, nodeVersion string, gates *apilifecycle.FeatureGates) []ConfigDiff {
	a, b := map[string]string{}, map[string]string{}
	flatten("", baseline, a)
	flatten("", node, b)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []ConfigDiff
	for k := range keys {
		if k == "" || matchesField(k, IgnoredFields) {
			continue
		}
		ov, oOK := a[k]
		nv, nOK := b[k]
		if oOK && nOK && ov == nv {
			continue
		}
		d := ConfigDiff{Field: k, Old: ov, New: nv}
		if note, ok := removedGate(k, nOK, baselineVersion, nodeVersion, gates); ok {
			d.Class, d.Note = DriftExpected, note
			out = append(out, d)
			continue
		}
		switch {
		case !oOK && nv == "{}" || !nOK && ov == "{}":
			continue
		case matchesField(k, GPURelevantFields):
			d.Class = DriftGPU
			if dc, ok := expectedChange(k, ov, nv, baselineVersion, nodeVersion); ok {
				d.Class, d.Note = DriftExpected, dc.Note
			}
		default:
			if dc, ok := expectedChange(k, ov, nv, baselineVersion, nodeVersion); ok {
				d.Class, d.Note = DriftExpected, dc.Note
			} else if !oOK && baselineVersion != nodeVersion {
				d.Class, d.Note = DriftExpected, "field only the newer kubelet reports"
			} else if !nOK && baselineVersion != nodeVersion {
				d.Class, d.Note = DriftExpected, "field the newer kubelet no longer reports"
			} else {
				d.Class = DriftOther
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// ConfigFindings turns a diff into findings: GPU-relevant drift fails,
// other drift warns, expected changes are informational.
func ConfigFindings(baselineNode string, diffs []ConfigDiff) []Finding {
	var out []Finding
	var expected []string
	for _, d := range diffs {
		show := func(s string) string {
			if s == "" {
				return "<unset>"
			}
			return s
		}
		msg := fmt.Sprintf("%s is %s (%s on %s)", d.Field, show(d.New), show(d.Old), baselineNode)
		switch d.Class {
		case DriftGPU:
			out = append(out, Finding{Check: CheckConfig, Level: LevelFail, Message: "GPU-relevant kubelet config drift " + msg})
		case DriftOther:
			out = append(out, Finding{Check: CheckConfig, Level: LevelWarning, Message: "kubelet config drift " + msg})
		default:
			expected = append(expected, d.Field)
		}
	}
	if len(expected) > 0 {
		out = append(out, Finding{Check: CheckConfig, Level: LevelInfo,
			Message: fmt.Sprintf("%d expected difference(s) from %s (version defaults): %s", len(expected), baselineNode, strings.Join(expected, ", "))})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: CheckConfig, Level: LevelInfo, Message: "kubelet config matches " + baselineNode})
	}
	return out
}
