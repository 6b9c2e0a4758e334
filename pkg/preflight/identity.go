package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// GateWorkloadIdentity proves that the webhooks binding ServiceAccounts to
// cloud identities still inject them.
const GateWorkloadIdentity = "workload-identity"

// RegWorkloadIdentity is its regression kind in verify.
const RegWorkloadIdentity = "workload-identity"

// identityProbes is how many dry runs go at once.
const identityProbes = 4

// WorkloadIdentityEvidence is what the workload-identity gate read.
type WorkloadIdentityEvidence struct {
	// Bindings are every ServiceAccount binding found, with what its
	// dry-run pod was injected (EKS, Azure).
	Bindings []health.IdentityFact `json:"bindings,omitempty"`
	// ServiceAccountsUnread says why the ServiceAccounts could not be
	// listed (then nothing else was read).
	ServiceAccountsUnread string `json:"serviceAccountsUnread,omitempty"`
	// GKE is the GKE metadata server as read, where a GKE binding exists.
	GKE *health.GKEMetadataServer `json:"gke,omitempty"`
	// GKEUnread says why it could not be read.
	GKEUnread string `json:"gkeUnread,omitempty"`
	// EKSPodIdentity is the EKS cluster whose Pod Identity associations
	// were listed (nil when none was named); its associations are among
	// Bindings, provider eks-pod-identity.
	EKSPodIdentity *health.EKSPodIdentityAccess `json:"eksPodIdentity,omitempty"`
	// EKSPodIdentityUnread says why they could not be listed.
	EKSPodIdentityUnread string `json:"eksPodIdentityUnread,omitempty"`
	// EKSPodIdentityAgent is the eks-pod-identity-agent DaemonSet as
	// read, where an EKS Pod Identity association is in use.
	EKSPodIdentityAgent *health.NodeAgent `json:"eksPodIdentityAgent,omitempty"`
	// EKSPodIdentityAgentUnread says why it could not be read (then the
	// hybrid agents were not read either).
	EKSPodIdentityAgentUnread string `json:"eksPodIdentityAgentUnread,omitempty"`
	// EKSPodIdentityHybridAgents are the agent's DaemonSets for EKS
	// Hybrid Nodes found (health.EKSPodIdentityAgentHybridDaemonSets),
	// read with the cloud one; one not found is not listed (a cluster
	// with no hybrid nodes runs none).
	EKSPodIdentityHybridAgents []health.NodeAgent `json:"eksPodIdentityHybridAgents,omitempty"`
}

// eksPodIdentity lists the associations of the EKS cluster named, or says
// why it could not.
func (r *Runner) eksPodIdentity(ctx context.Context) ([]health.IdentityBinding, string) {
	acc := r.Health.EKSPodIdentity
	c := r.Health.EKSClient
	if c == nil {
		cl, err := health.NewEKSClient(ctx, acc)
		if err != nil {
			return nil, health.PodIdentityUnreachable(acc, err)
		}
		c = cl
	}
	bs, err := health.ListPodIdentityAssociations(ctx, c, acc.Cluster)
	if err != nil {
		return nil, health.PodIdentityUnreachable(acc, err)
	}
	return bs, ""
}

