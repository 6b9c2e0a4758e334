package harness_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetclient "sigs.k8s.io/jobset/client-go/clientset/versioned"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// The exported API the e2e tests are written against, with the signatures
// it had when the control plane lived in this package: it compiles, or a
// change broke the tests that use it. (Moving the control plane to
// pkg/localcluster kept every name through aliases, wrappers and the
// embedded cluster.)
var (
	_ func(testing.TB, string) int                                                                                              = harness.AuditLines
	_ func(testing.TB, string, int, string) []harness.AuditEvent                                                                = harness.AuditEvents
	_ func(harness.AuditEvent) string                                                                                           = harness.AuditEvent.Request
	_ func(testing.TB, string, int, string, func(harness.AuditEvent) string) map[string]int                                     = harness.CountAudit
	_ func() string                                                                                                             = harness.CacheDir
	_ func(string) harness.Binaries                                                                                             = harness.BinariesIn
	_ func() (string, error)                                                                                                    = harness.RepoRoot
	_ func(harness.Options) (harness.Binaries, error)                                                                           = harness.EnsureBinaries
	_ func(context.Context, harness.Options) (*harness.ControlPlane, error)                                                     = harness.Start
	_ func(*harness.ControlPlane, string) string                                                                                = (*harness.ControlPlane).LogPath
	_ func(*harness.ControlPlane) map[string]int                                                                                = (*harness.ControlPlane).Pids
	_ func(*harness.ControlPlane, context.Context) error                                                                        = (*harness.ControlPlane).StartAPIServer
	_ func(*harness.ControlPlane)                                                                                               = (*harness.ControlPlane).StopAPIServer
	_ func(*harness.ControlPlane)                                                                                               = (*harness.ControlPlane).KillAPIServer
	_ func(*harness.ControlPlane, context.Context) error                                                                        = (*harness.ControlPlane).RestartAPIServer
	_ func(*harness.ControlPlane)                                                                                               = (*harness.ControlPlane).Stop
	_ func(*harness.ControlPlane, string) (bool, error)                                                                         = (*harness.ControlPlane).Exited
	_ func(*harness.ControlPlane) map[string]time.Duration                                                                      = (*harness.ControlPlane).CPUTime
	_ func(*harness.ControlPlane, context.Context, time.Duration, float64, time.Duration) (time.Duration, error)                = (*harness.ControlPlane).WaitIdle
	_ func(*harness.ControlPlane) apiextensionsclient.Interface                                                                 = (*harness.ControlPlane).APIExtensions
	_ func(string) ([]*apiextensionsv1.CustomResourceDefinition, error)                                                         = harness.LoadCRDs
	_ func(*harness.ControlPlane, context.Context, ...*apiextensionsv1.CustomResourceDefinition) error                          = (*harness.ControlPlane).ApplyCRDs
	_ func(string, string, string, []string, string) *apiextensionsv1.CustomResourceDefinition                                  = harness.MultiVersionCRD
	_ func(string, harness.GPUPool, string) *corev1.Node                                                                        = harness.GPUNode
	_ func(*harness.ControlPlane, context.Context, harness.GPUPool) ([]*corev1.Node, error)                                     = (*harness.ControlPlane).CreateGPUNodes
	_ func(*corev1.Node) bool                                                                                                   = harness.NodeReady
	_ func(*corev1.Pod) bool                                                                                                    = harness.PodReady
	_ func(int) corev1.PodSpec                                                                                                  = harness.PodSpec
	_ func(string, string, int32, int) *appsv1.Deployment                                                                       = harness.Deployment
	_ func(*harness.ControlPlane, context.Context, *appsv1.Deployment) (*appsv1.Deployment, error)                              = (*harness.ControlPlane).CreateDeployment
	_ func(*harness.ControlPlane, context.Context, string, string, int, time.Duration) error                                    = (*harness.ControlPlane).WaitPodsReady
	_ func(string, string, string, int) *policyv1.PodDisruptionBudget                                                           = harness.PDB
	_ func(*harness.ControlPlane, context.Context, *policyv1.PodDisruptionBudget, int32) (*policyv1.PodDisruptionBudget, error) = (*harness.ControlPlane).CreatePDB
	_ func(string, string, int32, int, bool) *batchv1.Job                                                                       = harness.Job
	_ func(*harness.ControlPlane) kueueclient.Interface                                                                         = (*harness.ControlPlane).KueueClient
	_ func(*harness.ControlPlane) jobsetclient.Interface                                                                        = (*harness.ControlPlane).JobSetClient
	_ func(string, map[string]string) *kueuev1beta2.ResourceFlavor                                                              = harness.ResourceFlavor
	_ func(string, string, int) *kueuev1beta2.ClusterQueue                                                                      = harness.ClusterQueue
	_ func(string, string, string) *kueuev1beta2.LocalQueue                                                                     = harness.LocalQueue
	_ func(*harness.ControlPlane, context.Context, string, string, map[string]string, int) (func(), error)                      = (*harness.ControlPlane).CreateQueues
	_ func(string, string, string, int32, int) *batchv1.Job                                                                     = harness.QueuedJob
	_ func(*harness.ControlPlane, context.Context, string, string) (*kueuev1beta2.Workload, error)                              = (*harness.ControlPlane).WorkloadFor
	_ func(*kueuev1beta2.Workload) bool                                                                                         = harness.WorkloadAdmitted
	_ func(string, string, string, int32, int) *jobsetv1alpha2.JobSet                                                           = harness.TrainingJobSet
	_ func(*testing.M, harness.Options)                                                                                         = harness.Main
	_ func(testing.TB) *harness.ControlPlane                                                                                    = harness.Shared
	_ func(*harness.ControlPlane, testing.TB) string                                                                            = (*harness.ControlPlane).Namespace
	_ func(context.Context, string, time.Duration, time.Duration, func(context.Context) (bool, error)) error                    = harness.Poll
	_ func(context.Context, string, time.Duration, func(context.Context) (bool, error)) error                                   = harness.Eventually

	_ = []string{harness.KubeVersion, harness.EtcdVersion, harness.KwokVersion, harness.KueueVersion, harness.JobSetVersion,
		harness.KrewVersion, harness.HelmVersion, harness.Etcd, harness.KubeAPIServer, harness.KubeControllerManager,
		harness.KubeScheduler, harness.Kwok, harness.Kueue, harness.JobSet, harness.PoolLabel, harness.RackSetLabel,
		harness.GPUProductLabel, harness.PauseImage, harness.KwokNodeAnnotation, harness.KwokCompleteLabel,
		harness.KueueNamespace, harness.QueueNameLabel}
	_ corev1.ResourceName = harness.GPUResource
	_ []string            = harness.DefaultRuntimeConfig
)

