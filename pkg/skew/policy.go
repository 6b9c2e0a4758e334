package skew

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Status is the verdict of one finding.
type Status string

// Statuses, from fine to worst.
const (
	// StatusOK: inside the policy with room to spare.
	StatusOK Status = "ok"
	// StatusInfo: inventory only; no rule applies.
	StatusInfo Status = "info"
	// StatusEdge: inside the policy but exactly at its limit; the next
	// control-plane upgrade is blocked until this moves.
	StatusEdge Status = "edge"
	// StatusUnknown: the version could not be read or parsed.
	StatusUnknown Status = "unknown"
	// StatusViolation: outside the policy.
	StatusViolation Status = "violation"
)

// Rank orders statuses, worst highest.
func (s Status) Rank() int {
	switch s {
	case StatusViolation:
		return 4
	case StatusUnknown:
		return 3
	case StatusEdge:
		return 2
	case StatusInfo:
		return 1
	}
	return 0
}

// Word is the status's word in a table's STATUS column (pkg/cli's closed
// set): edge is WARN and violation FAIL. JSON writes the same word in lower
// case (MarshalText).
func (s Status) Word() string {
	switch s {
	case StatusOK:
		return cli.StatusOK.String()
	case StatusInfo:
		return cli.StatusInfo.String()
	case StatusEdge:
		return cli.StatusWarn.String()
	case StatusViolation:
		return cli.StatusFail.String()
	}
	return cli.StatusUnknown.String()
}

// MarshalText writes the status as every report's JSON and YAML do: the
// table's word in lower case ("warn" for edge, "fail" for violation).
func (s Status) MarshalText() ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return []byte(cli.Status(s.Word()).JSONWord()), nil
}

// UnmarshalText reads a status as MarshalText writes it, or as reports of
// gpufleet.dev/v1alpha1 did ("edge", "violation").
func (s *Status) UnmarshalText(b []byte) error {
	w := string(b)
	for _, st := range []Status{StatusOK, StatusInfo, StatusEdge, StatusUnknown, StatusViolation} {
		if w == string(st) || w == cli.Status(st.Word()).JSONWord() {
			*s = st
			return nil
		}
	}
	if w == "" {
		*s = ""
		return nil
	}
	return fmt.Errorf("status %q is not one of ok, info, warn, unknown, fail", w)
}

// Words are the status words Word returns, for a command's legend.
var Words = []cli.Status{cli.StatusOK, cli.StatusInfo, cli.StatusWarn, cli.StatusUnknown, cli.StatusFail}

// Rule identifiers, one per rule of the version-skew policy.
const (
	RuleAPIServerHA     = "apiserver-ha"
	RuleControllers     = "controllers-vs-apiserver"
	RuleKubelet         = "kubelet-vs-apiserver"
	RuleKubeProxy       = "kube-proxy-vs-apiserver"
	RuleKubeProxyNode   = "kube-proxy-vs-kubelet"
	RuleKubectl         = "kubectl-vs-apiserver"
	RuleInventory       = "inventory"
	RuleEmulation       = "emulation-version"
	RuleSupport         = "support-window"
	RuleFleetPolicy     = "fleet-policy"
	RulePatchCurrency   = "patch-currency"
	RuleUnknownKubelets = "kubelet-version-unknown"
)

// Finding is the verdict of one rule on one component instance or pool.
type Finding struct {
	// Component is kube-apiserver, kubelet, kube-proxy ...
	Component string `json:"component"`
	// Instance is the pod, pool ("pool h100-a") or source it concerns.
	Instance string `json:"instance,omitempty"`
	// Version is the component's version (a range for a mixed pool).
	Version string `json:"version,omitempty"`
	// Against is the version it is measured against.
	Against string `json:"against,omitempty"`
	// Skew is how many minors the component is behind what it is measured
	// against (negative: ahead).
	Skew int `json:"skew"`
	// Limit is the most minors behind the rule allows.
	Limit int `json:"limit"`
	// Rule names the rule.
	Rule string `json:"rule"`
	// Status is the verdict.
	Status Status `json:"status"`
	// Message explains the verdict in one sentence.
	Message string `json:"message"`
}