// workloadIdentityGate lists the ServiceAccounts, and for each EKS IRSA or
// Azure Workload ID binding sends a pod with that ServiceAccount as a
// server-side dry run (dryRun=All: admission runs, webhooks with
// sideEffects None or NoneOnDryRun are called, nothing is stored) and
// records what came back injected. GKE's Workload Identity Federation
// mutates no pod: for its bindings the GKE metadata server's DaemonSet and
// the nodes labelled for it are read instead, and on GKE or wherever a
// node is labelled for it even with no annotated ServiceAccount (IAM may
// be granted to the Kubernetes ServiceAccount itself). A binding whose webhook
// injected nothing is WARN (its pods get no credentials now); the metadata
// server not ready is FAIL; a dry run or a list refused is UNKNOWN.
func (r *Runner) workloadIdentityGate(ctx context.Context) (Gate, *WorkloadIdentityEvidence) {
	ev := &WorkloadIdentityEvidence{}
	cmd := "kubectl get serviceaccounts -A -o yaml"
	sas, err := listAll[*corev1.ServiceAccount](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return r.Kube.CoreV1().ServiceAccounts("").List(ctx, o)
	})
	if err != nil {
		g := unknown("list serviceaccounts", err)
		g.Command = cmd
		ev.ServiceAccountsUnread = g.Message
		return g, ev
	}
	bindings := health.IdentityBindings(sas)
	have := map[string]bool{}
	for _, sa := range sas {
		have[sa.Namespace+"/"+sa.Name] = true
	}
	if acc := r.Health.EKSPodIdentity; acc.Cluster != "" {
		ev.EKSPodIdentity = &acc
		assoc, why := r.eksPodIdentity(ctx)
		ev.EKSPodIdentityUnread = why
		bindings = append(bindings, assoc...)
		sort.Slice(bindings, func(i, j int) bool { return bindings[i].ID() < bindings[j].ID() })
		cmd += "; " + health.PodIdentityCommand(acc)
	}
	// Workload Identity Federation for GKE may grant IAM roles to a
	// Kubernetes ServiceAccount directly
	// (principal://iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/PROJECT.svc.id.goog/subject/ns/NS/sa/KSA),
	// with no annotation on it (GKE docs, "About Workload Identity
	// Federation for GKE", IAM principal identifiers,
	// https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity):
	// on GKE, or where a node is labelled for the metadata server
	// (health.LabelGKEMetadataServer), the metadata server is read
	// whatever the ServiceAccounts carry.
	gkeNodes, gkeNodesErr := listAll[*corev1.Node](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = health.LabelGKEMetadataServer + "=true"
		return r.Kube.CoreV1().Nodes().List(ctx, o)
	})
	if gkeNodesErr != nil {
		gkeNodes = nil
	}
	gkeOn := len(gkeNodes) > 0 || r.provider() == skew.ProviderGKE
	if len(bindings) == 0 && ev.EKSPodIdentityUnread != "" {
		return Gate{Status: StatusUnknown, Message: ev.EKSPodIdentityUnread, Command: cmd}, ev
	}
	if len(bindings) == 0 && !gkeOn {
		msg := "no ServiceAccount carries an identity binding (" + health.AnnotationEKSRoleARN + ", " +
			health.AnnotationGKEServiceAccount + ", " + health.AnnotationAzureClientID + ")"
		if ev.EKSPodIdentity != nil {
			msg += " and EKS cluster " + ev.EKSPodIdentity.Cluster + " has no Pod Identity association"
		}
		return Gate{Status: StatusPass, Message: msg, Command: cmd}, ev
	}
	ev.Bindings = make([]health.IdentityFact, len(bindings))
	var wg sync.WaitGroup
	sem := make(chan struct{}, identityProbes)
	gke := false
	for i, b := range bindings {
		ev.Bindings[i].IdentityBinding = b
		if b.Provider == health.IdentityGKE {
			gke = true
			continue
		}
		if !have[b.Namespace+"/"+b.ServiceAccount] {
			// An association may name a ServiceAccount not created yet:
			// the dry run would be refused by the ServiceAccount
			// admission plugin.
			ev.Bindings[i].Unread = "no ServiceAccount " + b.Namespace + "/" + b.ServiceAccount + " in the cluster"
			continue
		}
		wg.Add(1)
		go func(f *health.IdentityFact) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sent := health.IdentityProbePod(f.IdentityBinding)
			got, err := r.Kube.CoreV1().Pods(f.Namespace).Create(ctx, sent, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				f.Unread = unknown("create pods (dry run) in namespace "+f.Namespace, err).Message
				return
			}
			inj := health.InjectedInto(f.Provider, sent, got)
			f.Injected = &inj
		}(&ev.Bindings[i])
	}
	wg.Wait()
	if podIdentity := countProvider(bindings, health.IdentityEKSPodIdentity); podIdentity > 0 {
		ev.EKSPodIdentityAgent, ev.EKSPodIdentityAgentUnread = r.nodeAgent(ctx, health.EKSPodIdentityAgentDaemonSet)
		if ev.EKSPodIdentityAgentUnread == "" {
			for _, name := range health.EKSPodIdentityAgentHybridDaemonSets {
				if a, _ := r.nodeAgent(ctx, name); a != nil && a.Found {
					ev.EKSPodIdentityHybridAgents = append(ev.EKSPodIdentityHybridAgents, *a)
				}
			}
		}
	}
	if gke || gkeOn {
		dss, err := r.daemonSets(ctx)
		if err != nil {
			ev.GKEUnread = unknown("list daemonsets", err).Message
		} else {
			m := health.ReadGKEMetadataServer(dss, gkeNodes)
			if m.Found && !m.OK() {
				// Not read (RBAC): every pod not ready counts.
				if n, err := r.downNodePods(ctx, metav1.NamespaceSystem, health.GKEMetadataServerDaemonSet); err == nil {
					m.Excused = n
				}
			}
			ev.GKE = &m
		}
	}

	var lines, empty, unread, gkeSAs []string
	for _, f := range ev.Bindings {
		sa := f.Namespace + "/" + f.ServiceAccount
		switch {
		case f.Provider == health.IdentityGKE:
			gkeSAs = append(gkeSAs, sa)
			lines = append(lines, fmt.Sprintf("%s (gke %s): nothing injected by design; served by the GKE metadata server", sa, f.Identity))
		case f.Unread != "":
			unread = append(unread, sa+": "+f.Unread)
			lines = append(lines, fmt.Sprintf("%s (%s %s): not probed: %s", sa, f.Provider, f.Identity, f.Unread))
		default:
			if f.Injected.Empty() {
				empty = append(empty, fmt.Sprintf("%s (%s)", sa, f.Provider))
			}
			lines = append(lines, fmt.Sprintf("%s (%s %s): injected %s", sa, f.Provider, f.Identity, f.Injected))
		}
	}
	if ev.GKE != nil {
		lines = append(lines, "GKE metadata server: "+ev.GKE.String())
	}
	if ev.GKEUnread != "" {
		lines = append(lines, "GKE metadata server not read: "+ev.GKEUnread)
	}
	if ev.EKSPodIdentityUnread != "" {
		lines = append(lines, ev.EKSPodIdentityUnread)
	}
	if a := ev.EKSPodIdentityAgent; a != nil {
		line := "EKS Pod Identity Agent: " + a.String()
		if !a.Found {
			line += " (EKS Auto Mode serves Pod Identity without it)"
		}
		lines = append(lines, line)
	}
	for _, a := range ev.EKSPodIdentityHybridAgents {
		lines = append(lines, "EKS Pod Identity Agent for hybrid nodes: "+a.String())
	}
	if ev.EKSPodIdentityAgentUnread != "" {
		lines = append(lines, "EKS Pod Identity Agent not read: "+ev.EKSPodIdentityAgentUnread)
	}
	var agentsDown []health.NodeAgent
	for _, a := range ev.podIdentityAgents() {
		if a.Found && !a.OK() {
			agentsDown = append(agentsDown, a)
		}
	}
	g := Gate{Evidence: capLines(lines), Command: "kubectl get mutatingwebhookconfigurations; kubectl create --dry-run=server -o yaml -f POD (with the ServiceAccount)"}
	if ev.EKSPodIdentity != nil {
		g.Command += "; " + health.PodIdentityCommand(*ev.EKSPodIdentity)
	}
	probed := len(bindings) - len(gkeSAs) - len(unread)
	// gkeServes: the metadata server serves someone: an annotated
	// ServiceAccount, or the pods of the nodes labelled for it (IAM granted
	// to their ServiceAccounts directly shows nowhere in the cluster).
	gkeServes := ev.GKE != nil && (len(gkeSAs) > 0 || ev.GKE.Nodes > 0 || (ev.GKE.Nodes < 0 && ev.GKE.Desired > 0))
	gkeWho := cli.Plural(len(gkeSAs), "ServiceAccount")
	if len(gkeSAs) == 0 && ev.GKE != nil {
		gkeWho = "the pods on " + gkeNodesText(*ev.GKE) + " (IAM granted to a Kubernetes ServiceAccount, principal://.../subject/ns/NS/sa/KSA, needs no annotation)"
	}
	switch {
	case gkeServes && ev.GKE.Found && !ev.GKE.OK():
		g.Status, g.Message = StatusFail, fmt.Sprintf("the GKE metadata server that serves the identity of %s is not ready: %s", gkeWho, ev.GKE)
		g.Command = "kubectl -n kube-system get daemonset " + health.GKEMetadataServerDaemonSet + " -o wide"
	case len(agentsDown) > 0:
		down := make([]string, len(agentsDown))
		for i, a := range agentsDown {
			down[i] = a.String()
		}
		g.Status, g.Message = StatusFail, fmt.Sprintf("the EKS Pod Identity Agent that serves the credentials of %s is not ready: %s", cli.Plural(countProvider(bindings, health.IdentityEKSPodIdentity), "association"), strings.Join(down, "; "))
		g.Command = podIdentityAgentCommand(agentsDown[0].Name)
	case len(unread) > 0 || ev.GKEUnread != "" || ev.EKSPodIdentityUnread != "" || ev.EKSPodIdentityAgentUnread != "":
		why := unread
		if ev.GKEUnread != "" {
			why = append(why, "GKE metadata server: "+ev.GKEUnread)
		}
		if ev.EKSPodIdentityAgentUnread != "" {
			why = append(why, "EKS Pod Identity Agent: "+ev.EKSPodIdentityAgentUnread)
		}
		sort.Strings(why)
		if ev.EKSPodIdentityUnread != "" {
			why = append([]string{ev.EKSPodIdentityUnread}, why...)
		}
		g.Status, g.Message = StatusUnknown, fmt.Sprintf("%d of %s not probed: %s", len(unread), cli.Plural(len(bindings), "identity binding"), strings.Join(why, "; "))
		if len(bindings) == 0 {
			g.Message = "no ServiceAccount carries an identity binding; " + strings.Join(why, "; ")
		}
	case len(empty) > 0:
		g.Status, g.Message = StatusWarn, fmt.Sprintf("no webhook injected an identity into a pod of %s: their pods get no cloud credentials (is the identity webhook installed and its MutatingWebhookConfiguration matching?)", strings.Join(empty, ", "))
	case ev.GKE != nil && len(gkeSAs) > 0 && !ev.GKE.Found:
		g.Status, g.Message = StatusWarn, fmt.Sprintf("%s %s and no GKE metadata server DaemonSet runs: Workload Identity Federation for GKE looks off", cli.Plural(len(gkeSAs), "ServiceAccount")+cli.Agree(len(gkeSAs), " carries", " carry"), health.AnnotationGKEServiceAccount)
	case gkeServes && !ev.GKE.Found:
		g.Status, g.Message = StatusWarn, fmt.Sprintf("%s and no GKE metadata server DaemonSet runs: their pods get no Workload Identity Federation credentials", gkeNodesText(*ev.GKE)+cli.Agree(ev.GKE.Nodes, " is", " are")+" labelled for it")
	case len(bindings) == 0:
		g.Status = StatusPass
		g.Message = "no ServiceAccount carries an identity binding (" + health.AnnotationEKSRoleARN + ", " +
			health.AnnotationGKEServiceAccount + ", " + health.AnnotationAzureClientID + ")"
		switch {
		case gkeServes:
			g.Message += "; the GKE metadata server is ready for " + gkeWho
		case ev.GKE != nil:
			g.Message += "; no node is labelled " + health.LabelGKEMetadataServer + "=true (Workload Identity Federation for GKE is off on every node pool)"
		}
	default:
		g.Status = StatusPass
		g.Message = fmt.Sprintf("%s: the webhook injects the token volume and environment for each of %d probed", cli.Plural(len(bindings), "identity binding"), probed)
		switch {
		case len(gkeSAs) > 0:
			g.Message += fmt.Sprintf("; %s served by a ready GKE metadata server", cli.Plural(len(gkeSAs), "GKE binding"))
		case gkeServes:
			g.Message += "; the GKE metadata server is ready for " + gkeWho
		}
	}
	return g, ev
}

