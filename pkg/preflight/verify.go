package preflight

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Regression kinds.
const (
	RegNodeNotReady    = "node-not-ready"
	RegNodeVersion     = "node-version"
	RegNodeGone        = "node-gone"
	RegPoolMissing     = "pool-missing"
	RegPoolShrank      = "pool-shrank"
	RegSystemPod       = "kube-system-pod"
	RegAddon           = "addon"
	RegWarningEvents   = "kube-system-warnings"
	RegGPUAllocatable  = "gpu-allocatable"
	RegRemovedAPICalls = "removed-api-caller"
)

// Regression is one thing worse than in the baseline.
type Regression struct {
	Kind string `json:"kind"`
	// Status is FAIL or UNKNOWN (both regressions) or WARN (listed only).
	Status  Status `json:"status"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Command string `json:"command,omitempty"`
}

// VerifyOptions say what the upgrade planned.
type VerifyOptions struct {
	// PoolVersions is the kubelet minor planned per pool after this wave
	// (from --pool POOL=vX.Y); pools not named must not move backwards
	// and, when Target is set, must be on Target if they were upgraded.
	PoolVersions map[string]skew.Version
	// Target is the minor the upgrade reaches (the baseline's by default).
	Target skew.Version
	// Addons names the addons planned to move; each must have a version
	// other than the baseline's.
	Addons []string
	// AllowGrants name subjects, roles or bindings whose new grants of a
	// privilege escalation path are expected (WARN, not FAIL).
	AllowGrants []string
	// Settle is how long the Warning events an upgrade is expected to
	// cause may fire before they are a regression (DefaultSettle when 0).
	Settle time.Duration
}

// Verify compares the cluster now with the baseline and returns the
// regressions only: what was fine (or absent) before and is not now.
func Verify(base, now Evidence, opts VerifyOptions) []Regression {
	var out []Regression
	before := map[string]NodeFact{}
	for _, n := range base.Nodes {
		before[n.Name] = n
	}
	gpuDropped := map[string]bool{}
	for _, n := range now.Nodes {
		b, had := before[n.Name]
		if !n.Ready && (!had || b.Ready) {
			out = append(out, Regression{Kind: RegNodeNotReady, Object: "node/" + n.Name, Message: fmt.Sprintf("node %s (pool %s) is not Ready: %s", n.Name, n.Pool, n.NotReady),
				Command: "kubectl describe node " + n.Name})
		}
		if want, ok := opts.PoolVersions[n.Pool]; ok {
			v, err := skew.ParseVersion(n.Kubelet)
			switch {
			case err != nil:
				out = append(out, Regression{Kind: RegNodeVersion, Object: "node/" + n.Name, Message: fmt.Sprintf("node %s reports kubelet %q, which does not parse; pool %s is planned at %s", n.Name, n.Kubelet, n.Pool, want.MinorString())})
			case v.MinorOnly().MinorsAfter(want.MinorOnly()) != 0:
				out = append(out, Regression{Kind: RegNodeVersion, Object: "node/" + n.Name, Message: fmt.Sprintf("node %s runs kubelet %s; pool %s is planned at %s", n.Name, n.Kubelet, n.Pool, want.MinorString()),
					Command: "kubectl get node " + n.Name + " -o jsonpath='{.status.nodeInfo.kubeletVersion}'"})
			}
		} else if had {
			bv, e1 := skew.ParseVersion(b.Kubelet)
			nv, e2 := skew.ParseVersion(n.Kubelet)
			if e1 == nil && e2 == nil && nv.Compare(bv) < 0 {
				out = append(out, Regression{Kind: RegNodeVersion, Object: "node/" + n.Name, Message: fmt.Sprintf("node %s went back from kubelet %s to %s", n.Name, b.Kubelet, n.Kubelet)})
			}
		}
		if had && n.GPUAllocatable < b.GPUAllocatable {
			gpuDropped[n.Pool] = true
			out = append(out, Regression{Kind: RegGPUAllocatable, Object: "node/" + n.Name,
				Message: fmt.Sprintf("node %s: %s allocatable dropped from %d to %d", n.Name, gpucheck.GPUResource, b.GPUAllocatable, n.GPUAllocatable),
				Command: "kubectl gpu-validate nodes " + n.Name})
		}
		delete(before, n.Name)
	}
	// A planned pool may have had its nodes replaced (a provider's rolling
	// upgrade, Karpenter, Cluster API): its old nodes going is no
	// regression, but the pool must still be there, as large, with as many
	// GPUs. A planned pool with no node at all is one the gate would
	// otherwise pass without checking anything.
	type size struct{ nodes, gpus int }
	sizes := func(nodes []NodeFact) map[string]size {
		m := map[string]size{}
		for _, n := range nodes {
			s := m[n.Pool]
			s.nodes++
			s.gpus += n.GPUAllocatable
			m[n.Pool] = s
		}
		return m
	}
	was, is := sizes(base.Nodes), sizes(now.Nodes)
	for name, b := range before {
		if _, planned := opts.PoolVersions[b.Pool]; planned {
			continue
		}
		out = append(out, Regression{Kind: RegNodeGone, Object: "node/" + name, Message: fmt.Sprintf("node %s (pool %s) was in the baseline and is gone", name, b.Pool)})
	}
	for _, pool := range sortedPools(opts.PoolVersions) {
		cur, ok := is[pool]
		switch {
		case !ok:
			out = append(out, Regression{Kind: RegPoolMissing, Object: "pool/" + pool,
				Message: fmt.Sprintf("pool %s is planned at %s and has no node: check the pool name (kubectl skew lists the pools)", pool, opts.PoolVersions[pool].MinorString()),
				Command: "kubectl skew"})
		case cur.nodes < was[pool].nodes || (cur.gpus < was[pool].gpus && !gpuDropped[pool]):
			out = append(out, Regression{Kind: RegPoolShrank, Object: "pool/" + pool,
				Message: fmt.Sprintf("pool %s has %s and %s allocatable, the baseline had %d and %d", pool, skew.Nodes(cur.nodes), cli.Plural(cur.gpus, "GPU"), was[pool].nodes, was[pool].gpus),
				Command: "kubectl gpu-validate nodes"})
		}
	}

	podsBefore := map[string]PodFact{}
	for _, p := range base.SystemPods {
		podsBefore[p.Name] = p
	}
	for _, p := range now.SystemPods {
		b, had := podsBefore[p.Name]
		if p.Problem != "" && (!had || b.Problem == "") {
			out = append(out, Regression{Kind: RegSystemPod, Object: "pod/kube-system/" + p.Name, Message: fmt.Sprintf("kube-system pod %s: %s (%s)", p.Name, p.Problem, cli.Plural(int(p.Restarts), "restart")),
				Command: fmt.Sprintf("kubectl -n kube-system logs %s --previous", p.Name)})
		}
	}

	addonsBefore := map[string]Addon{}
	for _, a := range base.Addons {
		addonsBefore[a.Name+" "+a.Namespace+" "+a.Workload] = a
	}
	for _, name := range opts.Addons {
		moved, seen := false, false
		for _, a := range now.Addons {
			if a.Name != name {
				continue
			}
			seen = true
			if b, ok := addonsBefore[a.Name+" "+a.Namespace+" "+a.Workload]; !ok || b.Version != a.Version {
				moved = true
			}
		}
		if !moved {
			msg := fmt.Sprintf("addon %s was planned to move and is still on its baseline version", name)
			if !seen {
				msg = fmt.Sprintf("addon %s was planned to move and is not found", name)
			}
			out = append(out, Regression{Kind: RegAddon, Object: "addon/" + name, Message: msg})
		}
	}

	out = append(out, verifyWarnings(base, now, opts.Settle)...)

	callersBefore := map[string]bool{}
	for _, c := range base.RemovedAPICallers {
		callersBefore[c] = true
	}
	for _, c := range now.RemovedAPICallers {
		if !callersBefore[c] {
			out = append(out, Regression{Kind: RegRemovedAPICalls, Object: c, Message: "a new user of an API removed at the target: " + c,
				Command: "kubectl deprecations --target v" + base.Target})
		}
	}
	out = append(out, verifyPolicy(base, now, opts)...)
	out = append(out, verifyHealth(base, now)...)
	for i := range out {
		if out[i].Status == "" {
			out[i].Status = StatusFail
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Object < out[j].Object
	})
	return out
}

func sortedPools(m map[string]skew.Version) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