// CheckSummary condenses a check for reports and fleet views.
type CheckSummary struct {
	// APIServerOldest and APIServerNewest span the apiserver instances.
	APIServerOldest string `json:"apiServerOldest,omitempty"`
	APIServerNewest string `json:"apiServerNewest,omitempty"`
	// KubeletMin and KubeletMax span every kubelet.
	KubeletMin string `json:"kubeletMin,omitempty"`
	KubeletMax string `json:"kubeletMax,omitempty"`
	// Nodes counts the nodes.
	Nodes int `json:"nodes"`
	// MaxSkew is the most minors any component is behind the newest
	// apiserver: the fleet metric "max skew".
	MaxSkew int `json:"maxSkew"`
	// PoolsAtEdge are pools whose oldest kubelet is exactly at the limit.
	PoolsAtEdge []string `json:"poolsAtEdge,omitempty"`
	// Violations, Edge, Unknown and OK count the findings per status.
	Violations int `json:"violations"`
	Edge       int `json:"edge"`
	Unknown    int `json:"unknown"`
	OK         int `json:"ok"`
	// Status is the worst status.
	Status Status `json:"status"`
}

// KubeletMaxSkew is how many minors a kubelet (or kube-proxy) of version v
// may be behind kube-apiserver: three, or two for versions older than 1.25.
func KubeletMaxSkew(v Version) int {
	if v.Major < 1 || (v.Major == 1 && v.Minor < 25) {
		return 2
	}
	return 3
}

// Verdict applies a skew limit: behind is how many minors the component
// is behind its reference (negative when ahead). Being ahead by more than
// maxAhead or behind by more than maxBehind violates; being exactly at
// maxBehind (when maxBehind > 0) or maxAhead (when maxAhead > 0) is at the
// edge.
func Verdict(behind, maxBehind, maxAhead int) Status {
	switch {
	case behind > maxBehind || -behind > maxAhead:
		return StatusViolation
	case maxBehind > 0 && behind == maxBehind:
		return StatusEdge
	case maxAhead > 0 && -behind == maxAhead:
		return StatusEdge
	}
	return StatusOK
}