// verifyWorkloadIdentity: a binding whose dry-run pod no longer gets what
// the webhook injected at the baseline is a FAIL naming the
// ServiceAccount; one whose token of the same audience is mounted at
// another path is a WARN naming both paths; a binding probed at the baseline that cannot be probed
// now is UNKNOWN; one gone is WARN (the binding was removed, not the
// webhook), except an EKS Pod Identity association gone from the EKS API,
// a FAIL; associations listed at the baseline and not listable now are
// one UNKNOWN with the reason. The GKE metadata server ready at the baseline and gone or not
// ready now is a FAIL naming the GKE-bound ServiceAccounts.
func verifyWorkloadIdentity(b, n *WorkloadIdentityEvidence) []Regression {
	if b == nil || n == nil {
		return nil
	}
	if n.ServiceAccountsUnread != "" {
		if b.ServiceAccountsUnread == "" {
			return []Regression{{Kind: RegWorkloadIdentity, Status: StatusUnknown, Object: "serviceaccounts",
				Message: "ServiceAccounts were read at the baseline and cannot be now: " + n.ServiceAccountsUnread}}
		}
		return nil
	}
	var out []Regression
	base := b.Bindings
	if b.EKSPodIdentity != nil && b.EKSPodIdentityUnread == "" && (n.EKSPodIdentity == nil || n.EKSPodIdentityUnread != "") {
		// Listed at the baseline and not now: the associations cannot be
		// told gone, so they are left out of the diff.
		why := n.EKSPodIdentityUnread
		if n.EKSPodIdentity == nil {
			why = "no EKS cluster named now (--eks-cluster)"
		}
		out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusUnknown, Object: "eks-pod-identity/" + b.EKSPodIdentity.Cluster,
			Message: "EKS Pod Identity associations were listed at the baseline and cannot be now: " + why, Command: health.PodIdentityCommand(*b.EKSPodIdentity)})
		base = nil
		for _, f := range b.Bindings {
			if f.Provider != health.IdentityEKSPodIdentity {
				base = append(base, f)
			}
		}
	}
	for _, c := range health.DiffIdentities(base, n.Bindings) {
		obj := "serviceaccount/" + c.Binding.Namespace + "/" + c.Binding.ServiceAccount
		r := Regression{Kind: RegWorkloadIdentity, Object: obj, Message: c.String(),
			Command: fmt.Sprintf("kubectl -n %s get serviceaccount %s -o yaml; kubectl get mutatingwebhookconfigurations", c.Binding.Namespace, c.Binding.ServiceAccount)}
		if c.Binding.Provider == health.IdentityEKSPodIdentity && b.EKSPodIdentity != nil {
			r.Command = health.PodIdentityCommand(*b.EKSPodIdentity) + " --namespace " + c.Binding.Namespace + " --service-account " + c.Binding.ServiceAccount + "; kubectl get mutatingwebhookconfigurations"
		}
		switch {
		case c.Gone && c.Binding.Provider == health.IdentityEKSPodIdentity:
			// The association is gone from the EKS API: the pods of
			// the ServiceAccount lose their AWS credentials.
			r.Status = StatusFail
		case c.Gone:
			r.Status = StatusWarn
		case c.Unread != "":
			r.Status = StatusUnknown
		case c.Lost.Empty():
			// Only moved: the pods still get their token, at the path
			// the webhook's environment names.
			r.Status = StatusWarn
		default:
			r.Status = StatusFail
		}
		out = append(out, r)
	}
	out = append(out, verifyPodIdentityAgent(b, n)...)
	if b.GKE != nil && b.GKE.OK() {
		var sas []string
		for _, f := range n.Bindings {
			if f.Provider == health.IdentityGKE {
				sas = append(sas, f.Namespace+"/"+f.ServiceAccount)
			}
		}
		who := strings.Join(sas, ", ")
		if len(sas) == 0 {
			// IAM may be granted to the ServiceAccounts directly: every
			// pod on the labelled nodes depends on it.
			who = "the ServiceAccounts on " + gkeNodesText(*b.GKE)
		}
		switch {
		case len(sas) == 0 && n.GKE == nil && n.GKEUnread == "":
			// Read at the baseline only for GKE bindings now gone.
		case n.GKEUnread != "":
			out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusUnknown, Object: "gke-metadata-server",
				Message: "the GKE metadata server was ready at the baseline and cannot be read now: " + n.GKEUnread})
		case n.GKE != nil && !n.GKE.OK():
			out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusFail, Object: "gke-metadata-server",
				Message: fmt.Sprintf("the GKE metadata server was ready at the baseline and now: %s; pods of %s get no Workload Identity Federation credentials", n.GKE, who),
				Command: "kubectl -n kube-system get daemonset " + health.GKEMetadataServerDaemonSet + " -o wide; kubectl get nodes -l " + health.LabelGKEMetadataServer + "=true"})
		case n.GKE != nil && b.GKE.Nodes > 0 && n.GKE.Nodes >= 0 && n.GKE.Nodes < b.GKE.Nodes:
			// The DaemonSet follows the label, so it can be fully ready
			// on fewer nodes: a GPU node pool recreated with
			// --workload-metadata=GCE_METADATA (gcloud container
			// node-pools create --help, Cloud SDK 528.0.0: "Pods running
			// in this node pool have access to the node's underlying
			// Compute Engine Metadata Server") loses the label, and its
			// pods get the node's identity instead of theirs.
			out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusFail, Object: "gke-metadata-server",
				Message: fmt.Sprintf("%s labelled %s=true, %d at the baseline: pods on the nodes no longer labelled get no Workload Identity Federation credentials (a node pool created or updated with --workload-metadata=GCE_METADATA?); %s",
					cli.Plural(n.GKE.Nodes, "node"), health.LabelGKEMetadataServer, b.GKE.Nodes, n.GKE),
				Command: "kubectl get nodes -L " + health.LabelGKEMetadataServer + ",cloud.google.com/gke-nodepool; gcloud container node-pools list --cluster CLUSTER"})
		}
	}
	return out
}

