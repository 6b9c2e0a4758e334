package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// removedAPIsGate asks pkg/deprecations for every use of an API removed at
// the target: the apiserver's metric, object writers, Helm releases and
// CRDs. Sources that cannot be read are named; the gate is UNKNOWN when
// none found a removal and at least one could not read.
func (r *Runner) removedAPIsGate(ctx context.Context, metrics func(context.Context) ([]byte, error)) (Gate, []string) {
	target, err := apilifecycle.ParseRelease(r.Target.MinorString())
	if err != nil {
		return Gate{Status: StatusUnknown, Message: err.Error()}, nil
	}
	tab := apilifecycle.Builtin()
	var served *dep.Served
	if r.Discovery != nil {
		served, _ = dep.Discover(r.Discovery)
	}
	type src struct {
		name dep.Source
		fs   []dep.Finding
		err  error
	}
	srcs := []src{{name: dep.SourceMetrics}, {name: dep.SourceObjects}, {name: dep.SourceHelm}, {name: dep.SourceCRDs}}
	var wg sync.WaitGroup
	wg.Add(len(srcs))
	go func() {
		defer wg.Done()
		text, err := metrics(ctx)
		if err != nil {
			srcs[0].err = fmt.Errorf("get /metrics: %w", err)
			return
		}
		srcs[0].fs, srcs[0].err = dep.ReadMetrics(bytes.NewReader(text), "(kubeconfig server)")
	}()
	go func() {
		defer wg.Done()
		if r.Dynamic == nil || served == nil {
			srcs[1].err = errors.New("discovery failed")
			return
		}
		or, err := (&dep.ObjectsReader{Dynamic: r.Dynamic, Table: tab, Served: served, PageSize: r.page(), Listed: r.listed}).Read(ctx, target)
		srcs[1].fs, srcs[1].err = or.Findings, err
	}()
	go func() {
		defer wg.Done()
		hr, err := r.helm(ctx)
		srcs[2].fs, srcs[2].err = hr.Findings, err
	}()
	go func() {
		defer wg.Done()
		if r.Ext == nil {
			srcs[3].err = errors.New("no apiextensions client")
			return
		}
		fs, _, err := (&dep.CRDReader{Client: r.Ext, List: r.crds}).Read(ctx)
		srcs[3].fs, srcs[3].err = fs, err
	}()
	wg.Wait()
	var raw []dep.Finding
	var failed []string
	for _, s := range srcs {
		raw = append(raw, s.fs...)
		if s.err != nil {
			failed = append(failed, fmt.Sprintf("source %s not read: %v", s.name, s.err))
		}
	}
	t := dep.Target{Release: target}
	if served != nil {
		t.Served = served.Serves
	}
	fs := dep.Classify(tab, t, raw)
	var removed, callers []string
	deprecated := 0
	for _, f := range fs {
		switch f.Status {
		case dep.StatusRemoved:
			key := fmt.Sprintf("%s %s %s %s", f.Source, f.Location, f.APIVersion, f.Kind)
			callers = append(callers, key)
			line := fmt.Sprintf("%s: %s %s at %s", f.Source, f.APIVersion, strings.TrimSpace(f.Kind+" "+f.Resource), f.Location)
			if f.Replacement != "" {
				line += "; use " + f.Replacement
			}
			removed = append(removed, line)
		case dep.StatusDeprecated:
			deprecated++
		}
	}
	sort.Strings(callers)
	callers = dedupe(callers)
	removed = dedupe(removed)
	cmd := fmt.Sprintf("kubectl deprecations --target v%s", r.Target.MinorString())
	// Up to 50 uses: each is a caller to fix before the upgrade.
	ev := removed
	if len(ev) > 50 {
		ev = append(append([]string(nil), removed[:50]...), fmt.Sprintf("... and %d more", len(removed)-50))
	}
	ev = append(ev, failed...)
	switch {
	case len(removed) > 0:
		return Gate{Status: StatusFail, Message: fmt.Sprintf("%s of APIs removed in %s", cli.Plural(len(removed), "use"), r.Target.MinorString()), Evidence: ev, Command: cmd}, callers
	case len(failed) > 0:
		return Gate{Status: StatusUnknown, Message: fmt.Sprintf("no removed API found, but %d of 4 sources could not be read", len(failed)), Evidence: ev, Command: cmd}, callers
	}
	msg := fmt.Sprintf("no API removed in %s is in use (metric, objects, Helm releases, CRDs)", r.Target.MinorString())
	if deprecated > 0 {
		msg += fmt.Sprintf("; %d uses of deprecated APIs", deprecated)
	}
	return Gate{Status: StatusPass, Message: msg, Command: cmd}, callers
}

