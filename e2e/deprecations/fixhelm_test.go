//go:build e2e

package deprecationse2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	deprecations "github.com/gpufleet/upgrade-plugins/plugins/deprecations"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary returns the real helm client, built from the module proxy by
// e2e/tools/build.sh helm (cached like the control plane; built here when
// missing unless E2E_NO_BUILD is set).
func helmBinary(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		helmPath = harness.BinariesIn(harness.CacheDir()).Helm
		if _, err := os.Stat(helmPath); err == nil {
			return
		}
		if os.Getenv("E2E_NO_BUILD") != "" {
			helmErr = os.ErrNotExist
			return
		}
		root, err := harness.RepoRoot()
		if err != nil {
			helmErr = err
			return
		}
		out, err := exec.Command(filepath.Join(root, "e2e/tools/build.sh"), "helm").CombinedOutput()
		if err != nil {
			helmErr = err
			t.Logf("%s", out)
		}
	})
	if helmErr != nil {
		t.Fatalf("no helm binary at %s (%v): run e2e/tools/build.sh helm", helmPath, helmErr)
	}
	return helmPath
}

// helmCLI runs the real helm client against the shared control plane, in
// one namespace, with one storage driver ("secret" or "configmap").
type helmCLI struct {
	t      *testing.T
	path   string
	env    []string
	ns     string
	driver string
}

func newHelm(t *testing.T, cp *harness.ControlPlane, ns, storage string) *helmCLI {
	home := t.TempDir()
	return &helmCLI{t: t, path: helmBinary(t), ns: ns, driver: storage, env: []string{
		"KUBECONFIG=" + cp.Kubeconfig, "HELM_DRIVER=" + storage, "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}}
}

func (h *helmCLI) run(args ...string) plugintest.Result {
	h.t.Helper()
	args = append(args, "--namespace", h.ns)
	r := plugintest.RunCmd(h.t, h.path, plugintest.Cmd{Args: args, Env: h.env, Timeout: 2 * time.Minute})
	h.t.Logf("$ HELM_DRIVER=%s helm %s -> exit %d (%s)", h.driver, strings.Join(args, " "), r.ExitCode, r.Duration.Round(time.Millisecond))
	return r
}

func (h *helmCLI) must(args ...string) plugintest.Result {
	h.t.Helper()
	r := h.run(args...)
	if r.ExitCode != 0 {
		h.t.Fatalf("helm %s: exit %d\n%s", strings.Join(args, " "), r.ExitCode, r)
	}
	return r
}

type helmRevision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Description string `json:"description"`
}

// history is `helm history -o json`, as helm itself reads the records.
func (h *helmCLI) history(release string) []helmRevision {
	h.t.Helper()
	r := h.must("history", release, "-o", "json")
	var revs []helmRevision
	if err := json.Unmarshal([]byte(r.Stdout), &revs); err != nil {
		h.t.Fatalf("helm history: %v\n%s", err, r.Stdout)
	}
	return revs
}

func (h *helmCLI) wantHistory(release string, statuses ...string) []helmRevision {
	h.t.Helper()
	revs := h.history(release)
	var got []string
	for _, r := range revs {
		got = append(got, r.Status)
	}
	if strings.Join(got, " ") != strings.Join(statuses, " ") {
		h.t.Fatalf("helm history %s: statuses %v, want %v\n%+v", release, got, statuses, revs)
	}
	return revs
}

// ageRelease rewrites the deployed revision's stored manifest the way a
// release made before policy/v1beta1 was removed (1.25) looks: the
// PodDisruptionBudget recorded in policy/v1beta1. The live object is
// untouched (the apiserver serves it in policy/v1 alone).
func ageRelease(t *testing.T, cp *harness.ControlPlane, ns, storage, release string) {
	t.Helper()
	var d driver.Driver = driver.NewSecrets(cp.Client.CoreV1().Secrets(ns))
	if storage == "configmap" {
		d = driver.NewConfigMaps(cp.Client.CoreV1().ConfigMaps(ns))
	}
	rels, err := d.Query(map[string]string{"name": release, "owner": "helm", "status": "deployed"})
	if err != nil || len(rels) != 1 {
		t.Fatalf("deployed record of %s: %v (%d)", release, err, len(rels))
	}
	rel := rels[0].(*rspb.Release)
	const cur, old = "apiVersion: policy/v1\nkind: PodDisruptionBudget\n", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\n"
	if !strings.Contains(rel.Manifest, cur) {
		t.Fatalf("helm stored no policy/v1 PodDisruptionBudget:\n%s", rel.Manifest)
	}
	rel.Manifest = strings.Replace(rel.Manifest, cur, old, 1)
	if err := d.Update("sh.helm.release.v1."+release+".v"+strconv.Itoa(rel.Version), rel); err != nil {
		t.Fatal(err)
	}
}

type fixHelmReport struct {
	Kind  string `json:"kind"`
	Items []struct {
		Namespace   string `json:"namespace"`
		Release     string `json:"release"`
		Storage     string `json:"storage"`
		Revision    int    `json:"revision"`
		NewRevision int    `json:"newRevision"`
		Action      string `json:"action"`
		Changes     []struct {
			Kind          string `json:"kind"`
			APIVersion    string `json:"apiVersion"`
			NewAPIVersion string `json:"newAPIVersion"`
		} `json:"changes"`
	} `json:"items"`
}

func fixHelm(t *testing.T, cp *harness.ControlPlane, env []string, args ...string) (plugintest.Result, fixHelmReport) {
	t.Helper()
	full := append([]string{"fix-helm", "--kubeconfig", cp.Kubeconfig}, args...)
	r := plugintest.RunCmd(t, plugintest.Binary(t, binary), plugintest.Cmd{Args: full, Env: env, Timeout: 2 * time.Minute})
	t.Logf("$ %s %s %s -> exit %d (%s)\n%s", strings.Join(env, " "), binary, strings.Join(full, " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	var rep fixHelmReport
	if strings.Contains(strings.Join(args, " "), "-o json") && r.ExitCode >= 0 && r.Stdout != "" {
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("not a JSON report: %v\n%s", err, r)
		}
	}
	return r, rep
}

// TestDeprecationsFixHelm installs a chart with the real helm, ages its
// record to a policy/v1beta1 PodDisruptionBudget, shows helm upgrade
// failing, repairs the record and shows upgrade, history and rollback
// working on it.
func TestDeprecationsFixHelm(t *testing.T) {
	cp := harness.Shared(t)
	ns := cp.Namespace(t)
	h := newHelm(t, cp, ns, "secret")
	chart := filepath.Join("testdata", "fixhelm-chart")
	h.must("install", "web", chart)
	ageRelease(t, cp, ns, "secret", "web")

	r := h.run("upgrade", "web", chart, "--set", "replicas=2")
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "policy/v1beta1") {
		t.Fatalf("helm upgrade of the aged release: want a failure naming policy/v1beta1\n%s", r)
	}
	h.wantHistory("web", "deployed")

	// The dry run prints the diff and writes nothing.
	r, _ = fixHelm(t, cp, nil, "-n", ns, "--dry-run", "--color", "never")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "-apiVersion: policy/v1beta1\n+apiVersion: policy/v1\n") ||
		!strings.Contains(r.Stdout, "--- "+ns+"/web revision 1 manifest\n+++ "+ns+"/web revision 2 manifest\n") {
		t.Fatalf("dry run: %s", r)
	}
	h.wantHistory("web", "deployed")

	r, rep := fixHelm(t, cp, nil, "web", "-n", ns, "-o", "json")
	if r.ExitCode != 0 || len(rep.Items) != 1 || rep.Items[0].Action != "fixed" || rep.Items[0].Revision != 1 || rep.Items[0].NewRevision != 2 ||
		rep.Items[0].Storage != "Secret" || len(rep.Items[0].Changes) != 1 || rep.Items[0].Changes[0].NewAPIVersion != "policy/v1" {
		t.Fatalf("fix-helm: %+v\n%s", rep, r)
	}
	revs := h.wantHistory("web", "superseded", "deployed")
	if !strings.Contains(revs[1].Description, "fix-helm") {
		t.Errorf("revision 2's description: %q", revs[1].Description)
	}
	// Nothing left to do.
	if r, rep = fixHelm(t, cp, nil, "-n", ns, "-o", "json"); r.ExitCode != 0 || rep.Items[0].Action != "up-to-date" {
		t.Fatalf("second fix-helm: %+v\n%s", rep, r)
	}

	h.must("upgrade", "web", chart, "--set", "replicas=2")
	h.wantHistory("web", "superseded", "superseded", "deployed")
	h.must("rollback", "web", "2")
	revs = h.wantHistory("web", "superseded", "superseded", "superseded", "deployed")
	if !strings.Contains(revs[3].Description, "Rollback to 2") {
		t.Errorf("revision 4's description: %q", revs[3].Description)
	}
	d, err := cp.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("after the rollback to revision 2 the Deployment should have 1 replica: %v", err)
	}
}

