package runbooke2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Host segments are the lines a reader pastes on a node: the package
// manager, systemd, kubeadm, the k3s and RKE2 installers and CLIs. The
// lane does not run them. Each is parsed as bash parses it (bash -n and
// mvdan.cc/sh), each command is checked against what its tool accepts
// (kubeadm's own command tree and version policy through kubeadmcheck;
// apt-get, apt-mark, dnf, systemctl and the installers against their
// documented arguments and the node's package repository), and what it
// would change on the node is applied to the World, so that the lines
// after it see the node as the reader would.

// HostCommand is one checked host command.
type HostCommand struct {
	Node   string   `json:"node"`
	Line   string   `json:"line"`
	Checks []string `json:"checks"`
	Err    string   `json:"error,omitempty"`
}

// Hosts checks and applies host segments for one World.
type Hosts struct {
	W *World
	// NodeFiles is the directory of the nodes' files (writeNodeFiles), "" for
	// none.
	NodeFiles string
	// KubeadmCheck is the kubeadmcheck binary.
	KubeadmCheck string
}

// hostPrograms are the commands that need the node: pasted on the
// workstation they would run there (the lane's shims refuse them).
var hostPrograms = []string{"sudo", "apt", "apt-get", "apt-mark", "dnf", "yum", "systemctl", "kubeadm", "k3s", "rke2", "etcdctl", "etcdutl", "ssh"}

// Nodes resolves a segment's host to the world's nodes: a node's name,
// $NODE, each node of $NODES, each node of the unit ($UNIT of the step's
// pool).
func (h *Hosts) Nodes(host, pool string, env map[string]string) ([]*Node, error) {
	w := h.W
	var names []string
	switch {
	case host == "$NODE", host == "the node":
		// "the node" of a block pasted once per node is $NODE's.
		names = []string{env["NODE"]}
	case host == "each node of $NODES":
		names = strings.Fields(env["NODES"])
	case host == "each control-plane node", host == "each server node", host == "each other server", host == "each worker node":
		// A rollback's markers: the control-plane (server) nodes, those
		// but the first (the first server restored on its own), or the
		// nodes of the other pools.
		for _, p := range w.Pools {
			if p.ControlPlane == (host == "each worker node") {
				continue
			}
			for _, n := range p.Nodes {
				names = append(names, n.Name)
			}
		}
		if host == "each other server" && len(names) > 0 {
			names = names[1:]
		}
	case host == "the first server", host == "the server":
		// The server a rollback restores first (k3s, RKE2), the one of a
		// single-server cluster.
		for _, p := range w.Pools {
			if p.ControlPlane && len(p.Nodes) > 0 && len(names) == 0 {
				names = []string{p.Nodes[0].Name}
			}
		}
	case strings.HasPrefix(host, "each node of the unit"):
		p := w.Pool(pool)
		if p == nil {
			return nil, fmt.Errorf("%q: the step's pool %q is not the world's", host, pool)
		}
		for _, n := range p.Nodes {
			if n.Unit == env["UNIT"] {
				names = append(names, n.Name)
			}
		}
	default:
		names = []string{strings.Trim(host, `"'`)}
	}
	var out []*Node
	for _, n := range names {
		node, _ := w.Node(n)
		if node == nil {
			return nil, fmt.Errorf("%q names no node of the cluster (%q)", host, n)
		}
		out = append(out, node)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q names no node", host)
	}
	return out, nil
}

// Run checks a host segment's lines on each of its nodes and applies
// them. It stops at a node's first failing command, as a reader would.
func (h *Hosts) Run(lines []string, nodes []*Node, env map[string]string) []HostCommand {
	var out []HostCommand
	src := strings.Join(lines, "\n") + "\n"
	if err := bashN(src); err != nil {
		return []HostCommand{{Line: strings.TrimSpace(src), Err: "bash -n: " + err.Error()}}
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return []HostCommand{{Line: strings.TrimSpace(src), Err: "parse: " + err.Error()}}
	}
	for _, n := range nodes {
		for _, st := range f.Stmts {
			results := h.stmt(st, n, env)
			out = append(out, results...)
			if len(results) > 0 && results[len(results)-1].Err != "" {
				break
			}
		}
	}
	return out
}

