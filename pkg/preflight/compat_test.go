package preflight

import (
	"context"
	"strings"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// TestCompatRowsSourced: every row names the project's own page, the date
// it was read and what was read; rows without a range carry the command
// to check by hand.
func TestCompatRowsSourced(t *testing.T) {
	c := DefaultCompat()
	if len(c.Addons) < 20 {
		t.Fatalf("embedded table: %d addons", len(c.Addons))
	}
	for _, a := range c.Addons {
		if !strings.HasPrefix(a.Source, "https://") || a.Checked == "" || a.Read == "" {
			t.Errorf("%s: source %q, read %q, checked %q", a.Name, a.Source, a.Read, a.Checked)
		}
		if strings.Contains(a.Source+a.Checked, "endoflife.date") {
			t.Errorf("%s: read from an aggregator", a.Name)
		}
	}
	for _, name := range []string{"nvidia-gpu-operator", "nvidia-device-plugin", "nvidia-dra-driver", "kueue", "jobset", "leaderworkerset",
		"cilium", "calico", "aws-vpc-cni", "aws-ebs-csi-driver", "gcp-pd-csi-driver", "azuredisk-csi-driver", "kyverno", "gatekeeper", "istio"} {
		if _, ok := c.Lookup(name); !ok {
			t.Errorf("no row for %s", name)
		}
	}
}

func judge(t *testing.T, name, version, target string) Verdict {
	t.Helper()
	return DefaultCompat().Judge(name, version, mustVersion(target))
}

// verdictCase is an addon at a version against a target, and the verdict
// with a part of its message the table must give.
type verdictCase struct {
	name, version, target string
	want                  Status
	msg                   string
}

func (tc verdictCase) check(t *testing.T) Verdict {
	t.Helper()
	v := judge(t, tc.name, tc.version, tc.target)
	if v.Status != tc.want || !strings.Contains(v.Message, tc.msg) {
		t.Errorf("%s %s on %s = %s (%s), want %s with %q", tc.name, tc.version, tc.target, v.Status, v.Message, tc.want, tc.msg)
	}
	return v
}

// TestCompatKarpenterFrom: Karpenter 1.3-1.4 support Kubernetes from 1.25
// and 1.5 on from 1.26 (hack/docs/compatibilitymatrix_gen/compatibility.yaml),
// not from 1.29; 1.0.5 added 1.31 within the 1.0 line.
func TestCompatKarpenterFrom(t *testing.T) {
	for _, tc := range []struct {
		version, target string
		want            Status
	}{
		{"1.4.0", "v1.25", StatusPass},
		{"1.3.2", "v1.28", StatusPass},
		{"1.5.0", "v1.26", StatusPass},
		{"1.11.1", "v1.27", StatusPass},
		{"1.5.0", "v1.25", StatusFail},
		{"1.0.5", "v1.31", StatusPass},
		{"1.0.7", "v1.31", StatusPass},
		{"1.0.3", "v1.31", StatusFail},
	} {
		if v := judge(t, "karpenter", tc.version, tc.target); v.Status != tc.want {
			t.Errorf("karpenter %s on %s = %s (%s), want %s", tc.version, tc.target, v.Status, v.Message, tc.want)
		}
	}
	if v := judge(t, "karpenter", "1.0.3", "v1.31"); !strings.Contains(v.Message, "upgrade it to 1.1") || !strings.Contains(v.Message, "1.0.5") {
		t.Errorf("1.0.3 on 1.31: %s", v.Message)
	}
}

// TestCompatReleasesBeforeTheTableDate: cert-manager 1.21 and Karpenter
// 1.12-1.14 were released before the table's date; without them an
// addon one release behind got "no release supports it yet".
func TestCompatReleasesBeforeTheTableDate(t *testing.T) {
	for _, tc := range []verdictCase{
		{"cert-manager", "v1.21.0", "v1.36", StatusPass, "1.33..1.36"},
		{"cert-manager", "v1.20.2", "v1.36", StatusFail, "upgrade it to 1.21 first"},
		{"karpenter", "1.14.0", "v1.36", StatusPass, "1.26..1.36"},
		{"karpenter", "1.12.3", "v1.35", StatusPass, ""},
		{"karpenter", "1.11.1", "v1.36", StatusFail, "upgrade it to 1.14 or 1.13 first"},
	} {
		if v := tc.check(t); strings.Contains(v.Message, "no release") {
			t.Errorf("%s %s on %s: %s", tc.name, tc.version, tc.target, v.Message)
		}
	}
}

// TestCompatGPUClusterRows judges what GPU clusters run against their
// projects' tables.
func TestCompatGPUClusterRows(t *testing.T) {
	for _, tc := range []verdictCase{
		{"nvidia-gpu-operator", "v26.7.0", "v1.36", StatusPass, "1.33..1.36"},
		{"nvidia-gpu-operator", "v26.7.0", "v1.32", StatusFail, "older than this release supports; 26.3, 25.10.1, 25.10, 25.3 support it"},
		{"nvidia-gpu-operator", "v25.10.1", "v1.36", StatusFail, "upgrade it to 26.7 or 26.3 first"},
		{"nvidia-gpu-operator", "v24.9.2", "v1.30", StatusPass, "1.24..1.31"},
		{"nvidia-gpu-operator", "v25.10.1", "v1.37", StatusFail, "no release in the table (data from 2026-08-22) supports 1.37"},
		{"nvidia-gpu-operator", "v27.3.0", "v1.37", StatusUnknown, "no row for nvidia-gpu-operator 27.3"},
		{"nvidia-device-plugin", "v0.17.1-ubi9", "v1.37", StatusPass, "no upper bound stated"},
		{"nvidia-device-plugin", "v0.21.0", "v1.37", StatusUnknown, ""},
		{"nvidia-dra-driver", "v25.12.0", "v1.31", StatusFail, "1.32 or newer"},
		{"kueue", "v0.14.1", "v1.37", StatusPass, "1.29 or newer"},
		{"kueue", "v0.19.2", "v1.33", StatusFail, "1.34 or newer"},
		{"jobset", "v0.12.0", "v1.37", StatusUnknown, "publishes no supported Kubernetes range"},
		{"leaderworkerset", "v0.10.0", "v1.37", StatusPass, ""},
		{"cilium", "v1.18.14", "v1.33", StatusPass, ""},
		{"cilium", "v1.18.14", "v1.35", StatusWarn, "not tested"},
		{"cilium", "v1.19.3", "v1.35", StatusUnknown, ""},
		{"calico", "v3.29.3", "v1.33", StatusWarn, "upgrade it to 3.31 or 3.30 first (upstream says other minors may work but are not tested)"},
		{"calico", "v3.32.0", "v1.36", StatusPass, ""},
		{"aws-vpc-cni", "v1.19.2-eksbuild.1", "v1.33", StatusPass, "v1.17.1"},
		{"aws-vpc-cni", "v1.16.0-eksbuild.1", "v1.31", StatusWarn, "older than v1.16.4"},
		{"aws-vpc-cni", "v1.19.2-eksbuild.1", "v1.35", StatusUnknown, "no aws-vpc-cni row for Kubernetes 1.35"},
		{"aws-ebs-csi-driver", "v1.64.0", "v1.37", StatusUnknown, "all Kubernetes versions supported by"},
		{"gcp-pd-csi-driver", "v1.20.0", "v1.37", StatusUnknown, ""},
		{"azuredisk-csi-driver", "v1.34.5", "v1.37", StatusPass, ""},
		{"kyverno", "v1.18.0", "v1.32", StatusWarn, "the target is older than this release supports; 1.17, 1.16, 1.15 support it"},
		{"kyverno", "v1.16.2", "v1.36", StatusWarn, "no release in the table"},
		{"gatekeeper", "v3.23.0", "v1.37", StatusUnknown, "assumed to be compatible"},
		{"istio", "1.28.2", "v1.35", StatusFail, "upgrade it to 1.31 or 1.30 or 1.29 first"},
		{"istio", "1.31.0-distroless", "v1.36", StatusPass, ""},
		{"metrics-server", "v0.7.2", "v1.37", StatusPass, ""},
		{"metrics-server", "v0.3.6", "v1.24", StatusFail, "1.8..1.21"},
	} {
		if v := tc.check(t); v.Status == StatusUnknown && v.Check == "" {
			t.Errorf("%s %s on %s: UNKNOWN without the command to check by hand", tc.name, tc.version, tc.target)
		}
	}
	// The command to check by hand names the release found and the target.
	if v := judge(t, "jobset", "v0.12.0", "v1.37"); !strings.Contains(v.Check, "kubernetes-sigs/jobset/v0.12.0/") {
		t.Errorf("jobset check: %s", v.Check)
	}
	if v := judge(t, "aws-vpc-cni", "v1.19.2-eksbuild.1", "v1.35"); v.Check != "aws eks describe-addon-versions --addon-name vpc-cni --kubernetes-version 1.35 --query 'addons[].addonVersions[].addonVersion'" {
		t.Errorf("vpc-cni check: %s", v.Check)
	}
	// A version the image does not carry: UNKNOWN, saying where to read it.
	if v := judge(t, "kueue", "", "v1.37"); v.Status != StatusUnknown || !strings.Contains(v.Message, "digest") {
		t.Errorf("no version: %s %s", v.Status, v.Message)
	}
}

func daemonSet(ns, name, image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
}

// TestAddonsGateGPUCluster: the GPU Operator and its validator (one
// image) are one addon, the device plugin, Kueue and a Kyverno whose image
// was mirrored under another name (found by its Helm release, written by
// Helm's own driver) are judged; UNKNOWN lines carry the command to check
// by hand; data past 120 days makes the gate warn, with its date.
func TestAddonsGateGPUCluster(t *testing.T) {
	kc := fake.NewClientset(
		deploy("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.1"),
		daemonSet("gpu-operator", "nvidia-operator-validator", "nvcr.io/nvidia/gpu-operator:v25.10.1"),
		daemonSet("gpu-operator", "nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"),
		deploy("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.14.1"),
		deploy("jobset-system", "jobset-controller-manager", "registry.k8s.io/jobset/jobset:v0.12.0"),
		deploy("kyverno", "policy-engine", "harbor.example/security/admission:v1.15.1"),
	)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	md := chart.Metadata{APIVersion: "v2", Name: "kyverno", Version: "3.5.1", AppVersion: "v1.15.1"}
	if err := driver.NewSecrets(kc.CoreV1().Secrets("kyverno")).Create("sh.helm.release.v1.kyverno.v1", &rspb.Release{Name: "kyverno", Namespace: "kyverno", Version: 1,
		Info: &rspb.Info{Status: common.StatusDeployed, FirstDeployed: at, LastDeployed: at}, Chart: &chart.Chart{Metadata: &md}}); err != nil {
		t.Fatal(err)
	}
	c := DefaultCompat()
	dataDate, _ := time.Parse(dateLayout, c.DataDate)
	for _, tc := range []struct {
		now   time.Time
		stale bool
	}{{dataDate.Add(24 * time.Hour), false}, {dataDate.Add(121 * 24 * time.Hour), true}} {
		r := &Runner{Kube: kc, Target: mustVersion("v1.36"), Compat: c, Now: func() time.Time { return tc.now }}
		g, addons := r.addonsGate(context.Background(), noInventory)
		ev := strings.Join(g.Evidence, "\n")
		var names []string
		for _, a := range addons {
			names = append(names, a.Name+"@"+a.Version+"/"+a.Source)
		}
		if got := strings.Join(names, " "); got != "jobset@v0.12.0/image kueue@v0.14.1/image kyverno@v1.15.1/helm nvidia-device-plugin@v0.18.1/image nvidia-gpu-operator@v25.10.1/image" {
			t.Errorf("addons %s", got)
		}
		for _, want := range []string{
			"FAIL: nvidia-gpu-operator gpu-operator/deployment/gpu-operator (v25.10.1): nvidia-gpu-operator 25.10.1+ supports Kubernetes 1.30..1.35, not 1.36: upgrade it to 26.7 or 26.3 first",
			"PASS: nvidia-device-plugin gpu-operator/daemonset/nvidia-device-plugin-daemonset (v0.18.1)",
			"PASS: kueue kueue-system/deployment/kueue-controller-manager (v0.14.1)",
			"UNKNOWN: jobset jobset-system/deployment/jobset-controller-manager (v0.12.0): jobset publishes no supported Kubernetes range",
			"; check by hand: curl -fsSL https://raw.githubusercontent.com/kubernetes-sigs/jobset/v0.12.0/charts/jobset/README.md",
			"WARN: kyverno kyverno/helmrelease/kyverno (v1.15.1): kyverno 1.15 is tested with Kubernetes 1.30..1.33, not 1.36",
		} {
			if !strings.Contains(ev, want) {
				t.Errorf("evidence lacks %q:\n%s", want, ev)
			}
		}
		if len(addons) == 5 && (addons[4].Workload != "deployment/gpu-operator" || len(addons[4].Also) != 1 || addons[2].HelmRelease != "kyverno/kyverno (chart kyverno 3.5.1)") {
			t.Errorf("operator %+v, kyverno %+v", addons[4], addons[2])
		}
		if g.Status != StatusFail || !strings.Contains(g.Command, "get deployment gpu-operator") {
			t.Errorf("gate %s, command %s", g.Status, g.Command)
		}
		if stale := strings.Contains(ev, "compatibility data is from "+c.DataDate+", 121 days old"); stale != tc.stale {
			t.Errorf("now %s: stale line %v, want %v\n%s", tc.now.Format(dateLayout), stale, tc.stale, ev)
		}
	}
	// Stale data alone makes a passing gate warn.
	kc = fake.NewClientset(deploy("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.14.1"))
	r := &Runner{Kube: kc, Target: mustVersion("v1.36"), Compat: c, Now: func() time.Time { return dataDate.Add(200 * 24 * time.Hour) }}
	if g, _ := r.addonsGate(context.Background(), noInventory); g.Status != StatusWarn || !strings.Contains(g.Message, "data 200 days old") {
		t.Errorf("stale table: %s %s", g.Status, g.Message)
	}
}

// The data's date is the newest revision of its sources, not the day they
// were read, so that staleness counts from what the rows can know: no row
// was revised after it, and the rows with a dated revision say it.
func TestCompatDataDateIsTheNewestRevision(t *testing.T) {
	c := DefaultCompat()
	newest := ""
	for _, a := range c.Addons {
		if a.Revised > newest {
			newest = a.Revised
		}
		if a.Revised != "" && !strings.Contains(a.Checked, a.Revised) {
			t.Errorf("%s: revised %s is not the date of a revision its checked names: %s", a.Name, a.Revised, a.Checked)
		}
	}
	if newest == "" || c.DataDate != newest {
		t.Errorf("dataDate %s, newest source revision %q", c.DataDate, newest)
	}
	if _, err := ParseCompat([]byte("dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: matchMinor, source: https://x, revised: \"2026-02-01\"}\n")); err == nil {
		t.Error("a row revised after dataDate was accepted")
	}
}

// The GPU Operator's table has a column per platform, and 24.9's differ:
// 1.24-1.31 in the Kubernetes and RKE2 columns, 1.25-1.28 in the EKS, GKE
// and AKS columns (platform-support.rst at d1a50b7). Each cluster is
// judged by its own column, which the verdict names; a platform whose
// column a release lacks takes the Kubernetes column's.
func TestCompatGPUOperatorColumns(t *testing.T) {
	c := DefaultCompat()
	for _, tc := range []struct {
		prov            skew.Provider
		version, target string
		status          Status
		column          string
	}{
		{skew.ProviderKubeadm, "v24.9.2", "v1.30", StatusPass, "the Kubernetes column"},
		{skew.ProviderCAPI, "v24.9.2", "v1.31", StatusPass, "the Kubernetes column"},
		{skew.ProviderRKE2, "v24.9.2", "v1.30", StatusPass, "the RKE2 column"},
		{skew.ProviderK3s, "v24.9.2", "v1.30", StatusPass, "the Kubernetes column"},
		{skew.ProviderEKS, "v24.9.2", "v1.30", StatusFail, "the Amazon EKS column"},
		{skew.ProviderGKE, "v24.9.2", "v1.28", StatusPass, "the Google GKE column"},
		{skew.ProviderAKS, "v24.9.2", "v1.29", StatusFail, "the AKS column"},
		{skew.ProviderAKS, "v26.7.0", "v1.36", StatusPass, "the Kubernetes column"},
		{skew.ProviderK3s, "v26.7.0", "v1.36", StatusPass, "the K3s column"},
		{skew.ProviderKubeadm, "v25.10.0", "v1.35", StatusFail, "1.30..1.34"},
		{skew.ProviderKubeadm, "v25.10.1", "v1.35", StatusPass, "25.10.1+"},
	} {
		v := c.JudgeOn("nvidia-gpu-operator", tc.version, mustVersion(tc.target), ColumnOf(tc.prov))
		if v.Status != tc.status || !strings.Contains(v.Message, tc.column) {
			t.Errorf("%s %s on %s: %s %s, want %s with %q", tc.prov, tc.version, tc.target, v.Status, v.Message, tc.status, tc.column)
		}
	}
	if _, err := ParseCompat([]byte("dataDate: \"2026-01-01\"\naddons:\n- {name: x, rule: releases, source: https://x, releases: [{version: \"1.2\", from: \"1.30\", to: \"1.31\", columns: [openshift]}]}\n")); err == nil {
		t.Error("an unknown column was accepted")
	}
}

func noInventory() *skew.Inventory { return nil }

// The addons gate judges the GPU Operator by the column of the cluster's
// platform, detected from the inventory: 24.9 on 1.30 passes on a kubeadm
// cluster (Kubernetes column, 1.24-1.31) and fails on EKS (1.25-1.28).
func TestAddonsGateColumnOfThePlatform(t *testing.T) {
	kc := fake.NewClientset(deploy("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v24.9.2"))
	for _, tc := range []struct {
		server string
		status Status
		column string
	}{
		{"v1.30.4", StatusPass, "the Kubernetes column"},
		{"v1.30.4-eks-1a2b3c4", StatusFail, "the Amazon EKS column"},
	} {
		inv := &skew.Inventory{Server: skew.ServerVersion{GitVersion: tc.server}}
		r := &Runner{Kube: kc, Target: mustVersion("v1.30"), Compat: DefaultCompat(), Now: func() time.Time { return time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC) }}
		g, _ := r.addonsGate(context.Background(), func() *skew.Inventory { return inv })
		if ev := strings.Join(g.Evidence, "\n"); g.Status != tc.status || !strings.Contains(ev, tc.column) {
			t.Errorf("%s: %s\n%s", tc.server, g.Status, ev)
		}
	}
}
