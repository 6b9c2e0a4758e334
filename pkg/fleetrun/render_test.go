package fleetrun

import (
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// withSecrets gives the test fleet what a rendered run needs: each
// cluster's kubeconfig in a Secret of the engine's namespace.
func withSecrets(f *fleetfile.Fleet) {
	f.Spec.Credentials = &fleetfile.Credentials{SecretNamespace: "argo"}
}

// planRun plans run r1 of the test fleet, mutate applied to the file.
func planRun(t *testing.T, mutate func(*fleetfile.Fleet)) *Plan {
	t.Helper()
	f := loadFleet(t, mutate)
	p := mustPlan(t, f, infos(f, nil), monday0930)
	p.Run = "r1"
	return p
}

// mustRender renders run r1 of the test fleet.
func mustRender(t *testing.T, mutate func(*fleetfile.Fleet)) (*Plan, *Rendered) {
	t.Helper()
	p := planRun(t, mutate)
	r, err := Render(p, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

func TestRender(t *testing.T) {
	p, r := mustRender(t, withSecrets)
	golden.Check(t, "render.yaml", string(r.YAML))
	kinds := map[string]int{}
	for _, o := range r.Objects {
		kinds[o.Kind]++
	}
	if kinds["WorkflowTemplate"] != len(p.Clusters) || kinds["Workflow"] != 1 || kinds["ConfigMap"] != 1 {
		t.Errorf("objects %v", kinds)
	}
	y := string(r.YAML)
	for _, want := range []string{
		"name: gpu-prod-r1",
		"name: approve-prod", // two approvals before prod
		"suspend:\n      duration: 2h",
		`expression: lastRetry.status == "Error" || asInt(lastRetry.exitCode) == 4`,
		"configMapKeyRef:\n          key: clusters\n          name: gpu-prod-inflight",
		"parallelism: 2",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("render lacks %q", want)
		}
	}
	// Every step container names its own pod through the downward API,
	// which eviction.SelfFromEnv reads.
	const identity = `env:
      - name: POD_NAME
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      - name: POD_NAMESPACE
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace`
	if n, all := strings.Count(y, identity), strings.Count(y, "container:"); n != all || n < len(p.Clusters) {
		t.Errorf("%d of %d containers set POD_NAME and POD_NAMESPACE from the downward API", n, all)
	}
}

func TestRenderNeedsAPinnedImage(t *testing.T) {
	p := planRun(t, func(f *fleetfile.Fleet) { withSecrets(f); f.Spec.Engine.Argo.Image = "ghcr.io/gpufleet/suite:v0.1.0" })
	_, err := Render(p, RenderOptions{})
	if cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "pin it by digest") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	// --image overrides the file's image and is held to the same rule.
	for _, bad := range []string{"ghcr.io/gpufleet/suite:v0.1.0", "ghcr.io/gpufleet/suite", "ghcr.io/gpufleet/suite@sha256:abc"} {
		_, err = Render(p, RenderOptions{Image: bad})
		if cli.ExitCode(err) != cli.ExitUsage || !strings.HasPrefix(err.Error(), "--image ") || !strings.Contains(err.Error(), "make image") {
			t.Errorf("--image %s: err = %v", bad, err)
		}
	}
	const pinned = "ghcr.io/gpufleet/suite:v0.1.0@sha256:5f0e3a1c2b4d6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
	r, err := Render(p, RenderOptions{Image: pinned})
	if err != nil {
		t.Fatal(err)
	}
	// Every container (each cluster's step template, the run's gates) runs it.
	if n, all := strings.Count(string(r.YAML), "image: "+pinned), strings.Count(string(r.YAML), "image: "); n < len(p.Clusters) || n != all {
		t.Errorf("%d of %d images are %s, want all and at least %d", n, all, pinned, len(p.Clusters))
	}
}
