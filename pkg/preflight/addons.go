package preflight

import (
	"sort"
	"strings"

	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// How an addon was found (Addon.Source).
const (
	FoundByImage    = "image"
	FoundByWorkload = "workload"
	FoundByHelm     = "helm"
)

// findAddons finds the addons the workloads run (pkg/skew's detection, by
// image, then by workload name and labels) and the deployed Helm releases
// install. Several workloads running one addon at one version in one
// namespace are one addon (the GPU Operator's validator runs the
// operator's image): the workload the project names for it is kept, the
// others are listed in Also. A Helm release of an addon already found in
// its namespace names that addon's release, and gives it a version where
// the image has none (pinned by digest alone); one whose workload was not
// recognised (an image mirrored under another name) is an addon of its own.
func findAddons(ws []skew.AddonWorkload, rels []dep.HelmRelease) []Addon {
	type found struct {
		Addon
		primary bool
	}
	var fs []found
	for _, w := range ws {
		m, ok := skew.DetectAddon(w)
		if !ok || !m.Judged {
			continue
		}
		src := FoundByImage
		if !m.ByImage {
			src = FoundByWorkload
		}
		fs = append(fs, found{Addon{Name: m.Name, Namespace: w.Namespace, Workload: w.Kind + "/" + w.Name, Image: m.Image, Version: m.Version, Source: src}, m.Primary})
	}
	// The workload the project names first, then by kind and name.
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.primary != b.primary {
			return a.primary
		}
		return a.Workload < b.Workload
	})
	var out []Addon
	idx := map[string]int{}
	for _, f := range fs {
		key := f.Name + "\x00" + f.Namespace + "\x00" + f.Version
		if i, ok := idx[key]; ok {
			out[i].Also = append(out[i].Also, f.Workload)
			continue
		}
		idx[key] = len(out)
		out = append(out, f.Addon)
	}
	for _, r := range rels {
		if r.Status != "deployed" {
			continue
		}
		name, version, ok := skew.AddonForChart(r.Chart, r.ChartVersion, r.AppVersion)
		if !ok {
			continue
		}
		release := r.Namespace + "/" + r.Name + " (chart " + r.Chart + " " + r.ChartVersion + ")"
		merged := false
		for i := range out {
			a := &out[i]
			if a.Name != name || a.Namespace != r.Namespace {
				continue
			}
			merged = true
			if a.HelmRelease == "" {
				a.HelmRelease = release
			}
			if _, err := skew.ParseVersion(a.Version); err != nil && version != "" {
				a.Version, a.Source = version, FoundByHelm
			}
		}
		if !merged {
			out = append(out, Addon{Name: name, Namespace: r.Namespace, Workload: "helmrelease/" + r.Name, Version: version, Source: FoundByHelm, HelmRelease: release})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Workload < b.Workload
	})
	return out
}

// addonCommand is the command that shows the version an addon runs: its
// workload's images, or its Helm release.
func addonCommand(a Addon) string {
	if kind, name, ok := strings.Cut(a.Workload, "/"); ok && kind != "helmrelease" {
		return "kubectl -n " + a.Namespace + " get " + kind + " " + name + " -o jsonpath='{.spec.template.spec.containers[*].image}'"
	}
	return "helm -n " + a.Namespace + " list --filter '^" + strings.TrimPrefix(a.Workload, "helmrelease/") + "$'"
}
