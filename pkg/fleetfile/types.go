package fleetfile

import (
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// APIVersion and Kind of the fleet file.
const (
	Group      = "gpufleet.dev"
	APIVersion = Group + "/v1alpha1"
	Kind       = "Fleet"
)

// Well-known cluster labels.
const (
	// RingLabel names the ring a cluster belongs to when the file's rings
	// select by it (the usual case).
	RingLabel = Group + "/ring"
	// DRPairLabel is the default label whose value pairs two clusters that
	// must never be upgraded in the same ring or batch.
	DRPairLabel = Group + "/dr-pair"
)

// Fleet is the whole file.
type Fleet struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Metadata   Metadata  `json:"metadata"`
	Spec       FleetSpec `json:"spec"`
}

// Metadata names the fleet.
type Metadata struct {
	// Name of the fleet, a DNS label; it prefixes rendered object names.
	Name string `json:"name"`
	// Labels and annotations are kept for the user's own tools.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// FleetSpec is what the fleet is and how it is upgraded.
type FleetSpec struct {
	// Target is the version the programme upgrades to. The inventory does
	// not need it.
	Target *Target `json:"target,omitempty"`
	// Kubeconfig is the kubeconfig file that holds the clusters' contexts,
	// relative to the fleet file; empty means the usual kubeconfig loading
	// rules (KUBECONFIG, ~/.kube/config, --kubeconfig).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Clusters of the fleet, each once.
	Clusters []Cluster `json:"clusters"`
	// Rings in the order they are upgraded.
	Rings []Ring `json:"rings,omitempty"`
	// Caps bound what is in flight across the whole fleet.
	Caps Caps `json:"caps,omitempty"`
	// Windows are maintenance windows: a disruptive step starts only inside
	// a window of its cluster. A cluster no window selects is always open.
	Windows []Window `json:"windows,omitempty"`
	// Freezes are periods in which no disruptive step starts.
	Freezes []Freeze `json:"freezes,omitempty"`
	// DRPairs says which label pairs clusters that must never be in flight
	// together: never both halves in one batch, and a half waits while the
	// other is in flight.
	DRPairs *DRPairs `json:"drPairs,omitempty"`
	// HaltOn are the checks `gate` evaluates; any that fires halts.
	HaltOn []HaltCheck `json:"haltOn,omitempty"`
	// Upgrade is how each cluster's control plane and pools are upgraded.
	Upgrade *Upgrade `json:"upgrade,omitempty"`
	// Store is where state and evidence live.
	Store *Store `json:"store,omitempty"`
	// Credentials, when set, are where a step running in the management
	// cluster (an engine's pod) reads each cluster's kubeconfig: a Secret
	// per cluster, the Cluster API convention. Unset, steps use the
	// kubeconfig contexts, as the commands run by hand do.
	Credentials *Credentials `json:"credentials,omitempty"`
	// Engine is what runs the programme.
	Engine *Engine `json:"engine,omitempty"`
}

// Target is the version to upgrade to.
type Target struct {
	// Version is vMAJOR.MINOR or vMAJOR.MINOR.PATCH.
	Version string `json:"version"`
}

// Cluster is one member of the fleet.
type Cluster struct {
	// Name identifies the cluster in reports, state and rendered objects:
	// a DNS-1123 label, unique in the file.
	Name string `json:"name"`
	// Context is the kubeconfig context that reaches it; empty means Name.
	Context string `json:"context,omitempty"`
	// Provider overrides provider detection (kubeadm, eks, gke, aks,
	// clusterapi, k3s, rke2).
	Provider string `json:"provider,omitempty"`
	// Labels select the cluster into rings, windows and upgrade actions.
	Labels map[string]string `json:"labels,omitempty"`
	// GPUs is the cluster's allocatable GPU count for plans made offline
	// (plan --from-dir); a live plan counts the nodes' nvidia.com/gpu.
	GPUs *int `json:"gpus,omitempty"`
	// Drain overrides spec.upgrade.drain for this cluster, field by
	// field: what one cluster drifts on (a slow eviction, a longer
	// checkpoint) without changing the rest of the fleet.
	Drain *Drain `json:"drain,omitempty"`
	// HydrateBandwidth overrides spec.upgrade.hydrateBandwidth for this
	// cluster, source by source.
	HydrateBandwidth map[string]string `json:"hydrateBandwidth,omitempty"`
}

// ContextName is the kubeconfig context of the cluster.
func (c Cluster) ContextName() string {
	if c.Context != "" {
		return c.Context
	}
	return c.Name
}

// Ring is one stage of the programme.
type Ring struct {
	// Name of the ring, a DNS-1123 label, unique.
	Name string `json:"name"`
	// Selector picks the ring's clusters by label. Each cluster is in at
	// most one ring.
	Selector metav1.LabelSelector `json:"selector"`
	// Soak is how long the ring's clusters must run on the target before
	// the next ring starts ("48h").
	Soak Duration `json:"soak,omitempty"`
	// MaxConcurrent is how many of the ring's clusters may be in flight
	// at once; 0 means the fleet cap alone.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// Approval before the ring starts, when set.
	Approval *Approval `json:"approval,omitempty"`
	// MaxFailures is the ring's failure budget: a failed cluster within it
	// leaves the run and the ring goes on; one more halts the ring, and
	// with it every later ring. 0 means any failure halts.
	MaxFailures int `json:"maxFailures,omitempty"`
}

// Approval is a human sign-off.
type Approval struct {
	// Approvers is how many distinct people must approve; 0 means 1.
	Approvers int `json:"approvers,omitempty"`
}

// Caps bound the fleet's work in flight.
type Caps struct {
	// MaxConcurrentClusters is the most clusters in flight at once; 0
	// means no fleet-wide cap.
	MaxConcurrentClusters int `json:"maxConcurrentClusters,omitempty"`
	// MaxGPUPercentInFlight is the most of the fleet's GPUs that may be on
	// clusters in flight at once, in percent (1-100); 0 means no cap.
	MaxGPUPercentInFlight int `json:"maxGPUPercentInFlight,omitempty"`
	// GPUCapExceptions names clusters whose GPUs alone exceed the GPU cap
	// and that may run, alone, anyway; any other such cluster is a plan
	// error.
	GPUCapExceptions []string `json:"gpuCapExceptions,omitempty"`
}

// Window is a recurring maintenance window.
type Window struct {
	// Selector picks the clusters the window applies to; empty selects
	// every cluster.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Schedule is a standard five-field cron expression for when the
	// window opens, in TimeZone.
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open.
	Duration Duration `json:"duration"`
	// TimeZone is an IANA zone name; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// FinishMargin is kept free at the window's end: a step does not start
	// with less than its expected duration plus this margin left.
	FinishMargin Duration `json:"finishMargin,omitempty"`
}

// Freeze is a period in which nothing disruptive starts.
type Freeze struct {
	// Start and End are dates (YYYY-MM-DD, whole days in UTC) or RFC 3339
	// times; End is exclusive for times and inclusive for dates.
	Start string `json:"start"`
	End   string `json:"end"`
	// Selector limits the freeze to some clusters; empty means all.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Reason is shown when the freeze holds a step.
	Reason string `json:"reason,omitempty"`
}

// DRPairs names the pairing label.
type DRPairs struct {
	// LabelKey is the label whose equal values pair clusters; empty means
	// gpufleet.dev/dr-pair.
	LabelKey string `json:"labelKey,omitempty"`
}

// Key is the pairing label key.
func (d *DRPairs) Key() string {
	if d == nil || d.LabelKey == "" {
		return DRPairLabel
	}
	return d.LabelKey
}

// HaltCheck is one halt condition. Check names a built-in check; the other
// fields are its parameters.
type HaltCheck struct {
	// Check is one of verify-regressions, gpu-allocatable, nodes-not-ready,
	// apiserver-429-rate, gpu-validate, alerts, promql.
	Check string `json:"check"`
	// BelowBaselinePercent: gpu-allocatable halts when allocatable GPUs are
	// more than this percent below the pre-flight baseline.
	BelowBaselinePercent *int `json:"belowBaselinePercent,omitempty"`
	// MaxPercent: nodes-not-ready halts above this percent of nodes.
	MaxPercent *int `json:"maxPercent,omitempty"`
	// PerSecondAbove: apiserver-429-rate halts above this rate of 429
	// answers per second between two reads of /metrics.
	PerSecondAbove *float64 `json:"perSecondAbove,omitempty"`
	// AlertmanagerURL: alerts halts on any active alert no silence or
	// inhibition suppresses in this Alertmanager (its API v2).
	AlertmanagerURL string `json:"alertmanagerURL,omitempty"`
	// Matchers: alerts counts only the alerts matching all of these, in
	// Alertmanager's matcher syntax (severity="critical").
	Matchers []string `json:"matchers,omitempty"`
	// ClusterLabel: alerts adds the matcher LABEL="<cluster name>", so
	// that one Alertmanager serving the fleet halts only the cluster whose
	// alert fires.
	ClusterLabel string `json:"clusterLabel,omitempty"`
	// AllAlerts: alerts counts Watchdog and InfoInhibitor too, the alerts
	// kube-prometheus-stack keeps firing by design
	// (health.AlwaysFiringMatcher leaves them out by default).
	AllAlerts bool `json:"allAlerts,omitempty"`
	// PrometheusURL: promql runs its queries against this Prometheus' HTTP
	// API. "$cluster" in it is replaced by the cluster's name.
	PrometheusURL string `json:"prometheusURL,omitempty"`
	// Queries: promql halts when one of these is out of its bound, each
	// judged against the value the cluster's pre-flight baseline recorded
	// (the list --promql-checks reads). "$cluster" in an expression is
	// replaced by the cluster's name, for a Prometheus serving the fleet.
	Queries []health.PromQLCheck `json:"queries,omitempty"`
}

// ClusterVar is replaced by the cluster's name in a promql check's URL and
// expressions.
const ClusterVar = "$cluster"

// PromQLFor is the promql check's Prometheus URL and queries for one
// cluster, "$cluster" replaced by its name.
func (h HaltCheck) PromQLFor(cluster string) (string, []health.PromQLCheck) {
	qs := make([]health.PromQLCheck, len(h.Queries))
	for i, q := range h.Queries {
		q.Expr = strings.ReplaceAll(q.Expr, ClusterVar, cluster)
		qs[i] = q
	}
	return strings.ReplaceAll(h.PrometheusURL, ClusterVar, cluster), qs
}

// Upgrade holds the upgrade actions; the first whose selector matches a
// cluster applies to it.
type Upgrade struct {
	Actions []UpgradeAction `json:"actions"`
	// StepDuration is how long one disruptive step (a control-plane hop,
	// a pool's drain or upgrade) is expected to take: a step starts only
	// with this much plus the window's finish margin left in its window.
	// Empty means 1h.
	StepDuration Duration `json:"stepDuration,omitempty"`
	// StepDurations are the expected lengths of each kind of disruptive
	// step (etcd-snapshot, hold-rollouts, control-plane, drain,
	// pool-upgrade); a kind not listed takes StepDuration. A step starts
	// only when [start, start + its duration + the finish margin) fits in
	// a window and meets no freeze.
	StepDurations map[string]Duration `json:"stepDurations,omitempty"`
	// MigrateCRDs adds a last step per cluster that rewrites stored custom
	// resources to their storage version (kubectl crd-migrate run --all).
	MigrateCRDs bool `json:"migrateCRDs,omitempty"`
	// Drain tunes the pools' gang-aware drain (kubectl gang-drain run).
	Drain *Drain `json:"drain,omitempty"`
	// HydrateBandwidth is what each weight source (object-store,
	// registry, shared-fs) serves a cluster at once, in bytes per second
	// ("1250M/s"): the drain of a pool that holds inference workloads
	// (kubectl gang-drain run --inference --hydrate-bandwidth) is paced
	// by it, and its waves' cold starts, bytes over this bandwidth, are
	// added to the drain step's expected duration in the plan's timeline.
	HydrateBandwidth map[string]string `json:"hydrateBandwidth,omitempty"`
}

// Drain are the gang-drain settings of a pool's drain step; empty fields
// keep gang-drain's defaults.
type Drain struct {
	// OnTimeout is what happens to a gang whose checkpoint does not come:
	// stop, abort or wait (gang-drain --on-timeout).
	OnTimeout string `json:"onTimeout,omitempty"`
	// AckTimeout and CheckpointDeadline are gang-drain's --ack-timeout
	// and --checkpoint-deadline.
	AckTimeout         Duration `json:"ackTimeout,omitempty"`
	CheckpointDeadline Duration `json:"checkpointDeadline,omitempty"`
	// EvictionTimeout is how long one refused eviction is retried
	// (gang-drain --eviction-timeout): raised where eviction is known to
	// be slow.
	EvictionTimeout Duration `json:"evictionTimeout,omitempty"`
}

// Over is d with every field over sets replaced by over's.
func (d *Drain) Over(over *Drain) *Drain {
	if over == nil {
		return d
	}
	out := Drain{}
	if d != nil {
		out = *d
	}
	if over.OnTimeout != "" {
		out.OnTimeout = over.OnTimeout
	}
	if over.AckTimeout != "" {
		out.AckTimeout = over.AckTimeout
	}
	if over.CheckpointDeadline != "" {
		out.CheckpointDeadline = over.CheckpointDeadline
	}
	if over.EvictionTimeout != "" {
		out.EvictionTimeout = over.EvictionTimeout
	}
	return &out
}

// Args are the gang-drain run flags of these settings.
func (d *Drain) Args() []string {
	if d == nil {
		return nil
	}
	var out []string
	if d.OnTimeout != "" {
		out = append(out, "--on-timeout", d.OnTimeout)
	}
	if d.AckTimeout != "" {
		out = append(out, "--ack-timeout", d.AckTimeout.Value().String())
	}
	if d.CheckpointDeadline != "" {
		out = append(out, "--checkpoint-deadline", d.CheckpointDeadline.Value().String())
	}
	if d.EvictionTimeout != "" {
		out = append(out, "--eviction-timeout", d.EvictionTimeout.Value().String())
	}
	return out
}

// DefaultStepDuration is the expected length of a disruptive step when the
// file does not say.
const DefaultStepDuration = time.Hour

// StepDurationValue is the expected length of a disruptive step.
func (u *Upgrade) StepDurationValue() time.Duration {
	if u == nil || u.StepDuration == "" {
		return DefaultStepDuration
	}
	return u.StepDuration.Value()
}

// DisruptiveKinds are the step kinds that start only inside a window and
// outside freezes, and whose expected duration StepDurations may set.
var DisruptiveKinds = []string{"etcd-snapshot", "hold-rollouts", "control-plane", "drain", "pool-upgrade"}

// ExpectedDuration is how long a step of the kind is expected to take:
// StepDurations[kind], else StepDuration, else DefaultStepDuration.
func (u *Upgrade) ExpectedDuration(kind string) time.Duration {
	if u != nil {
		if d, ok := u.StepDurations[kind]; ok && d != "" {
			return d.Value()
		}
	}
	return u.StepDurationValue()
}

// DrainArgs are the gang-drain run flags of a cluster's drain:
// spec.upgrade.drain with the cluster's own drain over it.
func (s FleetSpec) DrainArgs(cluster string) []string {
	var d *Drain
	if s.Upgrade != nil {
		d = s.Upgrade.Drain
	}
	for _, c := range s.Clusters {
		if c.Name == cluster {
			d = d.Over(c.Drain)
		}
	}
	return d.Args()
}

// HydrateBandwidth is a cluster's hydrate bandwidth as the values of
// gang-drain's --hydrate-bandwidth, SOURCE=RATE sorted by source:
// spec.upgrade.hydrateBandwidth with the cluster's own over it, source by
// source; nil when neither says.
func (s FleetSpec) HydrateBandwidth(cluster string) []string {
	bw := map[string]string{}
	if s.Upgrade != nil {
		maps.Copy(bw, s.Upgrade.HydrateBandwidth)
	}
	for _, c := range s.Clusters {
		if c.Name == cluster {
			maps.Copy(bw, c.HydrateBandwidth)
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(bw)) {
		out = append(out, k+"="+bw[k])
	}
	return out
}

// ActionFor returns the first action whose selector matches the labels.
func (u *Upgrade) ActionFor(ls map[string]string) (UpgradeAction, bool) {
	if u == nil {
		return UpgradeAction{}, false
	}
	for _, a := range u.Actions {
		if Selects(a.Selector, ls) {
			return a, true
		}
	}
	return UpgradeAction{}, false
}

// UpgradeAction is how matching clusters are upgraded. Exactly one of
// ClusterAPI, Command and Manual is set.
type UpgradeAction struct {
	// Selector picks the clusters; empty selects every cluster.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// ClusterAPI patches Cluster.spec.topology.version on the management
	// cluster.
	ClusterAPI *ClusterAPIAction `json:"clusterAPI,omitempty"`
	// Command runs a command template per step.
	Command *CommandAction `json:"command,omitempty"`
	// Manual waits for a human to do the step and approve it.
	Manual *ManualAction `json:"manual,omitempty"`
}

// ClusterAPIAction upgrades a Cluster API cluster from its management
// cluster.
type ClusterAPIAction struct {
	// ManagementContext is the kubeconfig context of the management cluster.
	ManagementContext string `json:"managementContext"`
	// Namespace of the Cluster object.
	Namespace string `json:"namespace"`
	// ClusterName is the Cluster object's name; empty means the fleet
	// cluster's name.
	ClusterName string `json:"clusterName,omitempty"`
	// EtcdSnapshot is a command template (as CommandAction's) that takes
	// the etcd snapshot before a hop and leaves it off the machines
	// Cluster API replaces. KubeadmControlPlane takes no backup; without
	// this command the etcd step is a manual gate that waits for
	// `kubectl skew fleet approve --cluster C --step S`.
	EtcdSnapshot string `json:"etcdSnapshot,omitempty"`
}

// CommandAction runs a command, a Go text/template over the step
// ({{.Cluster}}, {{.Context}}, {{.Kubeconfig}}, {{.Version}},
// {{.Minor}}, {{.Pool}}, {{.Selector}}, {{.Step}}, {{.Run}}), split into
// words like a shell does, without running one. Its exit code is read as
// 0 done, 4 not yet (the step runs it again later), and anything else,
// a signal included, a failure whose output is the attempt's evidence: other
// tools' codes are not interpreted (the AWS CLI's 252-255 are failures).
// Before a command is issued the step checks whether its result is there
// already, and does not issue it again while an earlier attempt's command
// that succeeded may still be running (the step kind's expected duration).
type CommandAction struct {
	// ControlPlane upgrades the control plane by one minor.
	ControlPlane string `json:"controlPlane,omitempty"`
	// Pool upgrades one node pool; its nodes are drained first.
	Pool string `json:"pool,omitempty"`
	// EtcdSnapshot takes the etcd snapshot before each hop of a cluster
	// whose etcd is its own (kubeadm, k3s, rke2).
	EtcdSnapshot string `json:"etcdSnapshot,omitempty"`
	// HoldRollouts keeps one pool ({{.Pool}}) from rolling by itself when
	// the control plane moves (a Karpenter NodeClass pin, a GKE
	// maintenance exclusion, ...), run by the hold-rollouts step for each
	// pool it holds; ReleaseRollouts undoes it at the pool's own upgrade,
	// before Pool. Without HoldRollouts the hold-rollouts step is a manual
	// gate that shows the runbook's commands.
	HoldRollouts    string `json:"holdRollouts,omitempty"`
	ReleaseRollouts string `json:"releaseRollouts,omitempty"`
}

// ManualAction waits for a person.
type ManualAction struct {
	// Instructions are shown while the step waits.
	Instructions string `json:"instructions,omitempty"`
}

// Store is where state and evidence live.
type Store struct {
	// URL is a directory (relative to the fleet file), file:///path,
	// s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix.
	URL string `json:"url"`
}

// Credentials name the Secret that holds each cluster's kubeconfig in the
// management cluster.
type Credentials struct {
	// SecretNamespace is the Secrets' namespace.
	SecretNamespace string `json:"secretNamespace"`
	// NameTemplate is the Secret's name, {{.Cluster}} replaced; empty
	// means "{{.Cluster}}-kubeconfig" (Cluster API's convention).
	NameTemplate string `json:"nameTemplate,omitempty"`
	// Key is the data key holding the kubeconfig; empty means "value".
	Key string `json:"key,omitempty"`
}

// SecretName is the Secret of one cluster.
func (c *Credentials) SecretName(cluster string) string {
	t := c.NameTemplate
	if t == "" {
		t = "{{.Cluster}}-kubeconfig"
	}
	return strings.ReplaceAll(t, "{{.Cluster}}", cluster)
}

// SecretKey is the data key of the kubeconfig.
func (c *Credentials) SecretKey() string {
	if c.Key == "" {
		return "value"
	}
	return c.Key
}

// Engine is the workflow engine that runs the programme.
type Engine struct {
	Argo *ArgoEngine `json:"argo,omitempty"`
}

// ArgoEngine are the settings of rendered Argo Workflows objects.
type ArgoEngine struct {
	// Namespace of the rendered objects (default argo).
	Namespace string `json:"namespace,omitempty"`
	// Image is the suite's image, pinned by digest (make image prints it):
	// REGISTRY/REPO@sha256:... or REGISTRY/REPO:TAG@sha256:...
	Image string `json:"image,omitempty"`
	// ServiceAccount the step pods run as (default gpufleet-upgrader).
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// NodeSelector places the step pods.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// StoreSecret names a Secret whose keys become the step pods'
	// environment: the object store's credentials (AWS_ACCESS_KEY_ID, ...).
	StoreSecret string `json:"storeSecret,omitempty"`
	// RetryInterval is the first wait before a step that answered "not
	// yet" (window closed, cap full, manual step pending) runs again; it
	// doubles up to RetryCap. Defaults 1m and 10m.
	RetryInterval Duration `json:"retryInterval,omitempty"`
	RetryCap      Duration `json:"retryCap,omitempty"`
}

// Duration is a Go duration string ("48h", "15m"); Load checks it, so
// Value never fails on a loaded file.
type Duration string

// Value is the duration; "" is zero.
func (d Duration) Value() time.Duration {
	v, _ := parseDuration(string(d))
	return v
}