// listed hands the removed-APIs gate's object scan the resources another
// gate reads whole anyway, so that each is listed once; false when that
// read failed (the scan lists it itself and reports its own error).
func (r *Runner) listed(ctx context.Context, gr schema.GroupResource) ([]metav1.Object, bool) {
	var objs []metav1.Object
	switch gr {
	case schema.GroupResource{Group: "apps", Resource: "deployments"}:
		deps, err := r.deployments(ctx)
		if err != nil {
			return nil, false
		}
		for _, d := range deps {
			objs = append(objs, d)
		}
	case schema.GroupResource{Group: "apps", Resource: "daemonsets"}:
		dss, err := r.daemonSets(ctx)
		if err != nil {
			return nil, false
		}
		for _, d := range dss {
			objs = append(objs, d)
		}
	case schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
		schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:
		hooks, err := r.webhooks(ctx)
		if err != nil {
			return nil, false
		}
		if gr.Resource == "validatingwebhookconfigurations" {
			for i := range hooks.Validating {
				objs = append(objs, &hooks.Validating[i])
			}
		} else {
			for i := range hooks.Mutating {
				objs = append(objs, &hooks.Mutating[i])
			}
		}
	case schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:
		if r.Ext == nil {
			return nil, false
		}
		crds, err := r.crds(ctx)
		if err != nil {
			return nil, false
		}
		for _, c := range crds {
			objs = append(objs, c)
		}
	default:
		return nil, false
	}
	return objs, true
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// addonsGate finds the addons in every namespace (one list of Deployments
// and one of DaemonSets, and the Helm releases the removed-APIs gate reads)
// and judges each against the compatibility table. Data older than
// StaleAfter makes the gate WARN at least: releases since are missing.
func (r *Runner) addonsGate(ctx context.Context, site func() *skew.Inventory) (Gate, []Addon) {
	var ws []skew.AddonWorkload
	deps, err := r.deployments(ctx)
	if err != nil {
		return unknown("list deployments", err), nil
	}
	for _, d := range deps {
		ws = append(ws, skew.AddonWorkload{Kind: "deployment", Namespace: d.Namespace, Name: d.Name, Labels: d.Labels, Containers: d.Spec.Template.Spec.Containers})
	}
	dss, err := r.daemonSets(ctx)
	if err != nil {
		return unknown("list daemonsets", err), nil
	}
	for _, d := range dss {
		ws = append(ws, skew.AddonWorkload{Kind: "daemonset", Namespace: d.Namespace, Name: d.Name, Labels: d.Labels, Containers: d.Spec.Template.Spec.Containers})
	}
	var notes []string
	hr, err := r.helm(ctx)
	if err != nil {
		notes = append(notes, fmt.Sprintf("Helm releases not read (%v): addons found by their workloads only", err))
	}
	addons := findAddons(ws, hr.Decoded)
	if len(addons) == 0 {
		return Gate{Status: StatusPass, Message: "no known addon found (Deployments, DaemonSets and Helm releases in every namespace)", Evidence: notes, Command: "kubectl skew compat"}, nil
	}
	st := StatusPass
	var ev []string
	counts := map[Status]int{}
	worstCmd := ""
	column := ColumnKubernetes
	if inv := site(); inv != nil {
		column = ColumnOf(skew.DetectProvider(*inv).Provider)
	}
	for _, a := range addons {
		v := r.Compat.JudgeOn(a.Name, a.Version, r.Target, column)
		counts[v.Status]++
		line := fmt.Sprintf("%s: %s %s/%s (%s): %s", v.Status, a.Name, a.Namespace, a.Workload, orNone(a.Version), v.Message)
		if v.Status == StatusUnknown && v.Check != "" {
			line += "; check by hand: " + v.Check
		}
		ev = append(ev, line)
		if v.Status.Rank() > st.Rank() {
			st = v.Status
			worstCmd = addonCommand(a)
			if v.Status == StatusUnknown && v.Check != "" {
				worstCmd = v.Check
			}
		}
	}
	sort.SliceStable(ev, func(i, j int) bool { return statusOfLine(ev[i]).Rank() > statusOfLine(ev[j]).Rank() })
	msg := fmt.Sprintf("%s against %s: %d pass, %d warn, %d fail, %d unknown (compatibility data from %s)", cli.Plural(len(addons), "addon"), r.Target.MinorString(),
		counts[StatusPass], counts[StatusWarn], counts[StatusFail], counts[StatusUnknown], r.Compat.DataDate)
	if now := r.now(); r.Compat.Stale(now) {
		days := int(r.Compat.Age(now).Hours() / 24)
		ev = append(ev, fmt.Sprintf("WARN: the compatibility data is from %s, %s old (over %d): addon releases since are not in it; read each row's source again and pass the table with --compat FILE",
			r.Compat.DataDate, cli.Plural(days, "day"), int(StaleAfter.Hours()/24)))
		msg += fmt.Sprintf("; data %s old", cli.Plural(days, "day"))
		st = Worse(st, StatusWarn)
	}
	if worstCmd == "" {
		worstCmd = "kubectl skew compat"
	}
	return Gate{Status: st, Message: msg, Evidence: capLines(append(ev, notes...)), Command: worstCmd}, addons
}

func orNone(s string) string {
	if s == "" {
		return "no version"
	}
	return s
}

func statusOfLine(s string) Status {
	i := strings.Index(s, ":")
	if i < 0 {
		return StatusPass
	}
	return Status(s[:i])
}

// webhooksGate checks every admission webhook and every CRD conversion
// webhook with pkg/crdmigrate's health check: failurePolicy Fail with no
// ready endpoint or no Service fails; webhooks that intercept kube-system,
// nodes or leases, and long timeouts, warn.
func (r *Runner) webhooksGate(ctx context.Context) Gate {
	hooks, err := r.webhooks(ctx)
	if err != nil {
		return unknown("list validatingwebhookconfigurations and mutatingwebhookconfigurations", err)
	}
	all, err := hooks.All(ctx, r.Kube)
	if err != nil {
		return unknown("read webhook services and endpointslices", err)
	}
	var fails, warns []string
	cmd := ""
	for _, h := range all {
		id := fmt.Sprintf("%s %s (%s)", kindWord(h.Kind), h.Name, h.Configuration)
		cfgKind := "validatingwebhookconfiguration"
		if h.Kind == crdmigrate.KindMutating {
			cfgKind = "mutatingwebhookconfiguration"
		}
		if h.Blocks() {
			fails = append(fails, fmt.Sprintf("%s: failurePolicy %s and %s at %s", id, h.FailurePolicy, h.Detail, h.Target))
			if cmd == "" {
				cmd = webhookCmd(h.WebhookHealth, cfgKind, h.Configuration)
			}
		}
		if what := systemMatches(h); len(what) > 0 && h.FailurePolicy != string(admissionv1.Ignore) {
			warns = append(warns, fmt.Sprintf("%s intercepts %s with failurePolicy %s: if it is down mid-upgrade it can wedge the control plane", id, strings.Join(what, ", "), h.FailurePolicy))
		}
		if h.TimeoutSeconds > 15 {
			warns = append(warns, fmt.Sprintf("%s has timeoutSeconds %d: every matching request can wait that long", id, h.TimeoutSeconds))
		}
	}
	convs := 0
	if r.Ext != nil {
		crds, err := r.crds(ctx)
		if err != nil {
			return unknown("list customresourcedefinitions", err)
		}
		for _, crd := range crds {
			if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != "Webhook" {
				continue
			}
			convs++
			h, err := hooks.Check(ctx, r.Kube, crd)
			if err != nil {
				return unknown("read conversion webhook services", err)
			}
			if h.Conversion != nil && h.Conversion.Blocks() {
				fails = append(fails, fmt.Sprintf("conversion webhook of CRD %s: %s at %s", crd.Name, h.Conversion.Detail, h.Conversion.Target))
				if cmd == "" {
					cmd = webhookCmd(*h.Conversion, "customresourcedefinition", crd.Name)
				}
			}
		}
	}
	sort.Strings(fails)
	sort.Strings(warns)
	ev := capLines(append(fails, warns...))
	switch {
	case len(fails) > 0:
		return Gate{Status: StatusFail, Message: cli.Plural(len(fails), "webhook") + cli.Agree(len(fails), " fails", " fail") + " closed and cannot be reached", Evidence: ev, Command: cmd}
	case len(warns) > 0:
		return Gate{Status: StatusWarn, Message: cli.Plural(len(warns), "webhook risk") + " during the upgrade", Evidence: ev, Command: "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o wide"}
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("%s and %s reachable", cli.Plural(len(all), "admission webhook"), cli.Plural(convs, "conversion webhook")), Command: "kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations"}
}

func kindWord(k string) string {
	switch k {
	case crdmigrate.KindValidating:
		return "validating webhook"
	case crdmigrate.KindMutating:
		return "mutating webhook"
	}
	return "webhook"
}

func webhookCmd(h crdmigrate.WebhookHealth, kind, name string) string {
	if h.ServiceName != "" {
		return fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s; kubectl get %s %s -o yaml", h.ServiceNamespace, h.ServiceName, kind, name)
	}
	return fmt.Sprintf("kubectl get %s %s -o yaml", kind, name)
}

// systemMatches names what of the control plane's own traffic a webhook
// intercepts: kube-system objects (no namespace selector), nodes, leases.
func systemMatches(h crdmigrate.AdmissionWebhook) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, rule := range h.Rules {
		groups := rule.APIGroups
		for _, res := range rule.Resources {
			base := strings.SplitN(res, "/", 2)[0]
			inGroup := func(g string) bool {
				for _, x := range groups {
					if x == "*" || x == g {
						return true
					}
				}
				return false
			}
			if (base == "*" || base == "nodes") && inGroup("") {
				add("nodes")
			}
			if (base == "*" || base == "leases") && inGroup("coordination.k8s.io") {
				add("leases")
			}
			scope := admissionv1.AllScopes
			if rule.Scope != nil {
				scope = *rule.Scope
			}
			if scope != admissionv1.ClusterScope && excludesNoSystem(h.NamespaceSelector) && (base == "*" || base == "pods" || base == "configmaps" || base == "leases") {
				add("kube-system " + base)
			}
		}
	}
	return out
}