// podIdentityAgentCommand shows an EKS Pod Identity Agent DaemonSet and
// its pods.
func podIdentityAgentCommand(name string) string {
	return "kubectl -n kube-system get daemonset " + name + " -o wide; kubectl -n kube-system get pods -o wide | grep " + name
}

// podIdentityAgents are the agent DaemonSets read: the cloud one (found
// or not) and the hybrid nodes' ones found.
func (e *WorkloadIdentityEvidence) podIdentityAgents() []health.NodeAgent {
	var out []health.NodeAgent
	if e.EKSPodIdentityAgent != nil {
		out = append(out, *e.EKSPodIdentityAgent)
	}
	return append(out, e.EKSPodIdentityHybridAgents...)
}

// countProvider counts the bindings of one provider.
func countProvider(bs []health.IdentityBinding, provider string) int {
	n := 0
	for _, b := range bs {
		if b.Provider == provider {
			n++
		}
	}
	return n
}

// nodeAgent reads DaemonSet kube-system/name and, where it is short of
// ready pods, names the Ready, schedulable nodes where its pod is not
// ready, leaving out those on nodes NotReady or cordoned (the exemption
// the CNI check makes: health.DaemonPodsNotReady).
func (r *Runner) nodeAgent(ctx context.Context, name string) (*health.NodeAgent, string) {
	dss, err := r.daemonSets(ctx)
	if err != nil {
		return nil, unknown("list daemonsets", err).Message
	}
	a := health.ReadNodeAgent(name, dss)
	if a.Found && !a.OK() {
		// Not read (RBAC): every pod not ready counts, no node named.
		if ex, up, err := r.daemonPodsNotReady(ctx, metav1.NamespaceSystem, name); err == nil {
			a.Excused, a.NotReadyOn = ex, up
		}
	}
	return &a, ""
}