// The fields tests read and set.
func _(cp *harness.ControlPlane, b harness.Binaries, e harness.AuditEvent) {
	var (
		_ string               = cp.Dir + cp.Kubeconfig + cp.Host + cp.EtcdEndpoint + cp.AuditLogPath + cp.CACertPath
		_ *rest.Config         = cp.Config
		_ kubernetes.Interface = cp.Client
		_ harness.Binaries     = cp.Binaries
		_ harness.Options      = cp.Options
		_ string               = b.Dir + b.Etcd + b.KubeAPIServer + b.KubeControllerManager + b.KubeScheduler + b.Kubectl + b.Kwok + b.KwokStages + b.Kueue + b.KueueCRDs + b.JobSet + b.JobSetCRDs + b.Krew + b.Helm
		_ string               = e.Verb + e.UserAgent + e.RequestURI + e.Resource + e.Subresource + e.Namespace
	)
	_ = harness.Options{Kueue: true, JobSet: true, FeatureGates: map[string]bool{}, RuntimeConfig: nil, APIServerArgs: nil,
		ControllerManagerArgs: nil, Dir: "", KeepDir: false, StartTimeout: time.Minute, Log: nil}
	_ = harness.GPUPool{Name: "", Nodes: 1, GPUsPerNode: 8, KubeletVersion: "", RackSets: 1, Product: "", Labels: nil, Taints: nil}
}
