package skew

import (
	"sort"
	"strings"
)

// FabricLabels are the node labels that name a fabric unit (a rack set,
// an NVLink domain, a leaf switch), finest first. A GPU pool is drained
// one unit at a time, so that the rest of the pool still places whole
// gangs; the first label on every node of the pool with two values or more
// is the pool's unit. Sources (read 2026-09-20):
//   - gpufleet.dev/rack-set: this suite's own label (the rack set of the
//     design document's example), set by the platform team.
//   - nvidia.com/gpu.clique: the NVLink domain GPU Feature Discovery labels
//     GPU nodes with; NVIDIA Topograph keeps it as its accelerator domain
//     (https://github.com/NVIDIA/topograph/blob/main/docs/engines/k8s.md).
//   - network.topology.nvidia.com/accelerator, /leaf and /spine: NVIDIA
//     Topograph's NVLink domain, leaf switch and spine switch labels (same
//     page).
//   - topology.k8s.aws/network-node-layer-3 and -2: the EC2 network
//     hierarchy EKS labels nodes with, layer 3 "the most selective"
//     (https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html).
var FabricLabels = []string{
	"gpufleet.dev/rack-set",
	"nvidia.com/gpu.clique",
	"network.topology.nvidia.com/accelerator",
	"network.topology.nvidia.com/leaf",
	"topology.k8s.aws/network-node-layer-3",
	"network.topology.nvidia.com/spine",
	"topology.k8s.aws/network-node-layer-2",
}

// maxUnitValues bounds the unit values an inventory keeps per pool.
const maxUnitValues = 64

// maxOSImages bounds the OS images an inventory keeps per pool.
const maxOSImages = 3

// unitAcc gathers the fabric label values of one pool's nodes.
type unitAcc struct {
	// values per fabric label; labelled counts the nodes carrying it.
	values   map[string]map[string]bool
	labelled map[string]int
}

func (u *unitAcc) add(labels map[string]string) {
	for _, l := range FabricLabels {
		v, ok := labels[l]
		if !ok || v == "" {
			continue
		}
		if u.values == nil {
			u.values, u.labelled = map[string]map[string]bool{}, map[string]int{}
		}
		if u.values[l] == nil {
			u.values[l] = map[string]bool{}
		}
		u.values[l][v] = true
		u.labelled[l]++
	}
}

// units picks the pool's unit label: the first fabric label on all of its
// nodes with at least two values.
func (u *unitAcc) units(nodes int) *FabricUnits {
	for _, l := range FabricLabels {
		if u.labelled[l] != nodes || len(u.values[l]) < 2 {
			continue
		}
		fu := &FabricUnits{Label: l}
		for v := range u.values[l] {
			fu.Values = append(fu.Values, v)
		}
		sort.Strings(fu.Values)
		if len(fu.Values) > maxUnitValues {
			fu.More = len(fu.Values) - maxUnitValues
			fu.Values = fu.Values[:maxUnitValues]
		}
		return fu
	}
	return nil
}

// addOSImage records a node's OS image, keeping at most maxOSImages.
func addOSImage(images []string, img string) []string {
	img = strings.TrimSpace(img)
	if img == "" {
		return images
	}
	for _, i := range images {
		if i == img {
			return images
		}
	}
	if len(images) >= maxOSImages {
		return images
	}
	return append(images, img)
}

// Package managers of a node's OS image.
const (
	pkgApt     = "apt"
	pkgDnf     = "dnf"
	pkgUnknown = ""
)

// packageManager tells apt from dnf by the node's OS image
// (status.nodeInfo.osImage, the PRETTY_NAME of /etc/os-release): the
// pkgs.k8s.io repositories are per minor, for deb and rpm
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/change-package-repository/).
func packageManager(osImages []string) string {
	got := pkgUnknown
	for _, img := range osImages {
		l := strings.ToLower(img)
		pm := pkgUnknown
		switch {
		case strings.Contains(l, "ubuntu"), strings.Contains(l, "debian"):
			pm = pkgApt
		case strings.Contains(l, "red hat"), strings.Contains(l, "rhel"), strings.Contains(l, "centos"),
			strings.Contains(l, "rocky"), strings.Contains(l, "alma"), strings.Contains(l, "oracle linux"),
			strings.Contains(l, "fedora"), strings.Contains(l, "amazon linux"):
			pm = pkgDnf
		}
		if pm == pkgUnknown || (got != pkgUnknown && got != pm) {
			return pkgUnknown
		}
		got = pm
	}
	return got
}