// excludesNoSystem reports whether a namespace selector lets kube-system
// objects through: none, or one that does not mention kube-system.
func excludesNoSystem(s *metav1.LabelSelector) bool {
	if s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0) {
		return true
	}
	for _, e := range s.MatchExpressions {
		for _, v := range e.Values {
			if v == metav1.NamespaceSystem {
				return false
			}
		}
	}
	return len(s.MatchLabels) == 0
}

// Metric names of the etcd database size the apiserver reports.
// k8s.io/apiserver@v0.37.2 pkg/storage/etcd3/metrics/metrics.go declares
// apiserver_storage_size_bytes{storage_cluster_id} (STABLE: "Size of the
// storage database file physically allocated in bytes"); older apiservers
// report apiserver_storage_db_total_size_in_bytes{endpoint} instead.
var etcdSizeMetrics = []string{"apiserver_storage_size_bytes", "apiserver_storage_db_total_size_in_bytes"}

// EtcdDBSize returns the largest etcd database size in a /metrics text and
// the metric it came from; ok is false when neither metric is there.
func EtcdDBSize(text []byte) (size float64, metric string, ok bool, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(metricLines(text, etcdSizeMetrics)))
	if err != nil && len(fams) == 0 {
		return 0, "", false, err
	}
	for _, name := range etcdSizeMetrics {
		mf, found := fams[name]
		if !found {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue()
			if v > size || !ok {
				size, ok = v, true
			}
		}
		if ok {
			return size, name, true, nil
		}
	}
	return 0, "", false, nil
}