// bashN runs bash -n: the syntax check of the shell that pastes it.
func bashN(src string) error {
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// call is one simple command of a host line, its words expanded.
type call struct {
	env  map[string]string // assignments before it (FOO=bar cmd)
	args []string
}

// calls flattens a command into its simple commands in order; a
// pipeline's commands come in order too.
func calls(c0 syntax.Command, env map[string]string) ([]call, error) {
	var out []call
	var walkErr error
	cfg := &expand.Config{Env: expand.ListEnviron(envList(env)...)}
	var walk func(c syntax.Command)
	walk = func(c syntax.Command) {
		switch x := c.(type) {
		case *syntax.CallExpr:
			cl := call{env: map[string]string{}}
			for _, a := range x.Assigns {
				v := ""
				if a.Value != nil {
					s, err := expand.Literal(cfg, a.Value)
					if err != nil {
						walkErr = err
					}
					v = s
				}
				cl.env[a.Name.Value] = v
			}
			fields, err := expand.Fields(cfg, x.Args...)
			if err != nil {
				walkErr = err
			}
			cl.args = fields
			out = append(out, cl)
		case *syntax.BinaryCmd:
			walk(x.X.Cmd)
			walk(x.Y.Cmd)
		}
	}
	walk(c0)
	return out, walkErr
}

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (h *Hosts) stmt(st *syntax.Stmt, n *Node, env map[string]string) []HostCommand {
	var line bytes.Buffer
	_ = syntax.NewPrinter().Print(&line, st)
	hc := HostCommand{Node: n.Name, Line: line.String(), Checks: []string{"bash -n", "parsed (mvdan.cc/sh)"}}
	for _, u := range units(st.Cmd) {
		cs, err := calls(u, env)
		if err != nil {
			hc.Err = "expanding: " + err.Error()
			break
		}
		var check string
		if bin, ok := u.(*syntax.BinaryCmd); ok && (bin.Op == syntax.Pipe || bin.Op == syntax.PipeAll) {
			check, err = h.pipeline(cs, n)
		} else {
			for _, c := range cs {
				if check, err = h.command(c, n); err != nil {
					break
				}
			}
		}
		hc.Checks = append(hc.Checks, check)
		if err != nil {
			hc.Err = err.Error()
			break
		}
	}
	return []HostCommand{hc}
}

// units splits a command at && and || into its commands and pipelines,
// run in order.
func units(c syntax.Command) []syntax.Command {
	if x, ok := c.(*syntax.BinaryCmd); ok && x.Op != syntax.Pipe && x.Op != syntax.PipeAll {
		return append(units(x.X.Cmd), units(x.Y.Cmd)...)
	}
	return []syntax.Command{c}
}

// pipeline checks a pipeline: an installer piped to sh, or a binary's
// --version piped to grep -F, which prints what the node's installed
// binary would.
func (h *Hosts) pipeline(cs []call, n *Node) (string, error) {
	if len(cs) > 0 && len(cs[0].args) > 0 && cs[0].args[0] == "curl" {
		return h.installer(cs, n)
	}
	if len(cs) == 2 && len(cs[0].args) == 2 && cs[0].args[1] == "--version" && len(cs[1].args) == 3 && cs[1].args[0] == "grep" && cs[1].args[1] == "-F" {
		bin := cs[0].args[0]
		if bin != h.W.Provider {
			return "", fmt.Errorf("%s: command not found (a %s node)", bin, h.W.Provider)
		}
		out := fmt.Sprintf("%s version %s (0000000)", bin, kubeletVersion(h.W.Provider, n.Host.Kubelet))
		if !strings.Contains(out, cs[1].args[2]) {
			return "", fmt.Errorf("grep -F %q: no match in %q: the node's %s is not the one the step installs", cs[1].args[2], out, bin)
		}
		return bin + " --version | grep -F: " + out, nil
	}
	return "", fmt.Errorf("a pipeline the lane does not know")
}

// command checks one simple command on node n and applies it.
func (h *Hosts) command(c call, n *Node) (string, error) {
	args := c.args
	if len(args) > 0 && args[0] == "sudo" {
		args = args[1:]
	}
	if len(args) == 0 {
		return "assignment", nil
	}
	switch args[0] {
	case "sed":
		return h.sed(args[1:], n)
	case "apt-mark":
		return aptMark(args[1:], n)
	case "apt-get":
		return h.aptGet(args[1:], n)
	case "dnf", "yum":
		return h.dnf(args[1:], n)
	case "systemctl":
		return h.systemctl(args[1:], n)
	case "kubeadm":
		return h.kubeadm(args[1:], n)
	case "k3s", "rke2":
		return h.etcdSnapshot(args[0], args[1:], n)
	case "cp":
		// Putting a saved unit env file back undoes what the installer
		// rewrote.
		if len(args) > 2 && strings.HasPrefix(args[len(args)-1], "/etc/systemd/system") {
			for _, a := range args[1 : len(args)-1] {
				if strings.HasSuffix(a, ".service.env") {
					n.Host.EnvWiped = false
				}
			}
		}
		return "cp: file operation, not run", nil
	case "mv", "mkdir", "tar", "gpg", "chmod", "install":
		return args[0] + ": file operation, not run", nil
	}
	return "", fmt.Errorf("%s: no check knows this host command", args[0])
}

var sedRepo = regexp.MustCompile(`^s#/v(1\.\d+)/#/v(1\.\d+)/#g?$`)

// sed switches the Kubernetes package repository: the deb line of
// /etc/apt/sources.list.d/kubernetes.list or the baseurl of
// /etc/yum.repos.d/kubernetes.repo
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/change-package-repository/).
// A pattern that matches nothing changes nothing, without an error.
func (h *Hosts) sed(args []string, n *Node) (string, error) {
	if len(args) != 3 || args[0] != "-i" {
		return "", fmt.Errorf("sed %s: want sed -i 's#/vFROM/#/vTO/#' FILE", strings.Join(args, " "))
	}
	m := sedRepo.FindStringSubmatch(args[1])
	if m == nil {
		return "", fmt.Errorf("sed expression %q is not a repository switch", args[1])
	}
	_, p := h.W.Node(n.Name)
	want := "/etc/apt/sources.list.d/kubernetes.list"
	if pm := packageManagerOf(p.OS); pm == "dnf" {
		want = "/etc/yum.repos.d/kubernetes.repo"
	} else if pm == "" {
		return "", fmt.Errorf("node %s runs %q, which has neither apt nor dnf", n.Name, p.OS)
	}
	if args[2] != want {
		return "", fmt.Errorf("sed: %s: No such file or directory (node %s runs %q: its repository is %s)", args[2], n.Name, p.OS, want)
	}
	if n.Host.Repo == m[1] {
		n.Host.Repo = m[2]
	}
	return "sed repository switch v" + m[1] + " -> v" + m[2], nil
}

