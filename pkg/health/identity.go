package health

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Workload identity continuity: for each ServiceAccount that carries an
// identity binding, a server-side dry-run pod creation with that
// ServiceAccount shows what the provider's mutating webhook injects (the
// projected token volume and the environment the SDKs read); verify
// compares it with what it injected at the baseline.

// Identity providers.
const (
	// IdentityEKS is EKS IAM Roles for Service Accounts, injected by
	// aws/amazon-eks-pod-identity-webhook.
	IdentityEKS = "eks-irsa"
	// IdentityAzure is Microsoft Entra Workload ID, injected by
	// Azure/azure-workload-identity's webhook.
	IdentityAzure = "azure"
	// IdentityGKE is Workload Identity Federation for GKE, which injects
	// nothing into the pod: the node's GKE metadata server serves the
	// ServiceAccount's token.
	IdentityGKE = "gke"
)

// Binding annotations and labels, each where its webhook's source
// defines it.
const (
	// AnnotationEKSRoleARN: amazon-eks-pod-identity-webhook v0.6.17,
	// pkg/annotations.go RoleARNAnnotation = "role-arn" under the
	// annotation domain "eks.amazonaws.com" (pkg/handler/handler.go
	// NewModifier).
	AnnotationEKSRoleARN = "eks.amazonaws.com/role-arn"
	// AnnotationAzureClientID: azure-workload-identity v1.6.0,
	// pkg/webhook/consts.go ClientIDAnnotation.
	AnnotationAzureClientID = "azure.workload.identity/client-id"
	// LabelAzureUse: the same file's UseWorkloadIdentityLabel; the
	// webhook's MutatingWebhookConfiguration selects pods by it
	// (deploy/azure-wi-webhook.yaml objectSelector
	// azure.workload.identity/use: "true"), so the probe pod carries it.
	LabelAzureUse = "azure.workload.identity/use"
	// AnnotationGKEServiceAccount binds a Kubernetes ServiceAccount to an
	// IAM service account (GKE docs, "Authenticate to Google Cloud APIs
	// from GKE workloads",
	// https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity).
	AnnotationGKEServiceAccount = "iam.gke.io/gcp-service-account"
	// LabelGKEMetadataServer marks nodes of node pools that run the GKE
	// metadata server (same page: pods that must use Workload Identity
	// Federation select nodes by iam.gke.io/gke-metadata-server-enabled:
	// "true"); the gke-metadata-server DaemonSet selects nodes by it.
	LabelGKEMetadataServer = "iam.gke.io/gke-metadata-server-enabled"
	// GKEMetadataServerDaemonSet is the DaemonSet in kube-system that runs
	// the GKE metadata server on those nodes (GKE docs, "About Workload
	// Identity Federation for GKE", GKE metadata server,
	// https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity).
	GKEMetadataServerDaemonSet = "gke-metadata-server"
	// IdentityProbeName names the dry-run pod.
	IdentityProbeName = "gpufleet-identity-probe"
	// IdentityProbeLabel marks it.
	IdentityProbeLabel = "gpufleet.dev/identity-probe"
	// serviceAccountVolumePrefix is the volume the ServiceAccount
	// admission plugin itself adds (kubernetes v1.37.2
	// plugin/pkg/admission/serviceaccount/admission.go,
	// ServiceAccountVolumeName = "kube-api-access"): not a webhook's.
	serviceAccountVolumePrefix = "kube-api-access-"
)

// envPrefix is the prefix of the environment each webhook injects:
// AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_REGION,
// AWS_DEFAULT_REGION, AWS_STS_REGIONAL_ENDPOINTS (amazon-eks-pod-identity-
// webhook v0.6.17 pkg/handler/handler.go); AZURE_CLIENT_ID,
// AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST
// (azure-workload-identity v1.6.0 pkg/webhook/consts.go).
// EKS Pod Identity's are AWS_CONTAINER_CREDENTIALS_FULL_URI and
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (podidentity.go).
var envPrefix = map[string]string{IdentityEKS: "AWS_", IdentityAzure: "AZURE_", IdentityEKSPodIdentity: "AWS_"}

// IdentityBinding is one ServiceAccount's binding to a cloud identity.
type IdentityBinding struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	Provider       string `json:"provider"`
	// Identity is the role ARN, IAM service account or client ID bound.
	Identity string `json:"identity"`
	// AssociationID names an EKS Pod Identity association in the EKS API.
	AssociationID string `json:"associationId,omitempty"`
}

