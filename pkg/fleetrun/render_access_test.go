package fleetrun

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// TestRenderGrantsSecretsInTheirNamespace: kubeconfig Secrets outside the
// engine's namespace get a Role and RoleBinding there, for the step pods'
// ServiceAccount, on those Secrets by name; the engine's Role does not
// name them.
func TestRenderGrantsSecretsInTheirNamespace(t *testing.T) {
	p, r := mustRender(t, func(f *fleetfile.Fleet) {
		f.Spec.Credentials = &fleetfile.Credentials{SecretNamespace: "fleet-secrets", NameTemplate: "{{.Cluster}}-admin"}
	})
	var want []string
	for _, c := range p.Clusters {
		want = append(want, c.Name+"-admin")
	}
	got := map[string]string{} // kind/namespace -> what it grants or binds
	for _, o := range renderedObjects(t, r.YAML) {
		switch o.GetKind() {
		case "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			got["Role/"+o.GetNamespace()] = fmt.Sprint(rules)
		case "RoleBinding":
			subj, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			role, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			got["RoleBinding/"+o.GetNamespace()] = fmt.Sprint(role, subj)
		}
	}
	sec := got["Role/fleet-secrets"]
	if !strings.Contains(sec, "resourceNames:["+strings.Join(want, " ")+"]") || !strings.Contains(sec, "verbs:[get]") || !strings.Contains(sec, "resources:[secrets]") {
		t.Errorf("Role in fleet-secrets: %s\nwant get on secrets %v", sec, want)
	}
	if strings.Contains(got["Role/argo"], "secrets") {
		t.Errorf("the engine's Role grants secrets: %s", got["Role/argo"])
	}
	if b := got["RoleBinding/fleet-secrets"]; !strings.Contains(b, DefaultServiceAccount) || !strings.Contains(b, "namespace:argo") {
		t.Errorf("RoleBinding in fleet-secrets: %s, want the argo/%s ServiceAccount", b, DefaultServiceAccount)
	}
	if len(got) != 4 {
		t.Errorf("RBAC objects %v, want a Role and RoleBinding in argo and in fleet-secrets", got)
	}
}

// TestRenderRefusesWhatAPodCannotReach: without kubeconfig Secrets a step
// pod could not reach its cluster: a one-line usage error, no YAML.
func TestRenderRefusesWhatAPodCannotReach(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*fleetfile.Fleet)
		want   string
	}{
		"no credentials": {func(f *fleetfile.Fleet) { f.Spec.Credentials = nil }, "spec.credentials.secretNamespace: required"},
		"no namespace":   {func(f *fleetfile.Fleet) { f.Spec.Credentials = &fleetfile.Credentials{} }, "spec.credentials.secretNamespace: required"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := Render(planRun(t, tc.mutate), RenderOptions{})
			if cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(fmt.Sprint(err), tc.want) || strings.Contains(fmt.Sprint(err), "\n") || r != nil {
				t.Errorf("err = %v, want a one-line usage error containing %q", err, tc.want)
			}
		})
	}
}

// TestRenderGrantsManagementSecret: a Cluster API action's management
// cluster is reached in the pod through the Secret named for its
// managementContext, which the render grants with the clusters' own.
func TestRenderGrantsManagementSecret(t *testing.T) {
	p, r := mustRender(t, func(f *fleetfile.Fleet) {
		f.Spec.Credentials = &fleetfile.Credentials{SecretNamespace: "fleet-secrets"}
		f.Spec.Upgrade.Actions = append([]fleetfile.UpgradeAction{{ClusterAPI: &fleetfile.ClusterAPIAction{ManagementContext: "mgmt", Namespace: "clusters"}}}, f.Spec.Upgrade.Actions...)
	})
	want := []string{}
	for _, c := range p.Clusters {
		want = append(want, c.Name+"-kubeconfig")
	}
	want = append(want, "mgmt-kubeconfig")
	found := false
	for _, o := range renderedObjects(t, r.YAML) {
		if o.GetKind() != "Role" || o.GetNamespace() != "fleet-secrets" {
			continue
		}
		found = true
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		if got := fmt.Sprint(rules); !strings.Contains(got, "resourceNames:["+strings.Join(want, " ")+"]") {
			t.Errorf("Role in fleet-secrets: %s\nwant get on %v", got, want)
		}
	}
	if !found {
		t.Fatal("no Role in fleet-secrets")
	}
}