// packageManagerOf tells a node's package manager from its OS image.
func packageManagerOf(os string) string {
	l := strings.ToLower(os)
	switch {
	case strings.Contains(l, "ubuntu"), strings.Contains(l, "debian"):
		return "apt"
	case strings.Contains(l, "rocky"), strings.Contains(l, "red hat"), strings.Contains(l, "alma"), strings.Contains(l, "fedora"), strings.Contains(l, "amazon linux"), strings.Contains(l, "centos"):
		return "dnf"
	}
	return ""
}

func aptMark(args []string, n *Node) (string, error) {
	if len(args) < 2 || (args[0] != "hold" && args[0] != "unhold") {
		return "", fmt.Errorf("apt-mark %s: want hold|unhold PACKAGE...", strings.Join(args, " "))
	}
	held := map[string]bool{}
	for _, p := range n.Host.Held {
		held[p] = true
	}
	for _, p := range args[1:] {
		held[p] = args[0] == "hold"
	}
	n.Host.Held = nil
	for _, p := range []string{"kubeadm", "kubectl", "kubelet"} {
		if held[p] {
			n.Host.Held = append(n.Host.Held, p)
		}
	}
	return "apt-mark " + args[0], nil
}

// debVersions are the versions of a package the node's repository
// offers: pkgs.k8s.io holds one minor per repository, its patches as
// <version>-1.1.
func debVersions(minor string) []string {
	var out []string
	for p := 0; p <= patches[minor]; p++ {
		out = append(out, fmt.Sprintf("%s.%d-1.1", minor, p))
	}
	return out
}