// metricLines keeps the lines of a /metrics text that belong to the named
// metrics (samples, # HELP and # TYPE), so that only they are parsed: an
// apiserver's /metrics is megabytes, and parsing all of it for two gauges
// was most of preflight's CPU.
func metricLines(text []byte, names []string) []byte {
	var out []byte
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i+1], text[i+1:]
		} else {
			text = nil
		}
		name := line
		if bytes.HasPrefix(name, []byte("# HELP ")) || bytes.HasPrefix(name, []byte("# TYPE ")) {
			name = name[len("# HELP "):]
		}
		for _, n := range names {
			if bytes.HasPrefix(name, []byte(n)) && len(name) > len(n) && strings.IndexByte(" {\t", name[len(n)]) >= 0 {
				out = append(out, line...)
				if line[len(line)-1] != '\n' {
					out = append(out, '\n')
				}
				break
			}
		}
	}
	return out
}

// etcdSite is where the cluster's etcd runs, as its inventory shows it.
type etcdSite struct {
	prov skew.Provider
	// node is a control-plane node whose etcd static pod runs etcdctl
	// (kubeadm, Cluster API's KubeadmControlPlane, RKE2).
	node string
	// kine: a k3s datastore that is not etcd (SQLite or an external
	// database behind kine), where etcd's quota does not apply.
	kine bool
}

func etcdSiteOf(inv *skew.Inventory) etcdSite {
	if inv == nil {
		return etcdSite{prov: skew.ProviderUnknown}
	}
	site := etcdSite{prov: skew.DetectProvider(*inv).Provider}
	for _, c := range inv.Components {
		if c.Name == skew.KindAPIServer && c.State == skew.StateVisible && site.node == "" {
			site.node = strings.TrimPrefix(c.Instance, skew.KindAPIServer+"-")
		}
	}
	if site.prov == skew.ProviderK3s && (inv.Platform == nil || inv.Platform.EtcdNodes == 0) {
		site.kine = true
	}
	return site
}

