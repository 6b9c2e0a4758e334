package skew

import (
	"errors"
	"fmt"
	"strings"
)

// NormalizePools returns a copy of pools in which every kubelet version that
// does not parse is counted as unknown in its pool instead of as a version.
// The collector already does this for live nodes; a saved report (edited by
// hand, or written by another tool) can still carry such a version, and
// MinMax would skip it silently while the pool's node count still included
// its nodes. Unknown nodes are named by the version they report.
func NormalizePools(pools []Pool) []Pool {
	out := make([]Pool, len(pools))
	for i, p := range pools {
		q := p
		q.Versions = nil
		q.UnknownNodes = append([]string(nil), p.UnknownNodes...)
		for _, vc := range p.Versions {
			if _, err := ParseVersion(strings.TrimSpace(vc.Version)); err != nil {
				q.Unknown += vc.Nodes
				if len(q.UnknownNodes) < 3 {
					q.UnknownNodes = append(q.UnknownNodes, fmt.Sprintf("%s reporting %q", Nodes(vc.Nodes), vc.Version))
				}
				continue
			}
			q.Versions = append(q.Versions, vc)
		}
		out[i] = q
	}
	return out
}

// checkWithoutAPIServer judges what can be judged when the inventory holds
// no parsable apiserver version (a saved report from a cluster whose
// /version could not be read): every rule against the apiserver is UNKNOWN,
// each pool says so with its kubelets, kube-proxy is still checked against
// the kubelets, and the addons are listed.
func checkWithoutAPIServer(inv Inventory) ([]Finding, CheckSummary) {
	var fs []Finding
	sum := CheckSummary{}
	msg := "the apiserver version is unknown (not in the inventory or does not parse); rules against the apiserver cannot be checked"
	if inv.Server.GitVersion != "" {
		msg = fmt.Sprintf("the apiserver version %q does not parse; rules against the apiserver cannot be checked", inv.Server.GitVersion)
	}
	fs = append(fs, Finding{Component: KindAPIServer, Instance: "/version", Version: inv.Server.GitVersion, Rule: RuleAPIServerHA,
		Status: StatusUnknown, Message: msg})
	var kMin, kMax Version
	haveK := false
	for _, p := range inv.Pools {
		sum.Nodes += p.Nodes
		inst := "pool " + p.Name
		if p.Unknown > 0 {
			fs = append(fs, Finding{Component: KindKubelet, Instance: inst, Rule: RuleUnknownKubelets, Status: StatusUnknown,
				Message: fmt.Sprintf("%d of %d nodes report no parsable kubelet version (%s)", p.Unknown, p.Nodes, strings.Join(p.UnknownNodes, ", "))})
		}
		lo, hi, ok := p.MinMax()
		if !ok {
			continue
		}
		if !haveK || lo.Compare(kMin) < 0 {
			kMin = lo
		}
		if !haveK || hi.Compare(kMax) > 0 {
			kMax = hi
		}
		haveK = true
		ver := lo.String()
		if lo.Compare(hi) != 0 {
			ver = lo.String() + ".." + hi.String()
		}
		fs = append(fs, Finding{Component: KindKubelet, Instance: inst, Version: ver, Rule: RuleKubelet, Status: StatusUnknown,
			Message: fmt.Sprintf("kubelets %s (%s); the apiserver version is unknown, so their skew cannot be judged", ver, Nodes(p.Nodes-p.Unknown))})
	}
	if haveK {
		sum.KubeletMin, sum.KubeletMax = kMin.String(), kMax.String()
	}
	for _, c := range inv.Components {
		switch c.Name {
		case KindAPIServer, KindControllerManager, KindScheduler, KindCloudControllerManager, KindKubectl:
			if c.State == StateVisible {
				fs = append(fs, Finding{Component: c.Name, Instance: c.Instance, Version: c.Version, Rule: RuleInventory, Status: StatusUnknown,
					Message: "the apiserver version is unknown, so this component's skew cannot be judged"})
			}
		case KindKubeProxy:
			v, err := ParseVersion(c.Version)
			if c.State != StateVisible || err != nil || !haveK {
				fs = append(fs, Finding{Component: c.Name, Instance: c.Instance, Version: c.Version, Rule: RuleKubeProxy, Status: StatusUnknown,
					Message: "kube-proxy's skew cannot be judged: " + strings.TrimSpace(c.State+" "+c.Source)})
				continue
			}
			fs = append(fs, proxyKubeletFinding(c.Instance, v, kMin, kMax, KubeletMaxSkew(v)))
		default:
			msg := c.Source
			if c.State != StateVisible {
				msg = c.State + ": " + c.Source
			}
			fs = append(fs, Finding{Component: c.Name, Instance: c.Instance, Version: c.Version, Rule: RuleInventory, Status: StatusInfo, Message: msg})
		}
	}
	return finish(fs, sum, inv)
}

// ErrNoAPIServer says the inventory holds no parsable apiserver version, so
// nothing measured against the apiserver (the plan) can be made.
var ErrNoAPIServer = errors.New("the inventory has no parsable apiserver version")
