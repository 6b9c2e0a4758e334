package fleetreport

import (
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Kind is the report's kind; its apiVersion is cli.ReportAPIVersion(Kind). Fields
// never change meaning within the version; additions are compatible.
const Kind = "FleetInventory"

// Report is the fleet inventory.
type Report struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Clusters, one per cluster asked for, in the fleet file's order (or
	// the contexts' order), each with its data or its error.
	Clusters []Cluster `json:"clusters"`
	Summary  Summary   `json:"summary"`
}

// Metadata says what the report covers and which data it judged with.
type Metadata struct {
	// GeneratedAt is when the report was made.
	GeneratedAt time.Time `json:"generatedAt"`
	// Fleet is the fleet file's metadata.name, when a file was read.
	Fleet string `json:"fleet,omitempty"`
	// Source is where the clusters came from: the fleet file's path or
	// "kubeconfig contexts".
	Source string `json:"source"`
	// CalendarDate and PatchDataDate are the dates of the release
	// calendar and of the newest-patch data.
	CalendarDate  string `json:"calendarDate"`
	PatchDataDate string `json:"patchDataDate"`
	// Store is the fleet's store the saved pre-flights were read from.
	Store string `json:"store,omitempty"`
}

// Cluster is one row of the report.
type Cluster struct {
	// Name is the cluster's name in the fleet file (the context's name
	// without one); Context is its kubeconfig context.
	Name    string `json:"name"`
	Context string `json:"context"`
	// Ring is the ring the fleet file puts it in ("" for none).
	Ring   string            `json:"ring"`
	Labels map[string]string `json:"labels,omitempty"`
	// Error says why the cluster could not be read, and ExitCode is the
	// exit code it maps to (2 configuration, 3 unreachable or forbidden).
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exitCode"`
	// Server is the apiserver URL of the context.
	Server string `json:"server,omitempty"`
	// Provider is who runs the cluster (eks, gke, aks, capi, kubeadm,
	// k3s, rke2, unknown); ProviderSource is "fleet file" or "detected".
	Provider       string `json:"provider,omitempty"`
	ProviderSource string `json:"providerSource,omitempty"`
	// Version is the control plane's version (the oldest apiserver);
	// VersionNewest is set when apiservers differ (mid-upgrade).
	Version       string `json:"version,omitempty"`
	VersionNewest string `json:"versionNewest,omitempty"`
	// Patch is how far Version is behind the newest patch of its minor.
	Patch *skew.PatchLag `json:"patch,omitempty"`
	// Support is the support window of Version's minor.
	Support *skew.Support `json:"support,omitempty"`
	// MaxSkew is the most minors any component is behind the newest
	// apiserver; SkewStatus the worst skew finding; PoolsAtEdge the pools
	// whose oldest kubelet is exactly at the policy's limit.
	MaxSkew     int         `json:"maxSkew"`
	SkewStatus  skew.Status `json:"skewStatus,omitempty"`
	PoolsAtEdge []string    `json:"poolsAtEdge,omitempty"`
	// Nodes and GPUs total the pools (GPUs: allocatable, every GPU
	// resource).
	Nodes int    `json:"nodes"`
	GPUs  int64  `json:"gpus"`
	Pools []Pool `json:"pools,omitempty"`
	// Preflight is the pre-flight saved in the store, when there is one.
	Preflight *Preflight `json:"preflight,omitempty"`
	// Notes are what could not be read but did not stop the row.
	Notes []string `json:"notes,omitempty"`
	// CollectedAt is when the cluster was read.
	CollectedAt *time.Time `json:"collectedAt,omitempty"`
}

// Pool is one node pool.
type Pool struct {
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	// Kubelets counts nodes per kubelet version, oldest first;
	// UnknownKubelets counts nodes without a parsable one.
	Kubelets        []skew.VersionCount `json:"kubelets,omitempty"`
	UnknownKubelets int                 `json:"unknownKubelets,omitempty"`
	// AtEdge says the pool's oldest kubelet is at the skew limit.
	AtEdge bool `json:"atEdge,omitempty"`
	// GPUs are allocatable GPUs by resource and product label.
	GPUs []skew.GPUCount `json:"gpus,omitempty"`
}

// Preflight is the verdict of the saved `kubectl skew preflight -o json`
// report of a cluster.
type Preflight struct {
	// Source is where it was read (<store>/latest/<cluster>/preflight.json).
	Source string `json:"source"`
	// Verdict is the report's summary status as the pre-flight's JSON
	// writes it: ok, warn, unknown, fail (preflight.Status JSONWord;
	// gpufleet.dev/v1alpha2 of FleetInventory wrote PASS, WARN, UNKNOWN,
	// FAIL). A report saved by an earlier release reads the same.
	Verdict string `json:"verdict,omitempty"`
	// Target is the minor it judged the cluster against.
	Target string `json:"target,omitempty"`
	// CollectedAt is when the pre-flight read the cluster, and
	// AgeSeconds how long before GeneratedAt that was.
	CollectedAt *time.Time `json:"collectedAt,omitempty"`
	AgeSeconds  int64      `json:"ageSeconds,omitempty"`
	// Error says why a saved report could not be read.
	Error string `json:"error,omitempty"`
}

// Summary totals the report.
type Summary struct {
	Clusters  int `json:"clusters"`
	Reachable int `json:"reachable"`
	Errors    int `json:"errors"`
	// OutOfSupport counts clusters past end of life; BehindPatch those
	// behind the newest patch of their minor.
	OutOfSupport int `json:"outOfSupport"`
	BehindPatch  int `json:"behindPatch"`
	// GPUs totals allocatable GPUs over the reachable clusters.
	GPUs int64 `json:"gpus"`
	// Versions counts clusters per control-plane minor.
	Versions map[string]int `json:"versions,omitempty"`
}

// ExitCode is the worst exit code over the clusters: 0 when every one was
// read.
func (r *Report) ExitCode() int {
	codes := make([]int, 0, len(r.Clusters))
	for _, c := range r.Clusters {
		codes = append(codes, c.ExitCode)
	}
	return cli.Worst(codes...)
}