// TestDeprecationsFixHelmResume kills fix-helm between its two writes (the
// new revision stored, the old one still deployed) on a release stored in
// ConfigMaps, and shows a re-run finishing the job without a third
// revision.
func TestDeprecationsFixHelmResume(t *testing.T) {
	cp := harness.Shared(t)
	ns := cp.Namespace(t)
	h := newHelm(t, cp, ns, "configmap")
	chart := filepath.Join("testdata", "fixhelm-chart")
	h.must("install", "api", chart)
	ageRelease(t, cp, ns, "configmap", "api")

	r, _ := fixHelm(t, cp, []string{deprecations.FixHelmKillEnv + "=after-create"}, "-n", ns, "-o", "json")
	if r.ExitCode != -1 || r.Stdout != "" {
		t.Fatalf("fix-helm with the kill hook: want it killed before printing anything, got exit %d\n%s", r.ExitCode, r)
	}
	// Killed between the writes: both revisions deployed. helm history
	// reads them as they are.
	h.wantHistory("api", "deployed", "deployed")

	r, rep := fixHelm(t, cp, nil, "-n", ns, "-o", "json")
	if r.ExitCode != 0 || len(rep.Items) != 1 || rep.Items[0].Action != "finished" || rep.Items[0].Storage != "ConfigMap" || rep.Items[0].NewRevision != 2 {
		t.Fatalf("re-run: %+v\n%s", rep, r)
	}
	h.wantHistory("api", "superseded", "deployed")
	if r, rep = fixHelm(t, cp, nil, "-n", ns, "-o", "json"); r.ExitCode != 0 || rep.Items[0].Action != "up-to-date" {
		t.Fatalf("third run: %+v\n%s", rep, r)
	}
	h.must("upgrade", "api", chart)
	h.wantHistory("api", "superseded", "superseded", "deployed")
}
