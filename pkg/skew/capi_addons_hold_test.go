package skew

import (
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A Cluster API add-on rollback holds KubeadmControlPlane off kube-proxy
// and CoreDNS before undoing them (it would put them forward again at its
// next reconcile), and each hop's control-plane step releases that hold
// before it moves the version. The Cluster the pasted printf writes is
// read back as YAML: the hold carries both skip annotations on the
// topology's control plane, the release carries no spec at all.
func TestRunbookCAPIAddonsHeldForTheirRollback(t *testing.T) {
	p := variantPlan(t, "capi")
	var sawBack, sawRelease int
	for _, s := range p.Steps {
		text := strings.Join(FlattenBlocks(s.Blocks), "\n")
		if s.Phase == PhaseControlPlane {
			i, j := strings.Index(text, "--field-manager="+capiAddonsHoldManager), strings.Index(text, `"topology":{"version"`)
			if i < 0 || j < 0 || i > j {
				t.Errorf("step %d: the control-plane step does not release the add-on hold before the version moves:\n%s", s.Number, text)
			}
			sawRelease++
		}
		if s.Rollback == nil || s.Phase != PhaseAddons {
			continue
		}
		back := strings.Join(FlattenBlocks(s.Rollback.Blocks), "\n")
		i, j := strings.Index(back, "--field-manager="+capiAddonsHoldManager), strings.Index(back, "rollout undo")
		if i < 0 || j < 0 || i > j {
			t.Errorf("step %d: the add-on rollback does not hold KubeadmControlPlane off the add-ons first:\n%s", s.Number, back)
		}
		sawBack++
	}
	if sawBack == 0 || sawRelease == 0 {
		t.Fatalf("%d add-on rollbacks, %d control-plane steps", sawBack, sawRelease)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	r := &renderer{capiAPI: "v1beta2", capiName: "gpu-cell-07", capiNS: "fleet"}
	for _, set := range []bool{true, false} {
		line := r.capiAddonsHold(set)
		printf, _, _ := strings.Cut(line, " | ")
		out, err := exec.Command("bash", "-c", printf).Output()
		if err != nil {
			t.Fatalf("%s: %v", printf, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(out, &obj); err != nil {
			t.Fatalf("%s:\n%s: %v", printf, out, err)
		}
		spec, hasSpec := obj["spec"].(map[string]any)
		switch {
		case set:
			ann, _ := spec["topology"].(map[string]any)["controlPlane"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)
			if _, ok := ann["controlplane.cluster.x-k8s.io/skip-kube-proxy"]; !ok || len(ann) != 2 {
				t.Errorf("the hold's annotations: %v\n%s", ann, out)
			}
		case hasSpec || obj["metadata"].(map[string]any)["name"] != "gpu-cell-07":
			t.Errorf("the release:\n%s", out)
		}
	}
}