// quota is etcd's backend quota where it runs: EKS limits etcd storage to
// 8 GiB ("In the Amazon EKS environment, etcd storage is limited to 8 GiB
// as per upstream guidance": https://docs.aws.amazon.com/eks/latest/userguide/clusters.html,
// read 2026-09-20); GKE and AKS publish none (0: not judged); elsewhere
// etcd's own default, 2 GiB ("The default storage size limit is 2 GiB":
// https://etcd.io/docs/v3.6/dev-guide/limit/).
func (s etcdSite) quota() (int64, string) {
	switch s.prov {
	case skew.ProviderEKS:
		return 8 << 30, "EKS's etcd limit"
	case skew.ProviderGKE, skew.ProviderAKS:
		return 0, ""
	}
	return DefaultEtcdQuota, "etcd's default --quota-backend-bytes"
}

// commands returns the command that shows etcd's state and the one that
// defragments it, with the TLS flags of where etcd runs; a managed
// control plane gets no etcdctl: its provider runs etcd, and what the user
// can do is store less (apiserver_storage_objects names the largest
// resources).
func (s etcdSite) commands() (status, defrag string) {
	k3s := "--cacert=/var/lib/rancher/k3s/server/tls/etcd/server-ca.crt --cert=/var/lib/rancher/k3s/server/tls/etcd/client.crt --key=/var/lib/rancher/k3s/server/tls/etcd/client.key"
	rke2 := "--cacert=/var/lib/rancher/rke2/server/tls/etcd/server-ca.crt --cert=/var/lib/rancher/rke2/server/tls/etcd/server-client.crt --key=/var/lib/rancher/rke2/server/tls/etcd/server-client.key"
	node := s.node
	if node == "" {
		node = "<control-plane-node>"
	}
	switch s.prov {
	case skew.ProviderEKS, skew.ProviderGKE, skew.ProviderAKS:
		return "kubectl get --raw /metrics | grep -E '^apiserver_storage_(size_bytes|objects)'", ""
	case skew.ProviderKubeadm, skew.ProviderCAPI:
		return skew.EtcdctlCommand(node, "endpoint status --cluster -w table"), skew.EtcdctlCommand(node, "defrag --cluster")
	case skew.ProviderRKE2:
		exec := fmt.Sprintf("kubectl -n kube-system exec etcd-%s -- etcdctl %s ", shellWord(node), rke2)
		return exec + "endpoint status --cluster -w table", exec + "defrag --cluster"
	case skew.ProviderK3s:
		// k3s ships no etcdctl: one from the etcd release k3s embeds,
		// on a server node.
		return "sudo etcdctl " + k3s + " endpoint status --cluster -w table   # on a server node, with etcdctl of k3s's etcd release",
			"sudo etcdctl " + k3s + " defrag --cluster"
	}
	flags := "--endpoints='<etcd-endpoint>' --cacert='<etcd-ca>' --cert='<etcd-client-cert>' --key='<etcd-client-key>'"
	return "etcdctl " + flags + " endpoint status --cluster -w table", "etcdctl " + flags + " defrag --cluster"
}

func shellWord(s string) string {
	if strings.ContainsAny(s, "<>'\" $") {
		return "'" + s + "'"
	}
	return s
}