// pick returns the newest version matching a glob ("1.37.2-*", "1.37.*").
func pick(glob, minor string) string {
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(glob), `\*`, ".*") + "$")
	got := ""
	for _, v := range debVersions(minor) {
		if re.MatchString(v) {
			got = v
		}
	}
	return got
}

// aptGet checks apt-get update and install as apt-get reads them: install
// without -y prompts unless nothing changes; a held package changed with
// -y fails ("E: Held packages were changed and -y was used without
// --allow-change-held-packages.", apt's apt-private/private-install.cc);
// a version the repository lacks fails ("E: Version '1.38.1-*' for
// 'kubeadm' was not found").
func (h *Hosts) aptGet(args []string, n *Node) (string, error) {
	if _, p := h.W.Node(n.Name); packageManagerOf(p.OS) != "apt" {
		return "", fmt.Errorf("apt-get: command not found (node %s runs %q)", n.Name, p.OS)
	}
	if len(args) == 0 {
		return "", fmt.Errorf("apt-get: no operation")
	}
	if args[0] == "update" {
		return "apt-get update", nil
	}
	if args[0] != "install" {
		return "", fmt.Errorf("apt-get %s: not an operation the runbook needs", args[0])
	}
	yes, allowHeld := false, false
	var pkgs []string
	for _, a := range args[1:] {
		switch a {
		case "-y", "--yes", "--assume-yes", "-qy", "-yq":
			yes = true
		case "--allow-change-held-packages":
			allowHeld = true
		default:
			if strings.HasPrefix(a, "-") {
				return "", fmt.Errorf("apt-get install %s: option not checked", a)
			}
			pkgs = append(pkgs, a)
		}
	}
	if !yes {
		return "", fmt.Errorf("apt-get install without -y asks \"Do you want to continue? [Y/n]\" and reads the next pasted line")
	}
	for _, p := range pkgs {
		name, ver, _ := strings.Cut(p, "=")
		for _, held := range n.Host.Held {
			if held == name && !allowHeld {
				return "", fmt.Errorf("E: Held packages were changed and -y was used without --allow-change-held-packages.")
			}
		}
		got := pick(ver, n.Host.Repo)
		if got == "" {
			return "", fmt.Errorf("E: Version '%s' for '%s' was not found (the node's repository is v%s)", ver, name, n.Host.Repo)
		}
		install(n, name, strings.TrimSuffix(got, "-1.1"))
	}
	return "apt-get install " + strings.Join(pkgs, " ") + " (repository v" + n.Host.Repo + ")", nil
}

func install(n *Node, pkg, v string) {
	switch pkg {
	case "kubeadm":
		n.Host.Kubeadm = v
	case "kubelet":
		n.Host.Kubelet = v
	}
}

