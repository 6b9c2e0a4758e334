package fleetrun

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// renderedObjects decodes a render's YAML.
func renderedObjects(t *testing.T, y []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	for {
		var u unstructured.Unstructured
		if err := d.Decode(&u.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if u.Object != nil {
			out = append(out, &u)
		}
	}
}

// TestRenderBoundsEveryPod: the run's Workflow cleans up after itself
// (podGC, TTL), runs alone (a mutex per run), records its end (onExit),
// and every template that makes a pod has a deadline, resources and the
// restricted security profile; templates are named per run.
func TestRenderBoundsEveryPod(t *testing.T) {
	for _, perCluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-cluster=%v", perCluster), func(t *testing.T) { testRenderBounds(t, perCluster) })
	}
}

func testRenderBounds(t *testing.T, perCluster bool) {
	p := planRun(t, withSecrets)
	r, err := Render(p, RenderOptions{WorkflowPerCluster: perCluster})
	if err != nil {
		t.Fatal(err)
	}
	workflows := 0
	str := func(o map[string]any, path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(o, path...)
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			return fmt.Sprint(int64(f))
		}
		return fmt.Sprint(v)
	}
	pods, deadlines := 0, map[string]string{}
	for _, o := range renderedObjects(t, r.YAML) {
		if o.GetKind() != "Workflow" && o.GetKind() != "WorkflowTemplate" {
			continue
		}
		if o.GetKind() == "WorkflowTemplate" {
			cluster := o.GetLabels()["gpufleet.dev/cluster"]
			if want := TemplateName(p.Fleet, p.Run, cluster); o.GetName() != want || !strings.Contains(want, p.Run) || o.GetLabels()["gpufleet.dev/run"] != p.Run {
				t.Errorf("template %s labels %v: want %s, named and labelled per run", o.GetName(), o.GetLabels(), want)
			}
			tasks, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
			dag, _, _ := unstructured.NestedSlice(tasks[0].(map[string]any), "dag", "tasks")
			c, _ := p.Cluster(cluster)
			for i, task := range dag {
				params, _, _ := unstructured.NestedSlice(task.(map[string]any), "arguments", "parameters")
				for _, pa := range params {
					if pa.(map[string]any)["name"] == "deadline" {
						deadlines[c.Steps[i].Kind] = fmt.Sprint(pa.(map[string]any)["value"])
					}
				}
			}
		}
		// Each Workflow is bounded: the run's, and with a Workflow per
		// cluster each cluster's WorkflowTemplate, which its Workflow is
		// made from, with a mutex of its own.
		mutex := MutexName(p.Fleet, p.Run)
		if o.GetKind() == "WorkflowTemplate" && perCluster {
			mutex = ClusterMutexName(p.Fleet, p.Run, o.GetLabels()["gpufleet.dev/cluster"])
			if e := str(o.Object, "spec", "entrypoint"); e != "cluster" {
				t.Errorf("%s: entrypoint %s, want cluster", o.GetName(), e)
			}
		}
		if o.GetKind() == "Workflow" || perCluster {
			workflows++
			spec := o.Object["spec"].(map[string]any)
			for path, want := range map[string]string{
				"podGC.strategy":                  "OnPodSuccess",
				"ttlStrategy.secondsAfterSuccess": fmt.Sprint(TTLAfterSuccess),
				"ttlStrategy.secondsAfterFailure": fmt.Sprint(TTLAfterFailure),
				"onExit":                          exitTemplate,
				"securityContext.runAsNonRoot":    "true",
			} {
				if got := str(spec, strings.Split(path, ".")...); got != want {
					t.Errorf("Workflow spec.%s = %s, want %s", path, got, want)
				}
			}
			mx, _, _ := unstructured.NestedSlice(spec, "synchronization", "mutexes")
			if len(mx) != 1 || str(mx[0].(map[string]any), "name") != mutex {
				t.Errorf("%s %s mutexes %v, want one named %s", o.GetKind(), o.GetName(), mx, mutex)
			}
			if sa := str(spec, "serviceAccountName"); sa != DefaultServiceAccount {
				t.Errorf("%s %s runs as %s", o.GetKind(), o.GetName(), sa)
			}
		}
		tmpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
		for _, x := range tmpls {
			tm := x.(map[string]any)
			if _, ok := tm["container"]; !ok {
				continue
			}
			pods++
			name := o.GetName() + "/" + str(tm, "name")
			for path, want := range map[string]string{
				"securityContext.runAsNonRoot":                       "true",
				"securityContext.seccompProfile.type":                "RuntimeDefault",
				"container.securityContext.allowPrivilegeEscalation": "false",
				"container.securityContext.capabilities.drop":        "[ALL]",
				"container.resources.requests.cpu":                   "100m",
				"container.resources.limits.memory":                  "512Mi",
			} {
				if got := str(tm, strings.Split(path, ".")...); got != want {
					t.Errorf("%s: %s = %s, want %s", name, path, got, want)
				}
			}
			if d := str(tm, "activeDeadlineSeconds"); d == "<nil>" || d == "" {
				t.Errorf("%s: no activeDeadlineSeconds", name)
			}
			if perCluster && str(tm, "name") == exitTemplate && o.GetKind() == "WorkflowTemplate" && !strings.Contains(str(tm, "container", "args"), "{{workflow.name}}") {
				t.Errorf("%s: the cluster's exit handler does not record its own Workflow's end: %s", name, str(tm, "container", "args"))
			}
		}
	}
	want := len(p.Clusters) + 2
	if perCluster {
		want += len(p.Clusters) // each cluster's exit handler
	}
	if pods != want {
		t.Errorf("%d pod templates, want a step per cluster, the gate and the exit handler of each Workflow (%d)", pods, want)
	}
	if want := 1 + map[bool]int{true: len(p.Clusters)}[perCluster]; workflows != want {
		t.Errorf("%d Workflows' settings checked, want %d", workflows, want)
	}
	for _, kind := range []string{StepGate, StepPreflight, StepDrain, StepPoolUpgrade, StepVerify} {
		if want := fmt.Sprint(int64(StepDeadlines[kind].Seconds())); deadlines[kind] != want {
			t.Errorf("step kind %s runs with deadline %q, want %s", kind, deadlines[kind], want)
		}
	}
}

// TestRenderTemplatesDoNotCollideAcrossRuns: rendering the next run of a
// fleet names none of the templates the current run's Workflow resolves.
func TestRenderTemplatesDoNotCollideAcrossRuns(t *testing.T) {
	f := loadFleet(t, withSecrets)
	names := map[string]string{}
	for i, run := range []string{"r1", "r2", "r3"} {
		p := mustPlan(t, f, infos(f, nil), monday0930)
		p.Run = run
		r, err := Render(p, RenderOptions{WorkflowPerCluster: i == 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range r.Objects {
			if o.Kind != "WorkflowTemplate" && o.Kind != "Workflow" {
				continue
			}
			if other, ok := names[o.Kind+"/"+o.Name]; ok && other != run {
				t.Errorf("%s %s is rendered by runs %s and %s", o.Kind, o.Name, other, run)
			}
			names[o.Kind+"/"+o.Name] = run
		}
	}
}
