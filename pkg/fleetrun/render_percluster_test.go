package fleetrun

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// childWorkflows instantiates the run Workflow's resource template for
// each cluster step, as the controller does before the executor creates
// it: the template's inputs substituted into its manifest.
func childWorkflows(t *testing.T, wf *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	tmpls, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	var manifest string
	byName := map[string]map[string]any{}
	for _, x := range tmpls {
		tm := x.(map[string]any)
		byName[tm["name"].(string)] = tm
		if _, ok := tm["resource"]; ok {
			manifest, _, _ = unstructured.NestedString(tm, "resource", "manifest")
		}
	}
	var out []*unstructured.Unstructured
	for name, tm := range byName {
		if !strings.HasPrefix(name, "ring-") {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(tm, "steps")
		for _, g := range groups {
			for _, s := range g.([]any) {
				st := s.(map[string]any)
				if st["template"] != "cluster" {
					t.Fatalf("ring %s step %v is not the cluster resource template", name, st)
				}
				m := strings.ReplaceAll(manifest, "{{workflow.parameters.run}}", fmt.Sprint(wf.GetLabels()["gpufleet.dev/run"]))
				ps, _, _ := unstructured.NestedSlice(st, "arguments", "parameters")
				for _, p := range ps {
					pm := p.(map[string]any)
					m = strings.ReplaceAll(m, "{{inputs.parameters."+pm["name"].(string)+"}}", pm["value"].(string))
				}
				if strings.Contains(m, "{{") {
					t.Fatalf("cluster %s's Workflow keeps a placeholder:\n%s", st["name"], m)
				}
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
					t.Fatal(err)
				}
				out = append(out, u)
			}
		}
	}
	return out
}