func worse(a, b Status) Status {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// Check applies every rule of the version-skew policy to the inventory.
// A component newer than an apiserver is measured against the oldest
// apiserver; a component older than an apiserver against the newest one,
// as the upstream policy does for HA control planes.
func Check(inv Inventory) ([]Finding, CheckSummary) {
	var fs []Finding
	sum := CheckSummary{}
	inv.Pools = NormalizePools(inv.Pools)
	oldest, newest, ok := inv.APIServerVersions()
	if !ok {
		return checkWithoutAPIServer(inv)
	}
	sum.APIServerOldest, sum.APIServerNewest = oldest.String(), newest.String()
	maxSkew := 0
	note := func(behind int) {
		if behind > maxSkew {
			maxSkew = behind
		}
	}

	// Rule 1: HA apiservers within one minor of each other.
	sv, err := ParseVersion(inv.Server.GitVersion)
	if err == nil {
		fs = append(fs, apiserverFinding("/version", sv, newest))
	}
	for _, c := range inv.Components {
		if c.Name != KindAPIServer {
			continue
		}
		if c.State != StateVisible {
			fs = append(fs, notVisible(c, "apiserver instances"))
			continue
		}
		v, err := ParseVersion(c.Version)
		if err != nil {
			fs = append(fs, unparsable(c, RuleAPIServerHA))
			continue
		}
		f := apiserverFinding(c.Instance, v, newest)
		note(f.Skew)
		fs = append(fs, f)
	}
	if emulating(inv.Server) {
		ev, _ := ParseVersion(inv.Server.EmulationVersion)
		msg := fmt.Sprintf("the apiserver %s emulates %s (--emulated-version, KEP-4330)", inv.Server.GitVersion, ev.MinorString())
		if inv.Server.MinCompatibilityVersion != "" {
			msg += fmt.Sprintf(" and stays compatible down to %s", inv.Server.MinCompatibilityVersion)
		}
		msg += fmt.Sprintf("; clients see %s APIs and features while the skew rules apply to the binary %s", ev.MinorString(), sv.MinorString())
		fs = append(fs, Finding{Component: KindAPIServer, Instance: "/version", Version: inv.Server.GitVersion, Against: inv.Server.EmulationVersion,
			Rule: RuleEmulation, Status: StatusInfo, Message: msg})
	}

	// Rule 2: controllers not newer than the oldest apiserver, at most one
	// minor older than the newest.
	for _, c := range inv.Components {
		switch c.Name {
		case KindControllerManager, KindScheduler, KindCloudControllerManager:
		default:
			continue
		}
		if c.State != StateVisible {
			fs = append(fs, notVisible(c, "instances"))
			continue
		}
		v, err := ParseVersion(c.Version)
		if err != nil {
			fs = append(fs, unparsable(c, RuleControllers))
			continue
		}
		f := rangeFinding(c.Name, c.Instance, v, v, oldest, newest, 1, RuleControllers)
		note(f.Skew)
		fs = append(fs, f)
	}

	// Rule 3: kubelets per pool, not newer than the oldest apiserver, at
	// most three (two below 1.25) minors older than the newest.
	var kMin, kMax Version
	haveK := false
	for _, p := range inv.Pools {
		sum.Nodes += p.Nodes
		inst := "pool " + p.Name
		lo, hi, ok := p.MinMax()
		if p.Unknown > 0 {
			fs = append(fs, Finding{Component: KindKubelet, Instance: inst, Rule: RuleUnknownKubelets, Status: StatusUnknown,
				Message: fmt.Sprintf("%d of %d nodes report no parsable kubelet version (%s)", p.Unknown, p.Nodes, strings.Join(p.UnknownNodes, ", "))})
		}
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
		f := rangeFinding(KindKubelet, inst, lo, hi, oldest, newest, KubeletMaxSkew(lo), RuleKubelet)
		f.Message += " (" + Nodes(p.Nodes-p.Unknown) + ")"
		if f.Status == StatusEdge && newest.MinorsAfter(lo) == KubeletMaxSkew(lo) {
			f.Message += "; upgrade this pool before the next control-plane upgrade"
			sum.PoolsAtEdge = append(sum.PoolsAtEdge, p.Name)
		}
		note(f.Skew)
		fs = append(fs, f)
	}
	if haveK {
		sum.KubeletMin, sum.KubeletMax = kMin.String(), kMax.String()
	}

	// Rule 4: kube-proxy like a kubelet against the apiservers, and within
	// three (two below 1.25) minors of every kubelet, either way.
	for _, c := range inv.Components {
		if c.Name != KindKubeProxy {
			continue
		}
		if c.State != StateVisible {
			fs = append(fs, notVisible(c, "its DaemonSet"))
			continue
		}
		v, err := ParseVersion(c.Version)
		if err != nil {
			fs = append(fs, unparsable(c, RuleKubeProxy))
			continue
		}
		lim := KubeletMaxSkew(v)
		f := rangeFinding(KindKubeProxy, c.Instance, v, v, oldest, newest, lim, RuleKubeProxy)
		note(f.Skew)
		fs = append(fs, f)
		if haveK {
			fs = append(fs, proxyKubeletFinding(c.Instance, v, kMin, kMax, lim))
		}
	}

	// Rule 5: kubectl within one minor of every apiserver.
	for _, c := range inv.Components {
		if c.Name != KindKubectl {
			continue
		}
		if c.State != StateVisible {
			fs = append(fs, Finding{Component: c.Name, Instance: c.Instance, Rule: RuleKubectl, Status: StatusInfo, Message: c.Source})
			continue
		}
		v, err := ParseVersion(c.Version)
		if err != nil {
			fs = append(fs, unparsable(c, RuleKubectl))
			continue
		}
		f := kubectlFinding(c.Instance, v, oldest, newest)
		note(f.Skew)
		fs = append(fs, f)
	}

	// Addons: inventory only.
	for _, c := range inv.Components {
		switch c.Name {
		case KindAPIServer, KindControllerManager, KindScheduler, KindCloudControllerManager, KindKubeProxy, KindKubectl:
			continue
		}
		msg := c.Source
		if msg == "" {
			msg = "inventory only: no skew rule applies"
		}
		if c.State != StateVisible {
			msg = c.State + ": " + c.Source
		}
		fs = append(fs, Finding{Component: c.Name, Instance: c.Instance, Version: c.Version, Rule: RuleInventory, Status: StatusInfo, Message: msg})
	}
	sum.MaxSkew = maxSkew
	return finish(fs, sum, inv)
}

func finish(fs []Finding, sum CheckSummary, inv Inventory) ([]Finding, CheckSummary) {
	sum.Status = StatusOK
	for _, f := range fs {
		switch f.Status {
		case StatusViolation:
			sum.Violations++
		case StatusEdge:
			sum.Edge++
		case StatusUnknown:
			sum.Unknown++
		case StatusOK:
			sum.OK++
		}
		sum.Status = worse(sum.Status, f.Status)
	}
	if sum.Status == StatusInfo {
		sum.Status = StatusOK
	}
	sort.Strings(sum.PoolsAtEdge)
	SortFindings(fs)
	return fs, sum
}

// SortFindings orders findings by component (control plane first), then
// instance and rule.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if ra, rb := componentRank(a.Component), componentRank(b.Component); ra != rb {
			return ra < rb
		}
		if a.Component != b.Component {
			return a.Component < b.Component
		}
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		return a.Rule < b.Rule
	})
}

