package runbooke2e

import (
	"fmt"
	"strings"
)

// intent holds a block's provider requests and its effect to the step's
// intent: a pre-flight changes nothing; a hold changes only GKE's
// maintenance policy; a control-plane step moves the control plane one
// minor, to the step's, and no pool; an add-on step moves EKS add-ons to
// versions of the step's minor and nothing else; a node-pool step moves
// that pool, to the step's minor, and no other. A provider's refusal
// (an HTTP error) is a problem in every step.
func intent(w, before *World, st *Step, calls []Call) []string {
	var out []string
	for _, c := range calls {
		if c.Status >= 400 {
			out = append(out, fmt.Sprintf("%s refused %s %s: %s", c.Service, c.Op, c.Target, c.Error))
		}
	}
	allowed := func(c Call) string {
		switch st.Phase {
		case "control-plane":
			switch c.Op {
			case "UpdateClusterVersion", "projects.locations.clusters.update", "ManagedClusters_CreateOrUpdate":
				if c.Version == "" || Minor(c.Version) != st.To {
					return fmt.Sprintf("asks for version %q, the step moves to %s", c.Version, st.To)
				}
				return ""
			}
		case "addons":
			if c.Op == "UpdateAddon" {
				a := strings.TrimPrefix(c.Target, w.Cluster+"/")
				for _, v := range eksCompatible(a, st.To) {
					if v == c.Version {
						return ""
					}
				}
				return fmt.Sprintf("moves %s to %s, not a version for %s", a, c.Version, st.To)
			}
		case "hold-rollouts":
			if c.Op == "projects.locations.clusters.setMaintenancePolicy" {
				return ""
			}
		case "node-pool":
			switch c.Op {
			case "UpdateNodegroupVersion", "AgentPools_CreateOrUpdate":
				if c.Target != w.Cluster+"/"+st.Name {
					return fmt.Sprintf("acts on %s, the step's pool is %s", c.Target, st.Name)
				}
				if c.Version != "" && Minor(c.Version) != st.To {
					return fmt.Sprintf("asks for version %q, the step moves to %s", c.Version, st.To)
				}
				return ""
			case "projects.locations.clusters.update":
				if c.Target != w.Cluster+"/"+st.Name {
					return fmt.Sprintf("acts on %s, the step's pool is %s", c.Target, st.Name)
				}
				if Minor(c.Version) != st.To {
					return fmt.Sprintf("asks for version %q, the step moves to %s", c.Version, st.To)
				}
				return ""
			case "projects.locations.clusters.setMaintenancePolicy":
				return "" // lifting the hold after the last held pool
			}
		}
		return "a " + st.Phase + " step changes nothing at the provider"
	}
	for _, c := range calls {
		if !c.Mutating || c.Status >= 400 {
			continue
		}
		if why := allowed(c); why != "" {
			out = append(out, fmt.Sprintf("%s %s %s: %s", c.Service, c.Op, c.Target, why))
		}
	}
	// The effect, whoever made it (the provider, host commands).
	if Minor(w.ControlPlane) != Minor(before.ControlPlane) && st.Phase != "control-plane" && st.Phase != "apiservers" {
		out = append(out, fmt.Sprintf("the control plane moved from %s to %s in a %s step", before.ControlPlane, w.ControlPlane, st.Phase))
	}
	if st.Phase == "control-plane" || st.Phase == "apiservers" {
		if d := minorNum(w.ControlPlane) - minorNum(before.ControlPlane); d > 1 {
			out = append(out, fmt.Sprintf("the control plane moved %d minors (%s to %s)", d, before.ControlPlane, w.ControlPlane))
		}
	}
	for _, p := range w.Pools {
		bp := before.Pool(p.Name)
		for i, n := range p.Nodes {
			if bp == nil || Minor(bp.Nodes[i].Kubelet) == Minor(n.Kubelet) {
				continue
			}
			ok := (st.Phase == "node-pool" && st.Name == p.Name) ||
				(p.ControlPlane && (st.Phase == "apiservers" || st.Phase == "control-plane"))
			if !ok {
				out = append(out, fmt.Sprintf("node %s (pool %s) moved from %s to %s in step %s %s", n.Name, p.Name, bp.Nodes[i].Kubelet, n.Kubelet, st.Phase, st.Name))
			} else if Minor(n.Kubelet) != st.To && st.To != "" {
				out = append(out, fmt.Sprintf("node %s moved to %s, the step moves to %s", n.Name, n.Kubelet, st.To))
			}
		}
	}
	return out
}
