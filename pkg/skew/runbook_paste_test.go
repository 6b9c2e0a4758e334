package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The VPC CNI manifest is fetched at a GitHub release tag of
// aws/amazon-vpc-cni-k8s (v1.20.0), not at the EKS versions table's
// build version (v1.20.0-eksbuild.1), which GitHub has no tag for
// (vpc-add-on-self-managed-update.html).
func TestRunbookVPCCNIManifestAtGitHubTag(t *testing.T) {
	self := stepOf(t, variantPlan(t, "eks-selfmanaged"), PhaseAddons, "")
	var apply string
	for _, c := range self.Commands {
		if strings.Contains(c, "amazon-vpc-cni-k8s/") {
			apply = c
		}
	}
	if apply == "" {
		t.Fatalf("no VPC CNI manifest in the self-managed add-ons:\n%s", cmds(self))
	}
	url := apply[strings.Index(apply, "https://"):]
	url = url[:strings.Index(url, "'")]
	if want := "https://raw.githubusercontent.com/aws/amazon-vpc-cni-k8s/" + phVPCCNIRelease + "/config/master/aws-k8s-cni.yaml"; url != want {
		t.Errorf("manifest URL %s, want %s", url, want)
	}
	// What the placeholder stands for: the release tag, with the table's
	// example without its build suffix.
	wantIn(t, "VPC CNI apply", cmds(self), phVPCCNIRelease+": the GitHub release tag", "without its -eksbuild.N (v1.20.0 for v1.20.0-eksbuild.1)")
	// update-addon keeps the table's version.
	wantIn(t, "managed add-ons", cmds(stepOf(t, variantPlan(t, "eks-managed"), PhaseAddons, "")), "--addon-version '<vpc-cni-version>'")
}