func apiserverFinding(inst string, v, newest Version) Finding {
	behind := newest.MinorsAfter(v)
	f := Finding{Component: KindAPIServer, Instance: inst, Version: v.String(), Against: newest.String(), Skew: behind, Limit: 1,
		Rule: RuleAPIServerHA, Status: Verdict(behind, 1, 0)}
	switch f.Status {
	case StatusViolation:
		f.Message = fmt.Sprintf("HA apiservers may differ by one minor; this one is %d behind %s", behind, newest.MinorString())
	case StatusEdge:
		f.Message = fmt.Sprintf("apiservers are mixed (%s and %s): an upgrade is in progress; do not apply manifests that use APIs new in %s until every apiserver reports it",
			v.MinorString(), newest.MinorString(), newest.MinorString())
	default:
		f.Message = "the newest apiserver minor"
	}
	return f
}

// rangeFinding checks a component spanning lo..hi: not newer than the
// oldest apiserver, at most limit minors behind the newest.
func rangeFinding(comp, inst string, lo, hi, oldest, newest Version, limit int, rule string) Finding {
	ver := lo.String()
	if lo.Compare(hi) != 0 {
		ver = lo.String() + ".." + hi.String()
	}
	behind := newest.MinorsAfter(lo)
	ahead := hi.MinorsAfter(oldest)
	f := Finding{Component: comp, Instance: inst, Version: ver, Against: newest.String(), Skew: behind, Limit: limit, Rule: rule}
	st := Verdict(behind, limit, 0)
	switch {
	case ahead > 0:
		f.Status = StatusViolation
		f.Against = oldest.String()
		f.Skew = -ahead
		f.Message = fmt.Sprintf("%s %s is newer than the apiserver %s; it must never be", comp, hi.MinorString(), oldest.MinorString())
	case st == StatusViolation:
		f.Status = st
		f.Message = fmt.Sprintf("%s %s is %s behind the apiserver %s; the policy allows %d", comp, lo.MinorString(), Minors(behind), newest.MinorString(), limit)
	case st == StatusEdge:
		f.Status = st
		f.Message = fmt.Sprintf("%s %s is %s behind the apiserver %s, exactly the limit", comp, lo.MinorString(), Minors(behind), newest.MinorString())
	default:
		f.Status = StatusOK
		if behind == 0 {
			f.Message = "matches the apiserver"
		} else {
			f.Message = fmt.Sprintf("%d of %d allowed minors behind", behind, limit)
		}
	}
	if rule == RuleKubelet && lo.Major == 1 && lo.Minor < 25 && f.Status != StatusOK {
		f.Message += " (kubelets older than 1.25 may lag two minors, not three)"
	}
	return f
}