// ID is namespace/name and the provider.
func (b IdentityBinding) ID() string {
	return b.Namespace + "/" + b.ServiceAccount + " (" + b.Provider + ")"
}

// IdentityBindings are the bindings of the ServiceAccounts, one per
// provider annotation set, sorted.
func IdentityBindings(sas []*corev1.ServiceAccount) []IdentityBinding {
	var out []IdentityBinding
	for _, sa := range sas {
		for _, p := range []struct{ provider, key string }{
			{IdentityEKS, AnnotationEKSRoleARN}, {IdentityAzure, AnnotationAzureClientID}, {IdentityGKE, AnnotationGKEServiceAccount},
		} {
			if v := strings.TrimSpace(sa.Annotations[p.key]); v != "" {
				out = append(out, IdentityBinding{Namespace: sa.Namespace, ServiceAccount: sa.Name, Provider: p.provider, Identity: v})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// IdentityProbePod is the pod sent as a dry run for a binding: the
// ServiceAccount, the Azure opt-in label where Azure binds it, one
// container that passes Pod Security restricted, small requests and
// limits for a namespace's quota. Nothing is stored and nothing runs.
func IdentityProbePod(b IdentityBinding) *corev1.Pod {
	labels := map[string]string{IdentityProbeLabel: "true"}
	if b.Provider == IdentityAzure {
		labels[LabelAzureUse] = "true"
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: IdentityProbeName, Namespace: b.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: b.ServiceAccount,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

// Injection is what a webhook added to the probe pod.
type Injection struct {
	// Env are the names of the provider's variables added to the container.
	Env []string `json:"env,omitempty"`
	// TokenVolumes are the projected ServiceAccount token volumes added,
	// each "audience A at MOUNTPATH" (names vary: Azure's carries a hash
	// of the pod's name).
	TokenVolumes []string `json:"tokenVolumes,omitempty"`
}

// Empty says nothing was injected.
func (i Injection) Empty() bool { return len(i.Env) == 0 && len(i.TokenVolumes) == 0 }

func (i Injection) String() string {
	if i.Empty() {
		return "nothing"
	}
	var parts []string
	if len(i.Env) > 0 {
		parts = append(parts, "env "+strings.Join(i.Env, ", "))
	}
	for _, v := range i.TokenVolumes {
		parts = append(parts, "token volume "+v)
	}
	return strings.Join(parts, "; ")
}

// InjectedInto compares the pod sent with the pod the apiserver returned
// and keeps what the provider's webhook adds: its environment in the
// first container and projected ServiceAccount token volumes other than
// the ServiceAccount admission plugin's own.
func InjectedInto(provider string, sent, got *corev1.Pod) Injection {
	var inj Injection
	if got == nil || len(got.Spec.Containers) == 0 {
		return inj
	}
	had := map[string]bool{}
	if sent != nil && len(sent.Spec.Containers) > 0 {
		for _, e := range sent.Spec.Containers[0].Env {
			had[e.Name] = true
		}
	}
	c := got.Spec.Containers[0]
	prefix := envPrefix[provider]
	for _, e := range c.Env {
		if prefix != "" && strings.HasPrefix(e.Name, prefix) && !had[e.Name] {
			inj.Env = append(inj.Env, e.Name)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, v := range got.Spec.Volumes {
		if v.Projected == nil || strings.HasPrefix(v.Name, serviceAccountVolumePrefix) {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken == nil {
				continue
			}
			at := mounts[v.Name]
			if at == "" {
				at = tokenNotMounted
			}
			inj.TokenVolumes = append(inj.TokenVolumes, fmt.Sprintf("audience %s at %s", s.ServiceAccountToken.Audience, at))
		}
	}
	sort.Strings(inj.Env)
	sort.Strings(inj.TokenVolumes)
	return inj
}

// tokenNotMounted is the mount path recorded for a token volume the pod
// projects but its container does not mount: the container has no token
// file, so it counts as lost (Injection.Lost), not as moved.
const tokenNotMounted = "(not mounted in the container)"

// tokenVolume splits a TokenVolumes entry, "audience A at MOUNTPATH".
func tokenVolume(s string) (audience, at string) {
	rest, _ := strings.CutPrefix(s, "audience ")
	audience, at, _ = strings.Cut(rest, " at ")
	return audience, at
}

// Lost is what the baseline's injection had and now's lacks. A token
// volume is compared by its audience alone: a webhook release may mount
// the same token elsewhere (azure-workload-identity v1.5.1 mounts it at
// /var/run/secrets/azure/tokens, pkg/webhook/consts.go
// TokenFileMountPath; v1.6.0 at /var/run/secrets/azure/wi, VolumeMountPath)
// and says where in AZURE_FEDERATED_TOKEN_FILE, so the pod still gets its
// credentials; Moved names such a move. A token mounted at the baseline
// and now only projected, not mounted in the container, is lost: the
// container has no token file wherever the environment points.
func (i Injection) Lost(now Injection) Injection {
	var out Injection
	out.Env = missing(i.Env, now.Env)
	has, mounted := map[string]bool{}, map[string]bool{}
	for _, v := range now.TokenVolumes {
		a, p := tokenVolume(v)
		has[a] = true
		if p != tokenNotMounted {
			mounted[a] = true
		}
	}
	for _, v := range i.TokenVolumes {
		a, p := tokenVolume(v)
		if !has[a] || (p != tokenNotMounted && !mounted[a]) {
			out.TokenVolumes = append(out.TokenVolumes, v)
		}
	}
	return out
}

// TokenMove is a token volume of one audience mounted at another path than
// at the baseline.
type TokenMove struct {
	Audience, From, To string
}

func (m TokenMove) String() string {
	return fmt.Sprintf("the %s token is mounted at %s, at %s at the baseline", m.Audience, m.To, m.From)
}

// Moved is each token volume of the baseline whose audience now's
// injection still mounts in the container, but at none of the baseline's
// mount paths (one no longer mounted at all is Lost).
func (i Injection) Moved(now Injection) []TokenMove {
	at := map[string][]string{}
	for _, v := range now.TokenVolumes {
		if a, p := tokenVolume(v); p != tokenNotMounted {
			at[a] = append(at[a], p)
		}
	}
	was := map[string]map[string]bool{}
	for _, v := range i.TokenVolumes {
		a, p := tokenVolume(v)
		if was[a] == nil {
			was[a] = map[string]bool{}
		}
		was[a][p] = true
	}
	stays := func(a string) bool {
		for _, q := range at[a] {
			if was[a][q] {
				return true
			}
		}
		return false
	}
	var out []TokenMove
	for _, v := range i.TokenVolumes {
		if a, p := tokenVolume(v); len(at[a]) > 0 && !stays(a) {
			out = append(out, TokenMove{Audience: a, From: p, To: strings.Join(at[a], ", ")})
		}
	}
	return out
}

func missing(base, now []string) []string {
	has := map[string]bool{}
	for _, s := range now {
		has[s] = true
	}
	var out []string
	for _, s := range base {
		if !has[s] {
			out = append(out, s)
		}
	}
	return out
}

// IdentityFact is one binding as probed.
type IdentityFact struct {
	IdentityBinding
	// Injected is what the webhook injected into the dry-run pod (nil when
	// no dry run was made: GKE, or the dry run failed).
	Injected *Injection `json:"injected,omitempty"`
	// Unread says why the dry run failed.
	Unread string `json:"unread,omitempty"`
}

// GKEMetadataServer is the GKE metadata server's DaemonSet as read.
type GKEMetadataServer struct {
	// Found says the DaemonSet exists.
	Found   bool  `json:"found"`
	Desired int32 `json:"desired,omitempty"`
	Ready   int32 `json:"ready,omitempty"`
	// Excused counts its pods not ready on nodes NotReady or cordoned
	// (see DownNodePods).
	Excused int32 `json:"excused,omitempty"`
	// Nodes are the nodes labelled LabelGKEMetadataServer=true (-1: not
	// read).
	Nodes int `json:"nodes"`
}

// OK says the DaemonSet runs a ready pod on every node it should and at
// least one node is labelled for it.
func (g GKEMetadataServer) OK() bool {
	return g.Found && g.Desired > 0 && g.Ready+g.Excused >= g.Desired && g.Nodes != 0
}

func (g GKEMetadataServer) String() string {
	if !g.Found {
		return "no DaemonSet kube-system/" + GKEMetadataServerDaemonSet
	}
	nodes := fmt.Sprintf("%d nodes labelled %s=true", g.Nodes, LabelGKEMetadataServer)
	if g.Nodes < 0 {
		nodes = "nodes not read"
	}
	return fmt.Sprintf("DaemonSet kube-system/%s: %d of %d pods ready%s; %s", GKEMetadataServerDaemonSet, g.Ready, g.Desired, excusedNote(g.Excused), nodes)
}

// ReadGKEMetadataServer finds the GKE metadata server's DaemonSet among
// dss and counts the nodes labelled for it (nodes nil: not read).
func ReadGKEMetadataServer(dss []*appsv1.DaemonSet, nodes []*corev1.Node) GKEMetadataServer {
	g := GKEMetadataServer{Nodes: -1}
	for _, ds := range dss {
		if ds.Namespace == metav1.NamespaceSystem && ds.Name == GKEMetadataServerDaemonSet {
			g.Found, g.Desired, g.Ready = true, ds.Status.DesiredNumberScheduled, ds.Status.NumberReady
		}
	}
	if nodes != nil {
		g.Nodes = 0
		for _, n := range nodes {
			if n.Labels[LabelGKEMetadataServer] == "true" {
				g.Nodes++
			}
		}
	}
	return g
}

// IdentityChange is one binding worse than at the baseline.
type IdentityChange struct {
	Binding IdentityBinding
	// Lost is what is no longer injected (EKS, Azure).
	Lost Injection
	// Unread: the dry run could not be made now (why).
	Unread string
	// Gone: the ServiceAccount or its binding is gone.
	Gone bool
	// Moved are token volumes of the same audience mounted elsewhere now
	// (a change, not a loss: see Injection.Lost).
	Moved []TokenMove
}

func (c IdentityChange) String() string {
	sa := "ServiceAccount " + c.Binding.Namespace + "/" + c.Binding.ServiceAccount
	switch {
	case c.Gone && c.Binding.Provider == IdentityEKSPodIdentity:
		return podIdentityGone(c.Binding)
	case c.Gone:
		return sa + " no longer carries its " + c.Binding.Provider + " identity binding (" + c.Binding.Identity + ")"
	case c.Unread != "":
		return sa + ": the dry-run pod could not be made now: " + c.Unread
	case c.Lost.Empty() && len(c.Moved) > 0:
		var ms []string
		for _, m := range c.Moved {
			ms = append(ms, m.String())
		}
		return fmt.Sprintf("ServiceAccount %s/%s (%s %s): %s; the webhook's environment names the new path, but a program or a volume mount that reads the old one finds no token",
			c.Binding.Namespace, c.Binding.ServiceAccount, c.Binding.Provider, c.Binding.Identity, strings.Join(ms, "; "))
	}
	return fmt.Sprintf("ServiceAccount %s/%s (%s %s): the mutating webhook no longer injects %s, which it injected at the baseline; its pods get no %s credentials",
		c.Binding.Namespace, c.Binding.ServiceAccount, c.Binding.Provider, c.Binding.Identity, c.Lost, c.Binding.Provider)
}

// DiffIdentities compares the baseline's probed bindings with now's: a
// binding whose injection lost anything or mounts a token elsewhere, one
// not probed now, one gone. Bindings the baseline did not probe (GKE, unread) are left out.
func DiffIdentities(base, now []IdentityFact) []IdentityChange {
	cur := map[string]IdentityFact{}
	for _, f := range now {
		cur[f.ID()] = f
	}
	var out []IdentityChange
	for _, b := range base {
		if b.Injected == nil || b.Injected.Empty() {
			continue
		}
		n, ok := cur[b.ID()]
		switch {
		case !ok:
			out = append(out, IdentityChange{Binding: b.IdentityBinding, Gone: true})
		case n.Injected == nil:
			why := n.Unread
			if why == "" {
				why = "not probed"
			}
			out = append(out, IdentityChange{Binding: b.IdentityBinding, Unread: why})
		default:
			l, m := b.Injected.Lost(*n.Injected), b.Injected.Moved(*n.Injected)
			if !l.Empty() || len(m) > 0 {
				out = append(out, IdentityChange{Binding: n.IdentityBinding, Lost: l, Moved: m})
			}
		}
	}
	return out
}