// dnf checks dnf install as the kubeadm upgrade guide runs it: the
// repository excludes the Kubernetes packages (exclude= in
// kubernetes.repo), so an install needs --disableexcludes=kubernetes
// ("All matches were filtered out by exclude filtering for argument").
func (h *Hosts) dnf(args []string, n *Node) (string, error) {
	if _, p := h.W.Node(n.Name); packageManagerOf(p.OS) != "dnf" {
		return "", fmt.Errorf("dnf: command not found (node %s runs %q)", n.Name, p.OS)
	}
	if len(args) == 0 || args[0] != "install" {
		return "", fmt.Errorf("dnf %s: not an operation the runbook needs", strings.Join(args, " "))
	}
	yes, disabled := false, false
	var pkgs []string
	for _, a := range args[1:] {
		switch {
		case a == "-y" || a == "--assumeyes":
			yes = true
		case a == "--disableexcludes=kubernetes":
			disabled = true
		case strings.HasPrefix(a, "-"):
			return "", fmt.Errorf("dnf install %s: option not checked", a)
		default:
			pkgs = append(pkgs, a)
		}
	}
	if !yes {
		return "", fmt.Errorf("dnf install without -y asks \"Is this ok [y/N]:\" and reads the next pasted line")
	}
	for _, p := range pkgs {
		if !disabled {
			return "", fmt.Errorf("All matches were filtered out by exclude filtering for argument: %s", p)
		}
		m := regexp.MustCompile(`^(kubeadm|kubelet|kubectl)-(.+)$`).FindStringSubmatch(p)
		if m == nil {
			return "", fmt.Errorf("dnf install %s: not a Kubernetes package of the form NAME-VERSION", p)
		}
		got := pick(m[2], n.Host.Repo)
		if got == "" {
			return "", fmt.Errorf("No match for argument: %s (the node's repository is v%s)", p, n.Host.Repo)
		}
		install(n, m[1], strings.TrimSuffix(got, "-1.1"))
	}
	return "dnf install " + strings.Join(pkgs, " ") + " (repository v" + n.Host.Repo + ")", nil
}

// systemctl restarts units: the kubelet takes the installed package's
// version; rke2-server and rke2-agent the installed RKE2.
func (h *Hosts) systemctl(args []string, n *Node) (string, error) {
	if len(args) == 0 {
		return "", fmt.Errorf("systemctl: no verb")
	}
	switch args[0] {
	case "daemon-reload":
		return "systemctl daemon-reload", nil
	case "restart":
		if len(args) != 2 {
			return "", fmt.Errorf("systemctl restart %s: want one unit", strings.Join(args[1:], " "))
		}
		switch args[1] {
		case "kubelet":
			// Cluster API's kubeadm bootstrap provider runs the kubelet as
			// kubeadm's kubelet.service.
			if h.W.Provider != "kubeadm" && h.W.Provider != "capi" {
				return "", fmt.Errorf("Failed to restart kubelet.service: Unit kubelet.service not found. (a %s node runs its kubelet in the %s service)", h.W.Provider, h.W.Provider)
			}
			n.Kubelet = n.Host.Kubelet
		case "k3s", "k3s-agent":
			if h.W.Provider != "k3s" {
				return "", fmt.Errorf("Failed to restart %s.service: Unit %s.service not found.", args[1], args[1])
			}
			_, p := h.W.Node(n.Name)
			if (args[1] == "k3s") != p.ControlPlane {
				return "", fmt.Errorf("Failed to restart %s.service: Unit %s.service not found. (node %s is a k3s %s)", args[1], args[1], n.Name, map[bool]string{true: "server", false: "agent"}[p.ControlPlane])
			}
			if n.Host.EnvWiped {
				return "", fmt.Errorf("%s restarts without K3S_URL and K3S_TOKEN: the installer rewrote its env file without them (install.sh create_env_file) and it no longer finds its server", args[1])
			}
			h.activate(n, n.Host.Kubelet)
		case "rke2-server", "rke2-agent":
			if h.W.Provider != "rke2" {
				return "", fmt.Errorf("Failed to restart %s.service: Unit %s.service not found.", args[1], args[1])
			}
			_, p := h.W.Node(n.Name)
			if (args[1] == "rke2-server") != p.ControlPlane {
				return "", fmt.Errorf("Failed to restart %s.service: Unit %s.service not found. (node %s is an %s)", args[1], args[1], n.Name, map[bool]string{true: "server", false: "agent"}[p.ControlPlane])
			}
			h.activate(n, n.Host.Kubelet)
		default:
			return "", fmt.Errorf("systemctl restart %s: not a unit the runbook's nodes run", args[1])
		}
		return "systemctl restart " + args[1], nil
	}
	return "", fmt.Errorf("systemctl %s: not a verb the runbook needs", args[0])
}