// TestRenderWorkflowPerCluster: with a Workflow per cluster, the run's
// Workflow holds no cluster's steps: each ring creates its clusters'
// Workflows from their run-scoped WorkflowTemplates with one resource
// template (action create, owned by the run, done when the child's phase
// is Succeeded, failed when Failed or Error), run by a launcher account
// that alone may create and read Workflows.
func TestRenderWorkflowPerCluster(t *testing.T) {
	p := planRun(t, withSecrets)
	r, err := Render(p, RenderOptions{WorkflowPerCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	var wf *unstructured.Unstructured
	wts := map[string]*unstructured.Unstructured{}
	roles, bound, accounts := map[string]*unstructured.Unstructured{}, map[string]string{}, map[string]bool{}
	launcher := LauncherServiceAccount(DefaultServiceAccount)
	for _, o := range renderedObjects(t, r.YAML) {
		switch o.GetKind() {
		case "Workflow":
			wf = o
		case "WorkflowTemplate":
			wts[o.GetName()] = o
		case "Role":
			roles[o.GetNamespace()+"/"+o.GetName()] = o
		case "RoleBinding":
			subj, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			role, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			bound[o.GetNamespace()+"/"+role] = fmt.Sprint(subj[0].(map[string]any)["name"])
		case "ServiceAccount":
			accounts[o.GetName()] = true
		}
	}
	if wf == nil || len(wts) != len(p.Clusters) {
		t.Fatalf("objects: Workflow %v, %d WorkflowTemplates for %d clusters", wf != nil, len(wts), len(p.Clusters))
	}
	// Only the launcher account may create Workflows: the step pods'
	// Role grants none, the launcher's exactly create and get on
	// Workflows and what Argo's executor reports results with.
	grants := func(key string) map[string]string {
		role := roles[key]
		if role == nil {
			t.Fatalf("no Role %s (have %v)", key, roles)
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		out := map[string]string{}
		for _, x := range rules {
			rule := x.(map[string]any)
			out[fmt.Sprint(rule["apiGroups"], rule["resources"])] = fmt.Sprint(rule["verbs"])
		}
		return out
	}
	if g := grants("argo/" + DefaultServiceAccount); g["[argoproj.io] [workflows]"] != "" {
		t.Errorf("the step pods' Role grants Workflows: %v", g)
	}
	if g := grants("argo/" + launcher); len(g) != 2 || g["[argoproj.io] [workflows]"] != "[create get]" || g["[argoproj.io] [workflowtaskresults]"] != "[create patch]" {
		t.Errorf("the launcher's Role grants %v, want create and get on Workflows and create and patch on task results", g)
	}
	if !accounts[launcher] || bound["argo/"+launcher] != launcher {
		t.Errorf("launcher account %s: created %v, its Role bound to %q", launcher, accounts[launcher], bound["argo/"+launcher])
	}
	y, _ := yaml.Marshal(wf.Object)
	for _, lacks := range []string{"templateRef", "dag:", "guarded-step", "--cluster"} {
		if strings.Contains(string(y), lacks) {
			t.Errorf("the run's Workflow holds a cluster's steps (%s)", lacks)
		}
	}
	tmpls, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	var res map[string]any
	for _, x := range tmpls {
		tm := x.(map[string]any)
		rs, ok := tm["resource"]
		if ok {
			res = rs.(map[string]any)
			if tm["serviceAccountName"] != launcher {
				t.Errorf("the resource template runs as %v, want %s", tm["serviceAccountName"], launcher)
			}
			continue
		}
		if sa, ok := tm["serviceAccountName"]; ok {
			t.Errorf("template %s runs as %v, not the Workflow's account", tm["name"], sa)
		}
	}
	for k, want := range map[string]any{"action": "create", "setOwnerReference": true,
		"successCondition": "status.phase == Succeeded", "failureCondition": "status.phase in (Failed, Error)"} {
		if res[k] != want {
			t.Errorf("resource template %s = %v, want %v", k, res[k], want)
		}
	}
	children := childWorkflows(t, wf)
	var got []string
	for _, ch := range children {
		ref, _, _ := unstructured.NestedString(ch.Object, "spec", "workflowTemplateRef", "name")
		wt, ok := wts[ref]
		cluster := ch.GetLabels()["gpufleet.dev/cluster"]
		if !ok || wt.GetLabels()["gpufleet.dev/cluster"] != cluster || ref != TemplateName(p.Fleet, p.Run, cluster) {
			t.Errorf("cluster %s's Workflow refers to template %q, not its own", cluster, ref)
		}
		if ch.GetGenerateName() != ClusterWorkflowPrefix(p.Fleet, p.Run, cluster) || ch.GetNamespace() != wf.GetNamespace() || ch.GetLabels()["gpufleet.dev/run"] != p.Run || ch.GetLabels()["gpufleet.dev/fleet"] != p.Fleet {
			t.Errorf("cluster %s's Workflow: generateName %q, namespace %q, labels %v", cluster, ch.GetGenerateName(), ch.GetNamespace(), ch.GetLabels())
		}
		c, _ := p.Cluster(cluster)
		if ch.GetLabels()["gpufleet.dev/ring"] != c.Ring {
			t.Errorf("cluster %s's Workflow is labelled ring %s, want %s", cluster, ch.GetLabels()["gpufleet.dev/ring"], c.Ring)
		}
		args, _, _ := unstructured.NestedSlice(ch.Object, "spec", "arguments", "parameters")
		if len(args) != 1 || args[0].(map[string]any)["value"] != p.Run {
			t.Errorf("cluster %s's Workflow arguments %v, want run %s", cluster, args, p.Run)
		}
		got = append(got, cluster)
	}
	var want []string
	for _, c := range p.Clusters {
		want = append(want, c.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the rings create Workflows for %v, want %v", got, want)
	}
	// The single-Workflow render grants no Workflows.
	_, one := mustRender(t, withSecrets)
	if strings.Contains(string(one.YAML), "- workflows\n") || strings.Contains(string(one.YAML), launcher) {
		t.Error("the single-Workflow render grants Workflows or has a launcher account")
	}
}
