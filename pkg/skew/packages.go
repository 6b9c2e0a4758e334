package skew

import (
	"fmt"
	"strings"
)

// The pkgs.k8s.io repositories hold one Kubernetes minor each, so every
// minor a node moves through switches the repository first
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/change-package-repository/,
// read 2026-09-20): the deb line in /etc/apt/sources.list.d/kubernetes.list,
// the baseurl and gpgkey of /etc/yum.repos.d/kubernetes.repo. The packages
// are held (apt-mark hold) or excluded (exclude= in the repo file, lifted
// with --disableexcludes=kubernetes) between upgrades
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/).

// repoSwitch moves the Kubernetes package repository from one minor to the
// next, for the package manager pm (pkgApt or pkgDnf).
func repoSwitch(pm, from, to string) []string {
	if pm == pkgDnf {
		return []string{fmt.Sprintf(`sudo sed -i 's#/v%s/#/v%s/#g' /etc/yum.repos.d/kubernetes.repo`, from, to)}
	}
	return []string{fmt.Sprintf(`sudo sed -i 's#/v%s/#/v%s/#' /etc/apt/sources.list.d/kubernetes.list`, from, to)}
}

// install installs pkgs at minor to: the <patch> the pre-flight step named
// when final, else the newest patch of the minor (an intermediate kubeadm
// a node passes through).
func install(pm, to string, final bool, pkgs ...string) []string {
	ver := to + ".*"
	if final {
		ver = to + "." + phPatch + "-*"
	}
	var av, dv []string
	for _, p := range pkgs {
		av = append(av, p+"="+sq(ver))
		dv = append(dv, sq(p+"-"+ver))
	}
	if pm == pkgDnf {
		return []string{fmt.Sprintf("sudo dnf install -y %s --disableexcludes=kubernetes", strings.Join(dv, " "))}
	}
	names := strings.Join(pkgs, " ")
	return []string{fmt.Sprintf("sudo apt-mark unhold %s && sudo apt-get update && sudo apt-get install -y %s && sudo apt-mark hold %s", names, strings.Join(av, " "), names)}
}

// osChoice is the choice between the package managers of a node whose OS
// image does not tell; osWhen says how to tell, from /etc/os-release (ID
// and ID_LIKE: debian, ubuntu; rhel, centos, fedora, rocky, almalinux,
// amzn, ol).
const osChoice = "the node's OS family"

var osWhen = map[string]string{
	pkgApt: "the node runs Debian or Ubuntu (grep -E '^ID(_LIKE)?=' /etc/os-release names debian or ubuntu)",
	pkgDnf: "the node runs RHEL, Rocky, Alma, CentOS, Fedora, Oracle or Amazon Linux (grep -E '^ID(_LIKE)?=' /etc/os-release names rhel, centos, fedora or amzn)",
}

// byManager appends lines for the node's package manager or, when its OS
// image does not tell, one alternative block per manager: pasted whole, a
// block with both would run kubeadm upgrade node twice and restart the
// kubelet twice.
func byManager(b *blocks, pm string, lines func(pm string) []string) {
	if pm != pkgUnknown {
		b.add(lines(pm)...)
		return
	}
	b.alt(osChoice, osWhen[pkgApt], lines(pkgApt)...)
	b.alt(osChoice, osWhen[pkgDnf], lines(pkgDnf)...)
}

// kubeadmNode upgrades a kubeadm node in place from one minor to another,
// during one drain. A node's kubeadm may be at most one minor newer than
// the kubeadm that last managed the node ("Nodes that are being upgraded
// must use a version of kubeadm that is the same MINOR version or one MINOR
// version newer than the version of kubeadm used for managing the node":
// https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm/#kubeadm-s-skew-against-kubeadm,
// read 2026-09-20), so a skip-level jump runs kubeadm upgrade node once per
// minor, then installs the kubelet at the target
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/upgrading-linux-nodes/).
func kubeadmNode(b *blocks, pm, from, to string) {
	f, err1 := ParseVersion(from)
	t, err2 := ParseVersion(to)
	if err1 != nil || err2 != nil || t.MinorsAfter(f) < 1 {
		return
	}
	if n := t.MinorsAfter(f); n > 1 {
		b.add(fmt.Sprintf("# kubeadm moves a node one minor per kubeadm upgrade node (its skew against kubeadm): %d upgrades here, %s to %s; each intermediate kubeadm is older than the control plane, outside kubeadm's skew against the Kubernetes version, so where that is not acceptable reprovision the node at v%s instead (kubeadm reset, then join with kubeadm %s)", n, from, to, to, to))
	}
	byManager(b, pm, func(pm string) []string { return kubeadmNodeWith(pm, f, t) })
}

func kubeadmNodeWith(pm string, f, t Version) []string {
	to := t.MinorString()
	var out []string
	for m := f.AddMinors(1); m.MinorsAfter(t) <= 0; m = m.AddMinors(1) {
		mm := m.MinorString()
		out = append(out, repoSwitch(pm, m.AddMinors(-1).MinorString(), mm)...)
		out = append(out, install(pm, mm, mm == to, "kubeadm")...)
		out = append(out, "sudo kubeadm upgrade node")
	}
	out = append(out, install(pm, to, true, "kubelet", "kubectl")...)
	return chain(append(out, "sudo systemctl daemon-reload", "sudo systemctl restart kubelet")...)
}