// etcdGate reads /readyz/etcd and the database size from /metrics, then
// judges the size against the quota of where etcd runs (site, called
// after both reads; nil: not known). EtcdFailRatio is this tool's policy,
// not an upstream rule.
func (r *Runner) etcdGate(ctx context.Context, metrics func(context.Context) ([]byte, error), site func() *skew.Inventory) Gate {
	cmd := "kubectl get --raw '/readyz/etcd?verbose' && kubectl get --raw /metrics | grep -E '^apiserver_storage_(size_bytes|db_total_size_in_bytes)'"
	if r.Raw == nil {
		return Gate{Status: StatusUnknown, Message: "no REST client for /readyz/etcd", Command: cmd}
	}
	var ev []string
	if _, err := r.Raw(ctx, "/readyz/etcd"); err != nil {
		// Only the apiserver's own answer says etcd is not ready; a
		// refused or failed request says nothing about etcd.
		var st apierrors.APIStatus
		if errors.As(err, &st) && !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) && st.Status().Code >= 500 {
			return Gate{Status: StatusFail, Message: fmt.Sprintf("/readyz/etcd: %v", err), Command: cmd}
		}
		g := unknown("get /readyz/etcd", err)
		g.Command = cmd
		return g
	}
	ev = append(ev, "/readyz/etcd: ok")
	text, err := metrics(ctx)
	if err != nil {
		g := unknown("get /metrics", err)
		g.Evidence, g.Command = ev, cmd
		return g
	}
	var inv *skew.Inventory
	if site != nil {
		inv = site()
	}
	where := etcdSiteOf(inv)
	if where.kine {
		return Gate{Status: StatusPass, Evidence: ev, Command: cmd,
			Message: "the datastore is not etcd (k3s without an etcd node: SQLite or an external database), so etcd's quota does not apply"}
	}
	size, metric, ok, err := EtcdDBSize(text)
	if err != nil || !ok {
		why := "neither apiserver_storage_size_bytes nor apiserver_storage_db_total_size_in_bytes is in /metrics (a managed control plane may hide it)"
		if err != nil {
			why = "parsing /metrics: " + err.Error()
		}
		return Gate{Status: StatusUnknown, Message: "etcd is ready; its database size is unknown: " + why, Evidence: ev, Command: cmd}
	}
	quota, source := r.EtcdQuota, "--etcd-quota"
	if quota <= 0 {
		quota, source = where.quota()
	}
	status, defrag := where.commands()
	if quota <= 0 {
		ev = append(ev, fmt.Sprintf("%s = %.0f bytes (%.1f MiB)", metric, size, size/(1<<20)))
		return Gate{Status: StatusUnknown, Evidence: ev, Command: status,
			Message: fmt.Sprintf("etcd ready; database %.1f MiB; %s publishes no etcd quota, so its size is not judged: pass --etcd-quota to judge it", size/(1<<20), where.prov.Title())}
	}
	ratio := size / float64(quota)
	ev = append(ev, fmt.Sprintf("%s = %.0f bytes (%.1f MiB) of a %.1f GiB quota (%s)", metric, size, size/(1<<20), float64(quota)/(1<<30), source))
	msg := fmt.Sprintf("etcd ready; database %.1f%% of its quota", ratio*100)
	switch {
	case ratio > EtcdFailRatio:
		fix := status + " && " + defrag
		advice := ", above this tool's limit of %.0f%% (a policy, not an upstream rule): compact and defragment before the upgrade"
		if defrag == "" {
			fix = status
			advice = ", above this tool's limit of %.0f%% (a policy, not an upstream rule): the provider runs etcd; delete what the cluster no longer needs (apiserver_storage_objects shows the largest resources) before the upgrade"
		}
		return Gate{Status: StatusFail, Message: msg + fmt.Sprintf(advice, EtcdFailRatio*100), Evidence: ev, Command: fix}
	case ratio > EtcdFailRatio*0.8:
		return Gate{Status: StatusWarn, Message: msg, Evidence: ev, Command: status}
	}
	return Gate{Status: StatusPass, Message: msg, Evidence: ev, Command: cmd}
}

// drainsGate reads nodes, pods and PDBs once (pkg/eviction.Load) and
// simulates draining each pool, node after node, with pkg/eviction's
// Evaluator.
func (r *Runner) drainsGate(ctx context.Context) Gate {
	snap, err := r.snapshot(ctx)
	if err != nil {
		return unknown("list nodes, pods and poddisruptionbudgets", err)
	}
	idx := snap.Index()
	pools := map[string][]string{}
	labels := map[string]string{}
	for _, n := range snap.Nodes {
		p, l := skew.PoolOf(n.Labels, r.PoolLabel)
		pools[p] = append(pools[p], n.Name)
		labels[p] = l
	}
	names := make([]string, 0, len(pools))
	for p := range pools {
		names = append(names, p)
	}
	sort.Strings(names)
	st := StatusPass
	var ev []string
	cmd := "kubectl pdb-blockers --all-nodes"
	for _, p := range names {
		nodes := pools[p]
		sort.Strings(nodes)
		sim := eviction.Evaluator{Now: r.now()}.NewSimulation(idx)
		never, later, unknownN := 0, 0, 0
		var first string
		for _, n := range nodes {
			for _, v := range sim.DrainNode(n) {
				switch v.Outcome {
				case eviction.OutcomeNever:
					never++
					if first == "" {
						first = fmt.Sprintf("%s/%s on %s", v.Namespace, v.Name, v.Node)
						if len(v.Blockers) > 0 {
							first += ": " + v.Blockers[0].Message
						}
					}
				case eviction.OutcomeLater:
					later++
				case eviction.OutcomeUnknown:
					unknownN++
				}
			}
		}
		line := fmt.Sprintf("pool %s (%s): %s blocked, %d wait, %d unknown", p, skew.Nodes(len(nodes)), cli.Plural(never, "pod"), later, unknownN)
		switch {
		case never > 0:
			line += "; first: " + first
			if st.Rank() < StatusFail.Rank() {
				cmd = poolCmd(p, labels[p])
			}
			st = Worse(st, StatusFail)
		case unknownN > 0:
			st = Worse(st, StatusUnknown)
		case later > 0:
			st = Worse(st, StatusWarn)
		}
		ev = append(ev, line)
	}
	for ns, why := range snap.ForbiddenPDBs {
		ev = append(ev, fmt.Sprintf("poddisruptionbudgets in %s not readable: %s", ns, why))
	}
	if r.skipped != "" {
		ev = append([]string{r.skipped}, ev...)
	}
	msg := map[Status]string{StatusPass: "no drain will block", StatusWarn: "drains will wait for replacements", StatusFail: "drains will block",
		StatusUnknown: "some evictions cannot be predicted"}[st]
	return Gate{Status: st, Message: fmt.Sprintf("%s (%s, %s, %s)", msg, cli.Plural(len(names), "pool"), skew.Nodes(len(snap.Nodes)), cli.Plural(len(snap.Pods), "pod")), Evidence: capLines(ev), Command: cmd}
}

