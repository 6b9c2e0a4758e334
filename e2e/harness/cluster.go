package harness

import (
	"context"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// ControlPlane is a running local control plane, with the helpers tests
// use on it.
type ControlPlane struct {
	*localcluster.Cluster
}

// Options select what a control plane runs beyond the core components.
type Options = localcluster.Options

// Binaries holds the paths of the control-plane binaries and data files.
type Binaries = localcluster.Binaries

// GPUPool describes a set of fake GPU nodes.
type GPUPool = localcluster.GPUPool

// Start builds missing binaries and starts a control plane; its progress
// goes to opts.Log, or to stderr. The caller must call Stop.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ControlPlane{Cluster: c}, nil
}

// Attach returns a ControlPlane for a control plane another process runs
// (the demo's), through its admin kubeconfig, for its clients and
// fixtures; Stop does nothing.
func Attach(kubeconfig string) (*ControlPlane, error) {
	c, err := localcluster.Attach(kubeconfig)
	if err != nil {
		return nil, err
	}
	return &ControlPlane{Cluster: c}, nil
}

// Versions of the binaries the harness runs.
const (
	KubeVersion   = localcluster.KubeVersion
	EtcdVersion   = localcluster.EtcdVersion
	KwokVersion   = localcluster.KwokVersion
	KueueVersion  = localcluster.KueueVersion
	JobSetVersion = localcluster.JobSetVersion
	KrewVersion   = localcluster.KrewVersion
	HelmVersion   = localcluster.HelmVersion
)

// Component names, as used for log files and by LogPath.
const (
	Etcd                  = localcluster.Etcd
	KubeAPIServer         = localcluster.KubeAPIServer
	KubeControllerManager = localcluster.KubeControllerManager
	KubeScheduler         = localcluster.KubeScheduler
	Kwok                  = localcluster.Kwok
	Kueue                 = localcluster.Kueue
	JobSet                = localcluster.JobSet
)

// Labels, annotations and resources of the fixtures.
const (
	GPUResource        = localcluster.GPUResource
	PoolLabel          = localcluster.PoolLabel
	RackSetLabel       = localcluster.RackSetLabel
	GPUProductLabel    = localcluster.GPUProductLabel
	PauseImage         = localcluster.PauseImage
	KwokNodeAnnotation = localcluster.KwokNodeAnnotation
	KwokCompleteLabel  = localcluster.KwokCompleteLabel
	KueueNamespace     = localcluster.KueueNamespace
	QueueNameLabel     = localcluster.QueueNameLabel
)

// DefaultRuntimeConfig is the --runtime-config every control plane gets.
var DefaultRuntimeConfig = localcluster.DefaultRuntimeConfig

// CacheDir returns the binary cache (localcluster.CacheDir).
func CacheDir() string { return localcluster.CacheDir() }

// BinariesIn returns the binary paths under cache dir.
func BinariesIn(dir string) Binaries { return localcluster.BinariesIn(dir) }

// EnsureBinaries returns the binaries opts needs, building missing ones.
func EnsureBinaries(opts Options) (Binaries, error) { return localcluster.EnsureBinaries(opts) }

// RepoRoot finds the repository root (localcluster.RepoRoot).
func RepoRoot() (string, error) { return localcluster.RepoRoot() }

// GPUNode returns a fake GPU node object for KWOK to manage.
func GPUNode(name string, pool GPUPool, rackSet string) *corev1.Node {
	return localcluster.GPUNode(name, pool, rackSet)
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool { return localcluster.NodeReady(n) }

// PodReady reports whether the pod runs and its Ready condition is True.
func PodReady(p *corev1.Pod) bool { return localcluster.PodReady(p) }

// LoadCRDs reads every CustomResourceDefinition in the YAML files of dir.
func LoadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return localcluster.LoadCRDs(dir)
}

// Poll calls cond every interval until it returns true, returns an error, or
// timeout passes.
func Poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return localcluster.Poll(ctx, what, interval, timeout, cond)
}

// Eventually is Poll with a 250ms interval, for tests.
func Eventually(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return localcluster.Eventually(ctx, what, timeout, cond)
}
