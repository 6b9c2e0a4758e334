//go:build e2e

package secretse2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// canary is unique enough never to appear by chance. Its base64 form is
// what a Secret's data, or a log of a Secret's JSON, would show.
const canary = "gpufleet-canary-7f3a9c1e-do-not-print"

// helmRecord builds a Helm 3 release record as Helm stores it:
// base64(gzip(JSON)), with the canary in the user values, the chart's
// default values, a chart file and the rendered manifest, next to a
// CronJob at batch/v1beta1 (removed in 1.25) for the scan to report.
func helmRecord(t *testing.T, name, ns string) []byte {
	t.Helper()
	manifest := "---\n# Source: vault-chart/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "-creds\nstringData:\n  password: " + canary + "\n" +
		"---\n# Source: vault-chart/templates/cronjob.yaml\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: " + name + "-rotate\nspec:\n  schedule: \"0 1 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - name: rotate\n            image: busybox\n            env:\n            - name: TOKEN\n              value: " + canary + "\n"
	rec := map[string]any{
		"name": name, "namespace": ns, "version": 1,
		"info": map[string]any{"status": "deployed", "notes": "token " + canary},
		"chart": map[string]any{
			"metadata": map[string]any{"name": "vault-chart", "version": "0.1.0"},
			"values":   map[string]any{"password": canary},
			"files":    []any{map[string]any{"name": "secret.txt", "data": base64.StdEncoding.EncodeToString([]byte(canary))}},
		},
		"config":   map[string]any{"password": canary},
		"manifest": manifest,
	}
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

// forms are the spellings of the canary that must never be printed.
func forms() []string {
	return []string{
		canary,
		base64.StdEncoding.EncodeToString([]byte(canary)),
		base64.StdEncoding.EncodeToString([]byte(canary))[:24], // a prefix survives any alignment within a longer value
		base64.RawURLEncoding.EncodeToString([]byte(canary)),
	}
}

// TestCanaryNeverPrinted plants the canary where the plugins read and runs
// each plugin's read flow in every format at -v=0, 6 and 9.
func TestCanaryNeverPrinted(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	pool := "sec-" + ns[len(ns)-5:]

	// Nodes carrying the canary in an annotation, and a pod on them with
	// the canary in its environment and annotations, guarded by a PDB.
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: pool, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	for _, n := range nodes {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/ipmi-password":%q}}}`, canary)
		if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := harness.Deployment(ns, "trainer", 2, 4)
	d.Spec.Template.Annotations = map[string]string{"example.com/token": canary}
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WANDB_API_KEY", Value: canary}}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "trainer", "trainer", 2), 2); err != nil {
		t.Fatal(err)
	}

	// (1) a Helm release Secret, (2) a Helm release ConfigMap, (3) an
	// ordinary Secret.
	helmLabels := func(name string) map[string]string {
		return map[string]string{"name": name, "owner": "helm", "status": "deployed", "version": "1"}
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.vault.v1", Namespace: ns, Labels: helmLabels("vault")},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": helmRecord(t, "vault", ns)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.vaultcm.v1", Namespace: ns, Labels: helmLabels("vaultcm")},
		Data:       map[string]string{"release": string(helmRecord(t, "vaultcm", ns))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: ns},
		Data:       map[string][]byte{"password": []byte(canary)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A CRD with an old stored version and an object holding the canary,
	// for crd-migrate status.
	group := ns + ".secrets.example.com"
	crd := harness.MultiVersionCRD(group, "Vault", "vaults", []string{"v1", "v2"}, "v1")
	if err := cp.ApplyCRDs(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "vaults"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Vault",
		"metadata": map[string]any{"name": "v", "namespace": ns, "annotations": map[string]any{"example.com/token": canary}},
		"spec":     map[string]any{"size": canary},
	}}
	if err := harness.Eventually(ctx, "create a Vault", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	sel := harness.PoolLabel + "=" + pool
	kc := []string{"--kubeconfig", cp.Kubeconfig}
	flows := []struct {
		bin  string
		args []string
	}{
		{"kubectl-deprecations", []string{"-n", ns}},
		{"kubectl-skew", nil},
		{"kubectl-pdb_blockers", []string{"-l", sel}},
		{"kubectl-gang_drain", []string{"plan", "-l", sel}},
		{"kubectl-crd_migrate", []string{"status"}},
		{"kubectl-gpu_validate", []string{"nodes", "-l", sel, "--expected-gpus", "8"}},
	}
	var (
		mu       sync.Mutex
		readHelm bool
		wg       sync.WaitGroup
		slots    = make(chan struct{}, 3) // 72 runs; a few at a time
	)
	for _, f := range flows {
		for _, format := range []string{"table", "wide", "json", "yaml"} {
			for _, v := range []string{"0", "6", "9"} {
				wg.Add(1)
				slots <- struct{}{}
				go func() {
					defer func() { <-slots; wg.Done() }()
					args := append(append(append([]string{}, f.args...), kc...), "-o", format, "-v="+v)
					if f.bin == "kubectl-deprecations" && format == "json" {
						args = append(args, "--fail-on", "blocking")
					}
					res := plugintest.RunCmd(t, plugintest.Binary(t, f.bin), plugintest.Cmd{Args: args, Timeout: 90 * time.Second})
					name := f.bin + " " + strings.Join(append(append([]string{}, f.args...), "-o", format, "-v="+v), " ")
					if res.ExitCode != 0 && res.ExitCode != 1 {
						t.Errorf("%s: the flow did not run (exit %d)\n%s", name, res.ExitCode, tail(res.Stderr))
					}
					if v == "9" && !strings.Contains(res.Stderr, "GET https://") && !strings.Contains(res.Stderr, "\"GET\"") && !strings.Contains(res.Stderr, "verb=\"GET\"") {
						t.Errorf("%s: -v=9 logged no requests; the check would prove nothing\n%s", name, tail(res.Stderr))
					}
					for _, s := range forms() {
						// client-go logs a protobuf body as a hex dump, 16 bytes a
						// line: the text column is read back as one string.
						for stream, out := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr, "stderr hex dump text": hexText(res.Stderr)} {
							if i := strings.Index(out, s); i >= 0 {
								t.Errorf("%s: %s prints the canary (%q): ...%s...", name, stream, s, excerpt(out, i))
							}
						}
					}
					if f.bin == "kubectl-deprecations" && format == "json" {
						ok := reportsHelmCronJob(t, res.Stdout, ns)
						mu.Lock()
						readHelm = readHelm || ok
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	if !readHelm {
		t.Errorf("the deprecations scan never reported the CronJob in the Helm record: it did not read it, so the absence of the canary proves nothing")
	}
}

// reportsHelmCronJob says whether a deprecations JSON report holds the
// batch/v1beta1 CronJob of both planted Helm records.
func reportsHelmCronJob(t *testing.T, stdout, ns string) bool {
	t.Helper()
	var rep struct {
		Items []struct {
			Source, Kind, APIVersion, Who, Name string
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Errorf("deprecations -o json: %v\n%s", err, stdout)
		return false
	}
	seen := map[string]bool{}
	for _, it := range rep.Items {
		if it.Source == "helm" && it.Kind == "CronJob" && it.APIVersion == "batch/v1beta1" {
			seen[it.Who] = true
		}
	}
	return seen["helm release "+ns+"/vault"] && seen["helm release "+ns+"/vaultcm"]
}

var hexLine = regexp.MustCompile(`(?m)^\s*[0-9a-f]{8}  (?:[0-9a-f]{2} {1,2}){1,16}\s*\|(.{1,16})\|$`)

// hexText joins the text columns of every hex dump line in s.
func hexText(s string) string {
	var b strings.Builder
	for _, m := range hexLine.FindAllStringSubmatch(s, -1) {
		b.WriteString(m[1])
	}
	return b.String()
}

func excerpt(s string, i int) string {
	lo, hi := max(0, i-80), min(len(s), i+80)
	return s[lo:hi]
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
