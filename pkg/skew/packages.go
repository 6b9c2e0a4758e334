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

// downgrade installs pkgs at the newest patch of minor to over a newer
// version: apt refuses a downgrade under -y without --allow-downgrades;
// dnf install of an exact version installs it "no matter which version of
// the package is already installed" (dnf(8), install command).
func downgrade(pm, to string, pkgs ...string) []string {
	out := install(pm, to, false, pkgs...)
	if pm != pkgDnf {
		for i := range out {
			out[i] = strings.Replace(out[i], "apt-get install -y ", "apt-get install -y --allow-downgrades ", 1)
		}
	}
	return out
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

// osOtherWhen is the third alternative: an OS family with neither
// package manager (Flatcar, Talos, Bottlerocket, ...), where the pkgs.k8s.io
// packages the other two install do not exist.
const osOtherWhen = "the node runs another OS family (grep -E '^ID(_LIKE)?=' /etc/os-release names none of debian, ubuntu, rhel, centos, fedora, amzn)"

// osOtherStop is that alternative's one command. It runs nothing on the
// node: it says, on stderr, which block to paste where /etc/os-release
// names a family of the other two (this one pasted by mistake), and
// otherwise the manual path, and fails either way so that nothing chained
// after it runs. The manual path is kubeadm's own for a node without a
// package manager: the kubeadm, kubelet and kubectl binaries of the
// release from dl.k8s.io
// (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/,
// the "Without a package manager" tab, which downloads
// https://dl.k8s.io/release/${RELEASE}/bin/linux/${ARCH}/{kubeadm,kubelet}
// into /usr/local/bin with the kubelet's systemd unit), then the kubeadm and
// systemctl commands of the blocks above; or the node is reprovisioned on
// a family with packages.
const osOtherStop = `{ if grep -qE '^ID(_LIKE)?=.*(debian|ubuntu|rhel|centos|fedora|amzn)' /etc/os-release; then echo "this node's /etc/os-release names a Debian or RHEL family: paste that family's block above, not this one" >&2; else echo "no kubeadm/kubelet packages for this OS family: install the kubeadm, kubelet and kubectl binaries of the version the blocks above install from https://dl.k8s.io/release/vVERSION/bin/linux/ARCH/ (kubeadm's install page, Without a package manager), then run the blocks' kubeadm and systemctl commands by hand; or reprovision the node on Debian, Ubuntu or a RHEL family" >&2; fi; false; }`

// byManager appends lines for the node's package manager or, when its OS
// image does not tell, one alternative block per manager: pasted whole, a
// block with both would run kubeadm upgrade node twice and restart the
// kubelet twice. A third alternative stops on any other OS family, where
// neither would upgrade the kubelet.
func byManager(b *blocks, pm string, lines func(pm string) []string) {
	if pm != pkgUnknown {
		b.add(lines(pm)...)
		return
	}
	b.alt(osChoice, osWhen[pkgApt], lines(pkgApt)...)
	b.alt(osChoice, osWhen[pkgDnf], lines(pkgDnf)...)
	b.alt(osChoice, osOtherWhen, osOtherStop)
}

// kubeadmNode upgrades a kubeadm node from one minor to another, during
// one drain, with the control plane on minor cp. kubeadm's version skew
// policy
// (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm/#version-skew-policy,
// the page of Kubernetes 1.31, whose examples have kubeadm at 1.31; read
// 2026-12-07) bounds an in-place upgrade from both sides:
//
//   - against the Kubernetes version, "kubeadm can be used with Kubernetes
//     components that are the same version as kubeadm or one version
//     older" ("kubeadm is at 1.31, kubernetesVersion must be at 1.31 or
//     1.30"): a kubeadm older than the control plane is outside it;
//   - against kubeadm, "Nodes that are being upgraded must use a version
//     of kubeadm that is the same MINOR version or one MINOR version newer
//     than the version of kubeadm used for managing the node": kubeadm
//     upgrade node moves a node one minor, as kubeadm's worker upgrade
//     does after the control plane's
//     (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/upgrading-linux-nodes/).
//
// So a node upgrades in place only when it is one minor behind the control
// plane and moves to it: one kubeadm upgrade node, run by a kubeadm of the
// control plane's minor. A node two or more minors behind has no supported
// path in place (stepping it a minor at a time would run each intermediate
// kubeadm against a newer control plane; the target's kubeadm would skip
// minors of the node's own), and is reprovisioned at the target instead
// (kubeadmRejoin): "the kubeadm binary used for kubeadm join must match the
// last version of kubeadm used to ... upgrade" the cluster, the control
// plane's. Its kubelet may meanwhile sit up to three minors behind the
// apiserver, two for a kubelet older than 1.25
// (https://kubernetes.io/releases/version-skew-policy/#kubelet, the policy
// since Kubernetes 1.28; kubeadm's own "kubelet version that is the same
// version as kubeadm or three versions older"), which the plan keeps
// (KubeletMaxSkew).
func kubeadmNode(b *blocks, pm, from, to, cp, cpNode, on, nodes string) {
	f, err1 := ParseVersion(from)
	t, err2 := ParseVersion(to)
	if err1 != nil || err2 != nil || t.MinorsAfter(f) < 1 {
		return
	}
	c, err := ParseVersion(cp)
	if err != nil {
		c = t
	}
	if t.MinorsAfter(f) > 1 || c.MinorsAfter(f) > 1 {
		kubeadmRejoin(b, pm, f, t, cpNode, on, nodes)
		return
	}
	byManager(b, pm, func(pm string) []string { return kubeadmNodeWith(pm, f, t) })
}

// kubeadmRejoin reprovisions a kubeadm node at the target: kubeadm reset
// (--force: "Reset the node without prompting for confirmation"), the
// packages of the target minor, and kubeadm join with a join command made
// on a control-plane node (kubeadm token create --print-join-command,
// https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-token/).
// The Node object is not deleted, so its labels (the pool, the fabric
// unit) stay, and the kubelet registers to it again.
func kubeadmRejoin(b *blocks, pm string, f, t Version, cpNode, on, nodes string) {
	from, to := f.MinorString(), t.MinorString()
	b.add(fmt.Sprintf("# %d minors behind %s: kubeadm upgrade node moves a node one minor (\"the same MINOR version or one MINOR version newer than the version of kubeadm used for managing the node\"), and stepping it a minor at a time would run kubeadm %s against the newer %s control plane, outside kubeadm's skew (it takes components \"the same version as kubeadm or one version older\"); so the node is reprovisioned at v%s: reset, packages of %s, join again with kubeadm %s (the Node object and its labels stay)", t.MinorsAfter(f), to, f.AddMinors(1).MinorString(), to, to, to, to),
		fmt.Sprintf("# on %s, a control-plane node: a join command valid two hours (it holds a bootstrap token: keep it out of logs)", cpNode),
		"sudo kubeadm token create --print-join-command --ttl 2h",
		"# on the node:")
	byManager(b, pm, func(pm string) []string {
		lines := []string{"sudo kubeadm reset --force"}
		lines = append(lines, repoSwitch(pm, from, to)...)
		lines = append(lines, install(pm, to, true, "kubeadm", "kubelet", "kubectl")...)
		lines = append(lines, "sudo systemctl daemon-reload")
		return chain(lines...)
	})
	// kubeadm join refuses a Node of its name whose Ready condition is
	// True ("a Node with name %q and status %q already exists in the
	// cluster. You must delete the existing Node or change the name of this
	// new joining Node": cmd/kubeadm/app/cmd/phases/join/kubelet.go), and
	// the Node stays Ready until the node lifecycle controller has missed
	// its heartbeats for node-monitor-grace-period after reset stopped the
	// kubelet; the Node is kept (its labels), so the join waits for that.
	b.cut()
	b.add("# here, once the nodes are reset: the control plane sees each reset node's kubelet stopped (its Ready condition Unknown) before it joins again, since kubeadm join refuses a Node of its name that is still Ready",
		"kubectl wait "+nodes+" --for=condition=Ready=Unknown --timeout=5m")
	b.cut()
	b.add(on,
		"sudo kubeadm join "+sq("<control-plane-endpoint>")+" --token "+sq("<token>")+" --discovery-token-ca-cert-hash "+sq("<ca-cert-hash>")+"   # the values kubeadm token create printed")
}

// kubeadmNodeWith upgrades a node one minor, from f to t, in place: the
// repository of t, kubeadm of t, kubeadm upgrade node, then the kubelet and
// kubectl of t.
func kubeadmNodeWith(pm string, f, t Version) []string {
	from, to := f.MinorString(), t.MinorString()
	out := repoSwitch(pm, from, to)
	out = append(out, install(pm, to, true, "kubeadm")...)
	out = append(out, "sudo kubeadm upgrade node")
	out = append(out, install(pm, to, true, "kubelet", "kubectl")...)
	return chain(append(out, "sudo systemctl daemon-reload", "sudo systemctl restart kubelet")...)
}
