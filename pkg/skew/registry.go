package skew

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DefaultRegistry is where upstream Kubernetes images are published.
const DefaultRegistry = "registry.k8s.io"

// TagLister lists the tags of an image repository.
type TagLister func(ctx context.Context, repo string) ([]string, error)

// RemoteTagLister lists tags through go-containerregistry. insecure allows
// plain HTTP (for a local mirror).
func RemoteTagLister(insecure bool, opts ...remote.Option) TagLister {
	return func(ctx context.Context, repo string) ([]string, error) {
		var nopts []name.Option
		if insecure {
			nopts = append(nopts, name.Insecure)
		}
		r, err := name.NewRepository(repo, nopts...)
		if err != nil {
			return nil, fmt.Errorf("repository %q: %w", repo, err)
		}
		return remote.List(r, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	}
}

// LatestPatches returns, per MAJOR.MINOR, the newest released patch among
// tags. Pre-releases and vendor-suffixed tags are ignored.
func LatestPatches(tags []string) map[string]Version {
	out := map[string]Version{}
	for _, t := range tags {
		v, err := ParseVersion(t)
		if err != nil || !v.HasPatch || v.Pre != "" || v.Build != "" || !strings.HasPrefix(t, "v") {
			continue
		}
		k := v.MinorString()
		if cur, ok := out[k]; !ok || v.Compare(cur) > 0 {
			out[k] = v
		}
	}
	return out
}

// PatchReport says how far one component is behind the newest patch of
// its minor.
type PatchReport struct {
	// Component and Instance name what was checked.
	Component string `json:"component"`
	Instance  string `json:"instance,omitempty"`
	// Version is what runs.
	Version string `json:"version"`
	// Latest is the newest patch of the same minor in the registry.
	Latest string `json:"latest,omitempty"`
	// PatchesBehind counts the patch releases in between.
	PatchesBehind int `json:"patchesBehind"`
}

// PatchCurrency compares the inventory's apiservers, controllers,
// kube-proxy and kubelet pools with the newest patches listed in
// registry/kube-apiserver.
func PatchCurrency(ctx context.Context, inv Inventory, list TagLister, registry string) ([]PatchReport, error) {
	if registry == "" {
		registry = DefaultRegistry
	}
	repo := strings.TrimSuffix(registry, "/") + "/kube-apiserver"
	tags, err := list(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", repo, err)
	}
	latest := LatestPatches(tags)
	var out []PatchReport
	add := func(comp, inst, ver string) {
		v, err := ParseVersion(ver)
		if err != nil {
			return
		}
		r := PatchReport{Component: comp, Instance: inst, Version: v.String()}
		if l, ok := latest[v.MinorString()]; ok {
			r.Latest = l.String()
			if d := l.Patch - v.Patch; d > 0 {
				r.PatchesBehind = d
			}
		}
		out = append(out, r)
	}
	add(KindAPIServer, "/version", inv.Server.GitVersion)
	for _, c := range inv.Components {
		switch c.Name {
		case KindAPIServer, KindControllerManager, KindScheduler, KindKubeProxy:
			if c.State == StateVisible {
				add(c.Name, c.Instance, c.Version)
			}
		}
	}
	for _, p := range inv.Pools {
		if lo, _, ok := p.MinMax(); ok {
			add(KindKubelet, "pool "+p.Name, lo.String())
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ra, rb := componentRank(out[i].Component), componentRank(out[j].Component); ra != rb {
			return ra < rb
		}
		return out[i].Instance < out[j].Instance
	})
	return out, nil
}