func poolCmd(pool, label string) string {
	if label == "" || pool == skew.NoPool {
		return "kubectl pdb-blockers --all-nodes"
	}
	if pool == "control-plane" {
		return "kubectl pdb-blockers -l " + label
	}
	return fmt.Sprintf("kubectl pdb-blockers -l %s=%s", label, pool)
}

// crdsGate lists CRDs whose status.storedVersions still hold a version
// other than the storage version (pkg/crdmigrate's rule).
func (r *Runner) crdsGate(ctx context.Context) Gate {
	if r.Ext == nil {
		return Gate{Status: StatusUnknown, Message: "no apiextensions client"}
	}
	crds, err := r.crds(ctx)
	if err != nil {
		return unknown("list customresourcedefinitions", err)
	}
	var need []string
	first := ""
	for _, crd := range crds {
		st := crdmigrate.Describe(crd)
		if st.NeedsMigration() {
			need = append(need, fmt.Sprintf("%s: storedVersions %s, storage version %s", crd.Name, strings.Join(st.StoredVersions, ","), st.StorageVersion))
			if first == "" {
				first = crd.Name
			}
		}
	}
	sort.Strings(need)
	if len(need) > 0 {
		return Gate{Status: StatusWarn, Message: fmt.Sprintf("%d of %d CRDs need a storage migration before an old version can be dropped", len(need), len(crds)),
			Evidence: capLines(need), Command: fmt.Sprintf("kubectl crd-migrate status; kubectl crd-migrate run %s --dry-run", first)}
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("every CRD stores only its storage version (%s)", cli.Plural(len(crds), "CRD")), Command: "kubectl crd-migrate status"}
}

// psaGate lists namespaces whose Pod Security Admission version labels
// say latest (explicitly, or by leaving a level's version unset): the
// meaning of "latest" changes with the upgrade.
func (r *Runner) psaGate(ctx context.Context) Gate {
	nss, err := r.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return unknown("list namespaces", err)
	}
	var hits []string
	first := ""
	for _, ns := range nss.Items {
		var modes []string
		for _, mode := range []string{"enforce", "audit", "warn"} {
			level, hasLevel := ns.Labels["pod-security.kubernetes.io/"+mode]
			ver, hasVer := ns.Labels["pod-security.kubernetes.io/"+mode+"-version"]
			switch {
			case hasVer && ver == "latest":
				modes = append(modes, fmt.Sprintf("%s=%s at version latest", mode, level))
			case hasLevel && !hasVer && level != "privileged":
				modes = append(modes, fmt.Sprintf("%s=%s with no version (latest)", mode, level))
			}
		}
		if len(modes) > 0 {
			hits = append(hits, fmt.Sprintf("namespace %s: %s", ns.Name, strings.Join(modes, ", ")))
			if first == "" {
				first = ns.Name
			}
		}
	}
	sort.Strings(hits)
	if len(hits) > 0 {
		// The gate runs no dry run; its command does, and that cannot
		// preview the target: Pod Security evaluates a version newer than
		// its own newest checks as that newest (k8s.io/pod-security-admission
		// v0.37.2 policy/registry.go, EvaluatePod), so before the upgrade it
		// shows the pods that break the level as the running apiserver
		// defines it. What the target adds on top is checksSince's.
		added := ""
		if r.inventory != nil {
			if inv := r.inventory(); inv != nil {
				if cur, _, ok := inv.APIServerVersions(); ok && r.Target.MinorsAfter(cur.MinorOnly()) > 0 {
					if cs := checksSince(psaapi.LevelRestricted, cur.MinorOnly(), r.Target); len(cs) > 0 {
						added = fmt.Sprintf("; checks %s adds, which only an apiserver at %s applies: %s", r.Target.MinorString(), r.Target.MinorString(), strings.Join(cs, ", "))
					} else {
						added = fmt.Sprintf("; %s adds no Pod Security check over %s", r.Target.MinorString(), cur.MinorString())
					}
				}
			}
		}
		return Gate{Status: StatusWarn, Message: fmt.Sprintf("%s pods by Pod Security \"latest\", which becomes %s's policy when the apiserver moves: pin enforce-version (the command's server-side dry run lists the pods the level forbids, as the running apiserver judges them)%s", cli.Plural(len(hits), "namespace")+cli.Agree(len(hits), " judges", " judge"), r.Target.MinorString(), added),
			Evidence: capLines(hits), Command: fmt.Sprintf("kubectl label --dry-run=server --overwrite ns %s pod-security.kubernetes.io/enforce-version=v%s", first, r.Target.MinorString())}
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("no namespace of %d pins Pod Security to latest", len(nss.Items)), Command: "kubectl get ns -L pod-security.kubernetes.io/enforce,pod-security.kubernetes.io/enforce-version"}
}