// verifyPodIdentityAgent: where EKS Pod Identity associations are in use
// now, an agent DaemonSet (the cloud one, or one of the hybrid nodes')
// ready at the baseline (or found nowhere then) and not ready now on a
// Ready, schedulable node is a FAIL naming the nodes; ready at the
// baseline and gone now is a FAIL; not readable now is UNKNOWN.
func verifyPodIdentityAgent(b, n *WorkloadIdentityEvidence) []Regression {
	if n.EKSPodIdentityAgent == nil && n.EKSPodIdentityAgentUnread == "" {
		return nil
	}
	base := map[string]health.NodeAgent{}
	for _, a := range b.podIdentityAgents() {
		base[a.Name] = a
	}
	if n.EKSPodIdentityAgentUnread != "" {
		for _, a := range base {
			if a.OK() {
				return []Regression{{Kind: RegWorkloadIdentity, Status: StatusUnknown, Object: health.EKSPodIdentityAgentDaemonSet,
					Message: "the EKS Pod Identity Agent was ready at the baseline and cannot be read now: " + n.EKSPodIdentityAgentUnread}}
			}
		}
		return nil
	}
	now := map[string]health.NodeAgent{}
	for _, a := range n.podIdentityAgents() {
		now[a.Name] = a
	}
	var out []Regression
	for _, name := range append([]string{health.EKSPodIdentityAgentDaemonSet}, health.EKSPodIdentityAgentHybridDaemonSets...) {
		ba, inBase := base[name]
		na, ok := now[name]
		if !ok {
			na = health.NodeAgent{Name: name}
		}
		baseOK := inBase && ba.OK()
		what := "the EKS Pod Identity Agent"
		if name != health.EKSPodIdentityAgentDaemonSet {
			what += " for hybrid nodes"
		}
		switch {
		case na.Found && !na.OK() && (!ba.Found || baseOK):
			out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusFail, Object: name,
				Message: what + " is not ready now: " + na.String() + "; pods there get no credentials from their Pod Identity association",
				Command: podIdentityAgentCommand(name)})
		case !na.Found && baseOK:
			out = append(out, Regression{Kind: RegWorkloadIdentity, Status: StatusFail, Object: name,
				Message: what + " was ready at the baseline and is gone now: " + na.String() + "; pods get no credentials from their Pod Identity associations",
				Command: podIdentityAgentCommand(name)})
		}
	}
	return out
}

// gkeNodesText is "N nodes labelled iam.gke.io/gke-metadata-server-enabled=true",
// or "its nodes" when they were not read.
func gkeNodesText(g health.GKEMetadataServer) string {
	if g.Nodes < 0 {
		return "its nodes"
	}
	return cli.Plural(g.Nodes, "node") + " labelled " + health.LabelGKEMetadataServer + "=true"
}
