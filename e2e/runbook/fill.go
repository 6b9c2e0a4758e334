package runbooke2e

import (
	"fmt"
	"path/filepath"
	"strings"
)

// fill replaces the placeholders a reader fills from what they know of
// the cluster (its name, region, location, resource group, Cluster API
// namespace and management context) or read from an earlier command of
// the runbook (the patch of the target minor from get-server-config,
// get-upgrades or dl.k8s.io; an EKS add-on's version from
// describe-addon-versions). A placeholder nobody could fill is left as
// it is, for the tool to refuse.
func fill(w *World, st *Step, work, line string) string {
	to := stepMinor(st)
	repl := map[string]string{
		"<cluster-name>":       w.Cluster,
		"<region>":             w.Region,
		"<location>":           w.Location,
		"<resource-group>":     w.ResourceGroup,
		"<namespace>":          w.Namespace,
		"<management-context>": "mgmt",
		// A directory off the cluster for backups: the scenario's own.
		"<backup-dir>": filepath.Join(work, "backup"),
		// What kubeadm token create --print-join-command prints on the
		// first control-plane node: the endpoint, a bootstrap token of
		// kubeadm's format ([a-z0-9]{6}.[a-z0-9]{16}) and the CA's hash.
		"<control-plane-endpoint>": "10.0.0.10:6443",
		"<token>":                  "abcdef.0123456789abcdef",
		"<ca-cert-hash>":           "sha256:" + strings.Repeat("0f", 32),
	}
	if to != "" {
		p := strings.TrimPrefix(Patch(to), to+".")
		repl["<patch>"] = p
		for _, a := range eksAddons {
			repl["<"+a+"-version>"] = eksAddonVersion(a, to)
		}
		// The VPC CNI's GitHub release tag: the table's version without
		// its -eksbuild.N (vpc-add-on-self-managed-update.html).
		repl["<vpc-cni-release>"], _, _ = strings.Cut(eksAddonVersion("vpc-cni", to), "-eksbuild")
		repl["<account>"] = eksImageAccount
		// The image tags of the EKS kube-proxy and CoreDNS tables
		// (kube-proxy-add-on-self-managed-update.html,
		// coredns-add-on-self-managed-update.html): the add-on's version.
		repl["<kube-proxy-tag>"] = eksAddonVersion("kube-proxy", to)
		repl["<coredns-tag>"] = eksAddonVersion("coredns", to)
		if strings.Contains(line, "kube-proxy:<version>") {
			repl["<version>"] = eksAddonVersion("kube-proxy", to)
		}
		if strings.Contains(line, "coredns:<version>") {
			repl["<version>"] = eksAddonVersion("coredns", to)
		}
	}
	var cps []string
	for _, p := range w.Pools {
		if p.ControlPlane {
			for _, n := range p.Nodes {
				cps = append(cps, n.Name)
			}
		}
	}
	if len(cps) > 0 {
		repl["<first-control-plane-node>"] = cps[0]
		repl["<server-node>"] = cps[0]
	}
	for k, v := range repl {
		if v != "" {
			line = strings.ReplaceAll(line, k, v)
		}
	}
	return line
}

// stepMinor is the minor a step moves to (its name for control-plane
// phases, the To of a node-pool step from its heading).
func stepMinor(st *Step) string {
	if st.To != "" {
		return st.To
	}
	if strings.HasPrefix(st.Name, "1.") {
		return st.Name
	}
	return ""
}

// iterations are the values a block's loop variables take: the nodes of
// the step's pool (or the control-plane nodes) one at a time or in
// batches, or its fabric units.
func iterations(w *World, st *Step, loops []Loop) ([]map[string]string, error) {
	if len(loops) == 0 {
		return []map[string]string{{}}, nil
	}
	if len(loops) > 1 {
		return nil, fmt.Errorf("the block sets %d loop variables; the lane knows one per block", len(loops))
	}
	lp := loops[0]
	p := w.Pool(st.Name)
	if p == nil {
		for _, q := range w.Pools {
			if q.ControlPlane {
				p = q
			}
		}
	}
	if p == nil {
		return nil, fmt.Errorf("%s: the step names no pool of the cluster", lp.Var)
	}
	var out []map[string]string
	switch lp.Kind {
	case "node":
		for _, n := range p.Nodes {
			out = append(out, map[string]string{lp.Var: n.Name})
		}
	case "nodes":
		for i := 0; i < len(p.Nodes); i += lp.Size {
			var names []string
			for _, n := range p.Nodes[i:min(i+lp.Size, len(p.Nodes))] {
				names = append(names, n.Name)
			}
			out = append(out, map[string]string{lp.Var: strings.Join(names, " ")})
		}
	case "unit":
		seen := map[string]bool{}
		for _, n := range p.Nodes {
			if n.Unit != "" && !seen[n.Unit] {
				seen[n.Unit] = true
				out = append(out, map[string]string{lp.Var: n.Unit})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: pool %s has no fabric units", lp.Var, p.Name)
		}
	}
	return out, nil
}

// assign writes the loop's value into its assignment line, as the reader
// does ("NODE='<node-name>'" becomes "NODE='gpu-0'").
func assign(lines []string, loops []Loop, vals map[string]string) []string {
	out := append([]string(nil), lines...)
	for _, lp := range loops {
		v, ok := vals[lp.Var]
		if !ok {
			continue
		}
		l := out[lp.Line]
		start := strings.Index(l, lp.Var+"='")
		end := strings.Index(l[start+len(lp.Var)+2:], "'")
		out[lp.Line] = l[:start] + lp.Var + "='" + v + "'" + l[start+len(lp.Var)+2+end+1:]
	}
	return out
}