// activate moves a k3s or RKE2 node to its installed version: the binary
// carries the kubelet, and on a server the apiserver.
func (h *Hosts) activate(n *Node, v string) {
	n.Kubelet = v
	if h.NodeFiles != "" {
		// What the binary now reports over ssh (nodeSSH's --version).
		_ = os.WriteFile(filepath.Join(h.NodeFiles, n.Name, laneVersion), []byte(kubeletVersion(h.W.Provider, v)+"\n"), 0o644)
	}
	if _, p := h.W.Node(n.Name); p.ControlPlane {
		n.Host.ControlPlane = v
		h.W.ControlPlane = lowestServer(h.W)
	}
}

func lowestServer(w *World) string {
	low := ""
	for _, p := range w.Pools {
		if !p.ControlPlane {
			continue
		}
		for _, n := range p.Nodes {
			if low == "" || minorNum(n.Host.ControlPlane) < minorNum(low) {
				low = n.Host.ControlPlane
			}
		}
	}
	return low
}

type kubeadmResult struct {
	Command string   `json:"command"`
	Prompts bool     `json:"prompts"`
	Errors  []string `json:"errors"`
}

// kubeadm checks a kubeadm command line with kubeadm's own command tree
// and version policy (kubeadmcheck), the node's installed kubeadm as
// kubeadm's version, and applies upgrade apply and upgrade node.
func (h *Hosts) kubeadm(args []string, n *Node) (string, error) {
	w := h.W
	if w.Provider != "kubeadm" {
		return "", fmt.Errorf("kubeadm: command not found (a %s node)", w.Provider)
	}
	var kubelets []string
	for _, p := range w.Pools {
		for _, x := range p.Nodes {
			kubelets = append(kubelets, "v"+x.Kubelet)
		}
	}
	cmd := exec.Command(h.KubeadmCheck, append([]string{"-cluster", "v" + w.ControlPlane, "-kubeadm", "v" + n.Host.Kubeadm, "-kubelets", strings.Join(kubelets, ","), "--"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubeadmcheck: %v: %s", err, stderr.String())
	}
	var r kubeadmResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return "", fmt.Errorf("kubeadmcheck: %v", err)
	}
	check := "kubeadm's command tree (kubeadmcheck, kubeadm v" + n.Host.Kubeadm + " on the node): " + r.Command
	if len(r.Errors) > 0 {
		return check, fmt.Errorf("%s: %s", r.Command, strings.Join(r.Errors, "; "))
	}
	if r.Prompts {
		return check, fmt.Errorf("%s asks \"[upgrade] Are you sure you want to proceed? [y/N]\" on standard input (kubeadm cmd/util InteractivelyConfirmAction) and reads the next pasted line: pass --yes", r.Command)
	}
	_, p := w.Node(n.Name)
	switch r.Command {
	case "kubeadm upgrade apply":
		if !p.ControlPlane {
			return check, fmt.Errorf("kubeadm upgrade apply on %s, which is not a control-plane node", n.Name)
		}
		v := strings.TrimPrefix(firstPositional(args[2:]), "v")
		n.Host.ControlPlane = v
		w.ControlPlane = v
		check += ", version policy against the cluster at v" + w.ControlPlane
	case "kubeadm reset":
		n.Host.Reset = true
	case "kubeadm join":
		// A reset node joins with the kubelet its packages installed.
		if p.ControlPlane {
			return check, fmt.Errorf("kubeadm join on %s, a control-plane node: the runbook rejoins workers only", n.Name)
		}
		// kubeadm join refuses a Node of its name whose Ready condition
		// is True (cmd/kubeadm/app/cmd/phases/join/kubelet.go: "a Node
		// with name %q and status %q already exists in the cluster"); the
		// lane's Node is Unknown only once a reset was seen by the
		// control plane (Mirror.Sync), so a join pasted without the
		// reset first is refused.
		if !n.Host.Reset {
			return check, fmt.Errorf("kubeadm join on %s: a Node with name %q and status \"Ready\" already exists in the cluster (no kubeadm reset stopped its kubelet)", n.Name, n.Name)
		}
		n.Host.Reset = false
		n.Kubelet = n.Host.Kubelet
	case "kubeadm upgrade node":
		if p.ControlPlane {
			if minorNum(n.Host.Kubeadm) < minorNum(w.ControlPlane) {
				return check, fmt.Errorf("kubeadm upgrade node on %s: kubeadm v%s is older than the cluster's v%s", n.Name, n.Host.Kubeadm, w.ControlPlane)
			}
			n.Host.ControlPlane = w.ControlPlane
		}
	}
	return check, nil
}

func firstPositional(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// unsudo is the command sudo runs for c (sudo VAR=value ... CMD ARGS):
// its environment is sudo's VAR=value arguments only (env_reset).
func unsudo(c call) call {
	if len(c.args) == 0 || c.args[0] != "sudo" {
		return c
	}
	out := call{env: map[string]string{}}
	args := c.args[1:]
	for len(args) > 0 {
		k, v, ok := strings.Cut(args[0], "=")
		if !ok || k == "" || strings.HasPrefix(k, "-") {
			break
		}
		out.env[k] = v
		args = args[1:]
	}
	out.args = args
	return out
}

var channel = regexp.MustCompile(`^(stable|latest|testing|v1\.\d+)$`)

// installer checks `curl -sfL https://get.k3s.io | ENV sh -s - ARGS` and
// the RKE2 equivalent. The k3s installer takes the command (server or
// agent) and flags as its arguments and writes every K3S_ variable of
// its environment into the service's environment file, replacing the old
// one (install.sh create_env_file, k3s-io/k3s@0136cf2): an agent whose
// K3S_URL and K3S_TOKEN are not passed again loses them. RKE2's installer
// takes INSTALL_RKE2_CHANNEL and INSTALL_RKE2_TYPE and starts nothing
// (https://docs.rke2.io/upgrades/manual_upgrade).
//
// The shell may run under sudo, with the installer's variables on sudo's
// command line (sudo INSTALL_RKE2_CHANNEL=v1.37 sh -): sudo sets the
// VAR=value arguments before the command in the command's environment
// and, with sudoers' env_reset (on by default), passes none of its own
// environment's (sudo(8) and sudoers(5), sudo 1.9): so variables set
// before sudo do not reach the installer.
func (h *Hosts) installer(cs []call, n *Node) (string, error) {
	if len(cs) == 2 {
		cs[1] = unsudo(cs[1])
	}
	if len(cs) != 2 || len(cs[0].args) < 2 || cs[0].args[0] != "curl" || len(cs[1].args) == 0 || cs[1].args[0] != "sh" {
		return "", fmt.Errorf("a pipeline the lane does not know: want curl URL | ENV sh ... or curl URL | sudo ENV sh ...")
	}
	url := cs[0].args[len(cs[0].args)-1]
	sh := cs[1]
	_, p := h.W.Node(n.Name)
	switch url {
	case "https://get.k3s.io":
		if h.W.Provider != "k3s" {
			return "", fmt.Errorf("the k3s installer on a %s node", h.W.Provider)
		}
		ch := sh.env["INSTALL_K3S_CHANNEL"]
		if !channel.MatchString(ch) {
			return "", fmt.Errorf("INSTALL_K3S_CHANNEL=%q is not a k3s channel", ch)
		}
		args := sh.args[1:]
		if len(args) < 2 || args[0] != "-s" || args[1] != "-" {
			return "", fmt.Errorf("sh %s: the installer's arguments follow sh -s -", strings.Join(args, " "))
		}
		cmd := "server"
		if len(args) > 2 && !strings.HasPrefix(args[2], "-") {
			cmd = args[2]
		} else if sh.env["K3S_URL"] != "" {
			cmd = "agent"
		}
		if (cmd == "server") != p.ControlPlane {
			return "", fmt.Errorf("the installer would make %s a k3s %s; it is a%s", n.Name, cmd, map[bool]string{true: " server", false: "n agent"}[p.ControlPlane])
		}
		wiped := cmd == "agent" && (sh.env["K3S_URL"] == "" || (sh.env["K3S_TOKEN"] == "" && sh.env["K3S_TOKEN_FILE"] == ""))
		if !strings.HasPrefix(sh.env["K3S_URL"], "https://") && sh.env["K3S_URL"] != "" {
			return "", fmt.Errorf("Only https:// URLs are supported for K3S_URL (have %s)", sh.env["K3S_URL"])
		}
		v := Patch(strings.TrimPrefix(ch, "v"))
		if sh.env["INSTALL_K3S_SKIP_START"] == "true" {
			// Installed, started by the next systemctl restart.
			n.Host.Kubelet, n.Host.EnvWiped = v, wiped
			return "k3s installer: channel " + ch + ", " + cmd + ", not started", nil
		}
		if wiped {
			return "", fmt.Errorf("k3s agent install without K3S_URL and K3S_TOKEN: the installer rewrites %s's environment file without them (install.sh create_env_file) and restarts the agent, which no longer finds its server", n.Name)
		}
		n.Host.Kubelet = v
		h.activate(n, v)
		return "k3s installer: channel " + ch + ", " + cmd, nil
	case "https://get.rke2.io":
		if h.W.Provider != "rke2" {
			return "", fmt.Errorf("the RKE2 installer on a %s node", h.W.Provider)
		}
		ch := sh.env["INSTALL_RKE2_CHANNEL"]
		if !channel.MatchString(ch) {
			return "", fmt.Errorf("INSTALL_RKE2_CHANNEL=%q is not an RKE2 channel", ch)
		}
		typ := sh.env["INSTALL_RKE2_TYPE"]
		if typ == "" {
			typ = "server"
		}
		if (typ == "server") != p.ControlPlane {
			return "", fmt.Errorf("the installer would install RKE2 %s on %s, which is a%s", typ, n.Name, map[bool]string{true: " server", false: "n agent"}[p.ControlPlane])
		}
		// The installer only installs; systemctl restart moves the node.
		n.Host.Kubelet = Patch(strings.TrimPrefix(ch, "v"))
		return "RKE2 installer: channel " + ch + ", " + typ, nil
	}
	return "", fmt.Errorf("curl %s | sh: not an installer the lane knows", url)
}

// etcdSnapshot checks k3s and RKE2 etcd-snapshot save/ls: embedded etcd
// only (https://docs.k3s.io/cli/etcd-snapshot).
func (h *Hosts) etcdSnapshot(bin string, args []string, n *Node) (string, error) {
	if bin != h.W.Provider {
		return "", fmt.Errorf("%s: command not found (a %s node)", bin, h.W.Provider)
	}
	_, p := h.W.Node(n.Name)
	if !p.ControlPlane {
		return "", fmt.Errorf("%s etcd-snapshot on %s, which is not a server", bin, n.Name)
	}
	if len(args) == 0 || args[0] != "etcd-snapshot" {
		return "", fmt.Errorf("%s %s: not a subcommand the runbook needs", bin, strings.Join(args, " "))
	}
	if !p.Etcd {
		return "", fmt.Errorf("%s etcd-snapshot: the datastore is not embedded etcd", bin)
	}
	if len(args) > 1 && args[1] == "save" {
		if len(args) != 4 || args[2] != "--name" {
			return "", fmt.Errorf("%s etcd-snapshot save %s: want --name NAME", bin, strings.Join(args[2:], " "))
		}
		h.W.Snapshots = append(h.W.Snapshots, args[3])
	}
	return bin + " etcd-snapshot " + strings.Join(args[1:], " "), nil
}