func proxyKubeletFinding(inst string, proxy, kMin, kMax Version, limit int) Finding {
	// Worst distance either way.
	older := kMax.MinorsAfter(proxy) // proxy behind the newest kubelet
	newer := proxy.MinorsAfter(kMin) // proxy ahead of the oldest kubelet
	f := Finding{Component: KindKubeProxy, Instance: inst, Version: proxy.String(), Limit: limit, Rule: RuleKubeProxyNode}
	st := Verdict(older, limit, limit)
	st2 := Verdict(-newer, limit, limit)
	if older >= newer {
		f.Against, f.Skew = kMax.String(), older
	} else {
		f.Against, f.Skew = kMin.String(), -newer
	}
	f.Status = worse(st, st2)
	switch f.Status {
	case StatusViolation:
		f.Message = fmt.Sprintf("kube-proxy %s and kubelets %s..%s are more than %d minors apart", proxy.MinorString(), kMin.MinorString(), kMax.MinorString(), limit)
	case StatusEdge:
		f.Message = fmt.Sprintf("kube-proxy %s and kubelets %s..%s are exactly %d minors apart", proxy.MinorString(), kMin.MinorString(), kMax.MinorString(), limit)
	default:
		f.Message = fmt.Sprintf("within %d minors of every kubelet", limit)
	}
	return f
}

func kubectlFinding(inst string, v, oldest, newest Version) Finding {
	behind := newest.MinorsAfter(v)
	ahead := v.MinorsAfter(oldest)
	f := Finding{Component: KindKubectl, Instance: inst, Version: v.String(), Against: newest.String(), Skew: behind, Limit: 1, Rule: RuleKubectl}
	switch {
	case behind > 1:
		f.Status = StatusViolation
		f.Message = fmt.Sprintf("kubectl %s is %d minors behind the apiserver %s; the policy allows one", v.MinorString(), behind, newest.MinorString())
	case ahead > 1:
		f.Status, f.Against, f.Skew = StatusViolation, oldest.String(), -ahead
		f.Message = fmt.Sprintf("kubectl %s is %d minors ahead of the apiserver %s; the policy allows one", v.MinorString(), ahead, oldest.MinorString())
	case behind == 1:
		f.Status = StatusEdge
		f.Message = "one minor behind the apiserver: the next control-plane upgrade puts it out of policy"
	case ahead == 1:
		f.Status, f.Against, f.Skew = StatusOK, oldest.String(), -ahead
		f.Message = "one minor ahead of the apiserver, as allowed"
	default:
		f.Status = StatusOK
		f.Message = "matches the apiserver"
	}
	return f
}

func notVisible(c Component, what string) Finding {
	msg := fmt.Sprintf("%s not visible (%s); a managed control plane does not show them", what, c.Source)
	st := StatusInfo
	if c.State == StateForbidden {
		// Not read is not known: UNKNOWN, so --fail-on=warning counts it.
		st = StatusUnknown
		msg = fmt.Sprintf("%s not checked: reading kube-system is forbidden (%s)", what, c.Source)
	}
	return Finding{Component: c.Name, Instance: c.Instance, Rule: RuleInventory, Status: st, Message: msg}
}

func unparsable(c Component, rule string) Finding {
	return Finding{Component: c.Name, Instance: c.Instance, Version: c.Version, Rule: rule, Status: StatusUnknown,
		Message: fmt.Sprintf("version %q does not parse (%s)", c.Version, c.Source)}
}

// emulating reports whether the apiserver emulates a minor other than its
// binary's (every 1.33+ apiserver reports an emulation version; it only
// matters when it differs).
func emulating(sv ServerVersion) bool {
	if sv.EmulationVersion == "" {
		return false
	}
	ev, err := ParseVersion(sv.EmulationVersion)
	if err != nil {
		return false
	}
	bv, err := ParseVersion(sv.GitVersion)
	return err == nil && bv.MinorsAfter(ev) != 0
}
