package fleetrun

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	fakekube "k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestClusterAPIManagementFromSecret: where the run's kubeconfigs are
// Secrets (a step pod, which has no contexts), a Cluster API step reaches
// its management cluster through the Secret named for managementContext,
// using that kubeconfig's current context (admin@mgmt here, as Cluster
// API names the contexts it writes), not a context of the pod's own.
func TestClusterAPIManagementFromSecret(t *testing.T) {
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- {name: mgmt, cluster: {server: "https://mgmt.example:6443"}}
users:
- {name: admin, user: {token: t}}
contexts:
- {name: admin@mgmt, context: {cluster: mgmt, user: admin}}
current-context: admin@mgmt
`
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mgmt-kubeconfig", Namespace: "argo"}, Data: map[string][]byte{"value": []byte(kubeconfig)}}
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": "c1", "namespace": "clusters"},
		"spec":     map[string]any{"topology": map[string]any{"workers": map[string]any{"machineDeployments": []any{map[string]any{"name": "gpu-a"}}}}},
	}}
	gvrs := map[schema.GroupVersionResource]string{}
	for _, v := range capiVersions {
		gvrs[schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: v, Resource: "clusters"}] = "ClusterList"
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs, cluster)
	// The pod's own getter: in-cluster, with the Secret; no context "mgmt".
	cg := cli.NewTestClientGetter().WithKube(fakekube.NewClientset(secret))
	cg.PerContext = map[string]*cli.TestClientGetter{"admin@mgmt": cli.NewTestClientGetter().WithDynamic(dyn)}
	acc := &Access{Getter: cg, Credentials: &fleetfile.Credentials{SecretNamespace: "argo"}}
	defer acc.Close()
	r := &stepRun{p: &Programme{Access: acc}, cp: &ClusterPlan{Name: "c1"}}
	ref, u, err := r.capiCluster(context.Background(), &fleetfile.ClusterAPIAction{ManagementContext: "mgmt", Namespace: "clusters"})
	if err != nil {
		t.Fatalf("reading the Cluster through the management Secret: %v", err)
	}
	if names, _ := topologies(u); len(names) != 1 || names[0] != "gpu-a" || ref.version != "v1beta2" {
		t.Errorf("Cluster %v at %s, want topology gpu-a at v1beta2", names, ref.version)
	}

	// Without the Secret (a run by hand): the kubeconfig context itself;
	// in a pod, which has no such context, the error names both.
	byHand := cli.NewTestClientGetter().WithKube(fakekube.NewClientset())
	byHand.PerContext = map[string]*cli.TestClientGetter{"mgmt": cli.NewTestClientGetter().WithDynamic(dyn)}
	acc2 := &Access{Getter: byHand, Credentials: &fleetfile.Credentials{SecretNamespace: "argo"}}
	defer acc2.Close()
	r.p.Access = acc2
	if _, _, err := r.capiCluster(context.Background(), &fleetfile.ClusterAPIAction{ManagementContext: "mgmt", Namespace: "clusters"}); err != nil {
		t.Errorf("by hand, through the context: %v", err)
	}
	acc3 := &Access{Getter: cli.NewTestClientGetter().WithKube(fakekube.NewClientset()), Credentials: &fleetfile.Credentials{SecretNamespace: "argo"}}
	defer acc3.Close()
	r.p.Access = acc3
	if _, _, err := r.capiCluster(context.Background(), &fleetfile.ClusterAPIAction{ManagementContext: "mgmt", Namespace: "clusters"}); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "no Secret argo/mgmt-kubeconfig") {
		t.Errorf("neither a Secret nor a context: %v (exit %d)", err, cli.ExitCode(err))
	}
}