// flatcarPlan is the kubeadm-apt cluster with every node on Flatcar: an
// OS image that names neither package manager.
func flatcarPlan(t *testing.T) Plan {
	t.Helper()
	inv := variantInventory(t, "kubeadm-apt")
	for i := range inv.Pools {
		inv.Pools[i].OSImages = []string{"Flatcar Container Linux by Kinvolk 4081.2.0 (Oklo)"}
	}
	p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A kubeadm node whose OS family the plan cannot tell gets a third
// alternative besides the Debian and RHEL ones: on another family neither
// upgrades the kubelet. It stops with the manual path there, and with the
// block to paste instead on Debian or RHEL, running nothing either way.
func TestRunbookKubeadmOtherOSStops(t *testing.T) {
	p := flatcarPlan(t)
	var stops []string
	for _, s := range p.Steps {
		var whens []string
		for _, b := range s.Blocks {
			if b.Choice == osChoice {
				whens = append(whens, b.When)
				if b.When == osOtherWhen {
					stops = append(stops, strings.Join(b.Commands, "\n"))
				}
			}
		}
		// Every group of OS alternatives ends on the other-family one.
		for i, w := range whens {
			if w == osWhen[pkgDnf] && (i+1 >= len(whens) || whens[i+1] != osOtherWhen) {
				t.Errorf("step %d (%s %s): the RHEL alternative is not followed by one for other OS families: %q", s.Number, s.Phase, s.Pool, whens)
			}
		}
	}
	if len(stops) == 0 {
		t.Fatal("no alternative for another OS family on Flatcar nodes")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	for _, tc := range []struct{ os, want string }{
		{"NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\n", "https://dl.k8s.io/release/vVERSION/bin/linux/ARCH/"},
		{"NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n", "paste that family's block above"},
		{"NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n", "paste that family's block above"},
	} {
		f := filepath.Join(dir, "os-release")
		if err := os.WriteFile(f, []byte(tc.os), 0o644); err != nil {
			t.Fatal(err)
		}
		script := strings.ReplaceAll(stops[0], "/etc/os-release", f)
		out, err := exec.Command("bash", "-c", script+" && echo RAN-ON").CombinedOutput()
		if err == nil || strings.Contains(string(out), "RAN-ON") {
			t.Errorf("on %q the block does not stop: %v\n%s", tc.os, err, out)
		}
		wantIn(t, "message on "+tc.os, string(out), tc.want)
	}
	// The other families still get their package commands.
	all := strings.Join(allCommandsOf(p), "\n")
	wantIn(t, "Flatcar plan", all, "apt-get install", "dnf install")
}

// kubeadm's upgrade skips kube-proxy when its ConfigMap is missing (a
// kube-proxy replacement): the add-ons check and its rollback name only
// what the inventory saw, and ask the ConfigMap where it saw nothing.
func TestRunbookKubeadmAddonsWithoutKubeProxy(t *testing.T) {
	plan := func(edit func(*Inventory)) Step {
		t.Helper()
		inv := variantInventory(t, "kubeadm-apt")
		edit(&inv)
		p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return stepOf(t, p, PhaseAddons, "")
	}
	back := func(s Step) string {
		if s.Rollback == nil {
			t.Fatalf("addons step %d has no rollback", s.Number)
		}
		var out []string
		for _, b := range s.Rollback.Blocks {
			out = append(out, b.Commands...)
		}
		return strings.Join(out, "\n")
	}

	// Both seen: one check, both undone.
	both := plan(func(*Inventory) {})
	wantIn(t, "both seen", cmds(both), "kubectl -n kube-system get daemonset/kube-proxy deployment/coredns -o wide")
	wantIn(t, "both seen, rollback", back(both), "rollout undo daemonset/kube-proxy", "rollout undo deployment/coredns")

	// The inventory listed kube-system and found no kube-proxy.
	none := plan(func(inv *Inventory) {
		for i, c := range inv.Components {
			if c.Name == KindKubeProxy {
				inv.Components[i] = Component{Name: KindKubeProxy, State: StateNotVisible, Source: "no kube-proxy DaemonSet in kube-system"}
			}
		}
	})
	wantIn(t, "no kube-proxy", cmds(none), "kubectl -n kube-system get deployment/coredns -o wide")
	wantNotIn(t, "no kube-proxy", cmds(none), "get daemonset/kube-proxy", "configmap kube-proxy")
	wantIn(t, "no kube-proxy, rollback", back(none), "rollout undo deployment/coredns")
	wantNotIn(t, "no kube-proxy, rollback", back(none), "rollout undo daemonset/kube-proxy", "configmap kube-proxy")
	wantIn(t, "no kube-proxy", cmds(none), "the inventory saw no kube-proxy in kube-system")

	// The inventory could not read the DaemonSets: the ConfigMap decides.
	unread := plan(func(inv *Inventory) {
		for i, c := range inv.Components {
			if c.Name == KindKubeProxy {
				inv.Components[i] = Component{Name: KindKubeProxy, State: StateForbidden, Source: "daemonsets kube-system"}
			}
		}
	})
	guard := `CM=$(kubectl -n kube-system get configmap kube-proxy -o name --ignore-not-found) && if [ -n "$CM" ]; then `
	wantIn(t, "kube-proxy unread", cmds(unread), guard+"kubectl -n kube-system get daemonset/kube-proxy -o wide; else")
	wantIn(t, "kube-proxy unread, rollback", back(unread), guard+"kubectl -n kube-system rollout undo daemonset/kube-proxy; else")

	// A CoreDNS seen under another name (a Helm release's) is checked
	// and undone by that name.
	helm := plan(func(inv *Inventory) {
		for i, c := range inv.Components {
			if c.Name == KindCoreDNS {
				inv.Components[i].Instance = "deployment/coredns-coredns"
			}
		}
	})
	wantIn(t, "CoreDNS by Helm", cmds(helm), "kubectl -n kube-system get daemonset/kube-proxy deployment/coredns-coredns -o wide")
	wantIn(t, "CoreDNS by Helm, rollback", back(helm), "rollout undo deployment/coredns-coredns")
}

// A KubeadmControlPlane skips kube-proxy where the workload cluster has no
// kube-proxy DaemonSet: Cluster API's add-ons check and its rollback
// follow what the inventory saw, and ask the DaemonSet where it saw
// nothing, as the kubeadm path does.
func TestRunbookCAPIAddonsWithoutKubeProxy(t *testing.T) {
	plan := func(state string) Step {
		t.Helper()
		inv := variantInventory(t, "capi")
		for i, c := range inv.Components {
			switch {
			case c.Name == KindKubeProxy && state == StateNotVisible:
				inv.Components[i] = Component{Name: KindKubeProxy, State: StateNotVisible, Source: "no kube-proxy DaemonSet in kube-system"}
			case c.Name == KindKubeProxy && state == StateForbidden:
				inv.Components[i] = Component{Name: KindKubeProxy, State: StateForbidden, Source: "daemonsets kube-system"}
			}
		}
		p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return stepOf(t, p, PhaseAddons, "")
	}
	back := func(s Step) string {
		if s.Rollback == nil {
			t.Fatalf("addons step %d has no rollback", s.Number)
		}
		var out []string
		for _, b := range s.Rollback.Blocks {
			out = append(out, b.Commands...)
		}
		return strings.Join(out, "\n")
	}
	both := plan(StateVisible)
	wantIn(t, "both seen", cmds(both), "kubectl -n kube-system get daemonset/kube-proxy deployment/coredns -o wide")
	wantIn(t, "both seen, rollback", back(both), "rollout undo daemonset/kube-proxy", "rollout undo deployment/coredns")

	none := plan(StateNotVisible)
	wantIn(t, "no kube-proxy", cmds(none), "kubectl -n kube-system get deployment/coredns -o wide",
		"the inventory saw no kube-proxy in kube-system: KubeadmControlPlane skips it")
	wantNotIn(t, "no kube-proxy", cmds(none), "daemonset/kube-proxy", "configmap kube-proxy")
	wantNotIn(t, "no kube-proxy, rollback", back(none), "daemonset/kube-proxy")

	unread := plan(StateForbidden)
	guard := `FOUND=$(kubectl -n kube-system get daemonset/kube-proxy -o name --ignore-not-found) && if [ "$(printf '%s\n' "$FOUND" | grep -c .)" -eq 1 ]; then `
	wantIn(t, "kube-proxy unread", cmds(unread), guard+"kubectl -n kube-system get daemonset/kube-proxy -o wide; else")
	wantIn(t, "kube-proxy unread, rollback", back(unread), guard+"kubectl -n kube-system rollout undo daemonset/kube-proxy; else")

	// Run in bash against a kubectl that finds the DaemonSet, finds
	// nothing, or is refused: a refused get stops the line, it is not
	// "nothing to do".
	if _, err := exec.LookPath("bash"); err != nil {
		return
	}
	var line string
	for _, l := range strings.Split(back(unread), "\n") {
		if strings.HasPrefix(l, guard) {
			line = l
		}
	}
	for _, tc := range []struct {
		name, get string
		rc        int
		want      string
	}{
		{"found", `printf 'daemonset.apps/kube-proxy\n'`, 0, "UNDO"},
		{"none", "true", 0, "nothing to do"},
		{"forbidden", `echo 'Error from server (Forbidden)' >&2; return 1`, 1, ""},
	} {
		script := `kubectl() { case "$1 $2 $3" in "-n kube-system get") ` + tc.get + `;; *) echo UNDO;; esac; }` + "\n" + line
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		rc := 0
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
		}
		if rc != tc.rc || (tc.want != "" && !strings.Contains(string(out), tc.want)) || (tc.want == "" && strings.Contains(string(out), "nothing to do")) {
			t.Errorf("%s: exit %d, output %q", tc.name, rc, out)
		}
	}
}