// Labels the legacy service-account token cleaner sets (KEP-2799:
// LegacyServiceAccountTokenTracking and LegacyServiceAccountTokenCleanUp).
const (
	LegacyTokenLastUsed     = "kubernetes.io/legacy-token-last-used"
	LegacyTokenInvalidSince = "kubernetes.io/legacy-token-invalid-since"
)

// legacyTokenGate finds Secrets of type kubernetes.io/service-account-token
// that were used (the apiserver labels them with the day of last use):
// the cleaner invalidates and deletes tokens unused for a year, and
// workloads should move to projected tokens. Metadata only is read.
func (r *Runner) legacyTokenGate(ctx context.Context) Gate {
	opts := metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeServiceAccountToken)}
	type meta struct {
		ns, name string
		labels   map[string]string
	}
	var items []meta
	if r.Metadata != nil {
		l, err := r.Metadata.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).List(ctx, opts)
		if err != nil {
			return unknown("list secrets", err)
		}
		for _, it := range l.Items {
			items = append(items, meta{it.Namespace, it.Name, it.Labels})
		}
	} else {
		l, err := r.Kube.CoreV1().Secrets("").List(ctx, opts)
		if err != nil {
			return unknown("list secrets", err)
		}
		for _, it := range l.Items {
			items = append(items, meta{it.Namespace, it.Name, it.Labels})
		}
	}
	var used, invalid []string
	now := r.now()
	for _, it := range items {
		if d, ok := it.labels[LegacyTokenInvalidSince]; ok {
			invalid = append(invalid, fmt.Sprintf("secret %s/%s invalid since %s", it.ns, it.name, d))
			continue
		}
		if d, ok := it.labels[LegacyTokenLastUsed]; ok {
			line := fmt.Sprintf("secret %s/%s last used %s", it.ns, it.name, d)
			if t, err := time.Parse("2006-01-02", d); err == nil {
				line += fmt.Sprintf(" (%s ago)", cli.Plural(int(now.Sub(t).Hours()/24), "day"))
			}
			used = append(used, line)
		}
	}
	sort.Strings(used)
	sort.Strings(invalid)
	if len(used) > 0 || len(invalid) > 0 {
		return Gate{Status: StatusWarn, Message: fmt.Sprintf("%s in use, %d already invalidated: move their users to projected tokens", cli.Plural(len(used), "legacy service-account token Secret"), len(invalid)),
			Evidence: capLines(append(used, invalid...)), Command: "kubectl get secrets -A --field-selector type=kubernetes.io/service-account-token -L " + LegacyTokenLastUsed + "," + LegacyTokenInvalidSince}
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("no legacy service-account token in use (%s)", cli.Plural(len(items), "token Secret")), Command: "kubectl get secrets -A --field-selector type=kubernetes.io/service-account-token"}
}

// crds lists the CRDs once for the gates that need them (webhooks,
// crd-storage).
func (r *Runner) crds(ctx context.Context) ([]*apiextv1.CustomResourceDefinition, error) {
	r.crdOnce.Do(func() {
		r.crdList, r.crdErr = crdmigrate.GetCRDs(ctx, r.Ext, nil)
	})
	return r.crdList, r.crdErr
}

// MetricLines keeps the lines of a /metrics text that belong to the named
// metrics, ready for expfmt's text parser (the fleet programme's
// apiserver-429-rate check reads apiserver_request_total with it).
func MetricLines(text []byte, names ...string) []byte { return metricLines(text, names) }
