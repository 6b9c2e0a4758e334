package deprecations

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// DefaultPageSize is the page size of every list.
const DefaultPageSize = 250

// LastAppliedAnnotation is kubectl's client-side apply annotation.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

const helmSecretType = "helm.sh/release.v1"

// CRDMigrateHint is the hint for stored versions that need migrating.
const CRDMigrateHint = "kubectl crd-migrate"

// Served is what the server serves, from discovery.
type Served struct {
	// kinds["group/version"][kind] = resource
	kinds map[string]map[string]string
	// preferred[group] = preferred version
	preferred map[string]string
	// clusterScoped["group/version"][resource] is set for resources that
	// live outside namespaces.
	clusterScoped map[string]map[string]bool
}

// Discover reads the served group versions and resources. Groups that fail
// discovery (an unavailable aggregated API) are left out and returned as
// errors alongside the result.
func Discover(dc discovery.DiscoveryInterface) (*Served, error) {
	s := &Served{kinds: map[string]map[string]string{}, preferred: map[string]string{}, clusterScoped: map[string]map[string]bool{}}
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	for _, g := range groups {
		if g.PreferredVersion.Version != "" {
			s.preferred[g.Name] = g.PreferredVersion.Version
		}
	}
	for _, l := range lists {
		if l == nil {
			continue
		}
		m := map[string]string{}
		cs := map[string]bool{}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			m[r.Kind] = r.Name
			if !r.Namespaced {
				cs[r.Name] = true
			}
		}
		s.kinds[l.GroupVersion] = m
		s.clusterScoped[l.GroupVersion] = cs
	}
	return s, err
}

// Serves reports whether the group version serves kind (any kind when
// kind is empty).
func (s *Served) Serves(groupVersion, kind string) bool {
	if s == nil {
		return false
	}
	m, ok := s.kinds[groupVersion]
	if !ok {
		return false
	}
	if kind == "" {
		return true
	}
	_, ok = m[kind]
	return ok
}

// ObjectsReader finds objects written through deprecated or removed APIs:
// the apiVersion each field manager used (metadata.managedFields) and the
// apiVersion of kubectl's last-applied-configuration annotation.
type ObjectsReader struct {
	// Metadata, when set, lists metadata only (PartialObjectMetadataList,
	// protobuf where the apiserver offers it): managedFields and
	// annotations are all that is read, and decoding whole objects into
	// maps was half the CPU of a scan, most of a sweep over many contexts.
	// Otherwise Dynamic lists whole objects.
	Metadata metadata.Interface
	Dynamic  dynamic.Interface
	Table    *apilifecycle.Table
	Served   *Served
	// Namespace limits the scan ("" is every namespace).
	Namespace string
	PageSize  int64
	// Retry retries a page's transient errors.
	Retry Retry
	// Listed, when set, may hand over the objects of a resource the caller
	// has already read whole in every namespace (their managedFields and
	// annotations are what is read), so that it is not listed twice; when
	// it reports false the resource is listed as usual.
	Listed func(ctx context.Context, gr schema.GroupResource) ([]metav1.Object, bool)
}

// ObjectsResult is what the objects reader found.
type ObjectsResult struct {
	Findings []Finding
	// Scanned counts objects; StaleAnnotations counts last-applied
	// annotations in a deprecated apiVersion that no live writer uses.
	Scanned          int
	StaleAnnotations int
	// Resources lists what was listed, as resource.group.
	Resources []string
}

// Read lists, in the preferred served version, every resource whose kind
// has a deprecated or removed version at target (or whose replacement it
// is), and reports the managers and annotations that use those versions.
func (r *ObjectsReader) Read(ctx context.Context, target apilifecycle.Release) (ObjectsResult, error) {
	var res ObjectsResult
	type gk struct{ group, kind string }
	want := map[gk]bool{}
	for _, e := range r.Table.InWindow(target) {
		if e.Kind == "" {
			continue
		}
		// Only kinds that can be written through another version: a kind
		// deprecated as a whole (v1 Endpoints, v1 ComponentStatus) shows the
		// same version for every writer and says nothing about who migrated.
		if v, ok := r.Served.preferred[e.Group]; ok && v != e.Version && r.Served.Serves(apilifecycle.JoinAPIVersion(e.Group, v), e.Kind) {
			want[gk{e.Group, e.Kind}] = true
		}
		if !e.Replacement.IsZero() && e.Replacement.Kind == e.Kind {
			want[gk{e.Replacement.Group, e.Replacement.Kind}] = true
		}
	}
	var gvrs []schema.GroupVersionResource
	kindOf := map[schema.GroupVersionResource]string{}
	for k := range want {
		v, ok := r.Served.preferred[k.group]
		if !ok {
			continue
		}
		res, ok := r.Served.kinds[apilifecycle.JoinAPIVersion(k.group, v)][k.kind]
		if !ok {
			continue
		}
		gvr := schema.GroupVersionResource{Group: k.group, Version: v, Resource: res}
		gvrs = append(gvrs, gvr)
		kindOf[gvr] = k.kind
	}
	sort.Slice(gvrs, func(i, j int) bool { return gvrs[i].String() < gvrs[j].String() })
	page := r.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	for _, gvr := range gvrs {
		res.Resources = append(res.Resources, gvr.GroupResource().String())
		if r.Listed != nil {
			if objs, ok := r.Listed(ctx, gvr.GroupResource()); ok {
				for _, o := range objs {
					res.Scanned++
					r.object(o, kindOf[gvr], &res)
				}
				continue
			}
		}
		// -n limits namespaced resources only; a cluster-scoped kind
		// (ValidatingAdmissionPolicy, MutatingAdmissionPolicy, ...) has
		// no namespaced path and would answer 404. As kubectl does, the
		// namespace is ignored for them.
		ns := ""
		if r.Namespace != "" && !r.Served.clusterScoped[gvr.GroupVersion().String()][gvr.Resource] {
			ns = r.Namespace
		}
		what := "list of " + gvr.GroupResource().String()
		var err error
		if r.Metadata != nil {
			var ri metadata.ResourceInterface = r.Metadata.Resource(gvr)
			if ns != "" {
				ri = r.Metadata.Resource(gvr).Namespace(ns)
			}
			err = listPages(ctx, r.Retry, what, page,
				func(ctx context.Context, opts metav1.ListOptions) ([]metav1.PartialObjectMetadata, string, error) {
					l, err := ri.List(ctx, opts)
					if err != nil {
						return nil, "", err
					}
					return l.Items, l.Continue, nil
				},
				func(m *metav1.PartialObjectMetadata) string { return m.Namespace + "/" + m.Name },
				func(m *metav1.PartialObjectMetadata) {
					res.Scanned++
					r.object(m, kindOf[gvr], &res)
				})
		} else {
			var ri dynamic.ResourceInterface = r.Dynamic.Resource(gvr)
			if ns != "" {
				ri = r.Dynamic.Resource(gvr).Namespace(ns)
			}
			err = listPages(ctx, r.Retry, what, page,
				func(ctx context.Context, opts metav1.ListOptions) ([]unstructured.Unstructured, string, error) {
					l, err := ri.List(ctx, opts)
					if err != nil {
						return nil, "", err
					}
					return l.Items, l.GetContinue(), nil
				},
				func(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() },
				func(u *unstructured.Unstructured) {
					res.Scanned++
					r.object(u, kindOf[gvr], &res)
				})
		}
		if err != nil {
			return res, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
	}
	return res, nil
}

func (r *ObjectsReader) object(u metav1.Object, kind string, res *ObjectsResult) {
	loc := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		loc = ns + "/" + loc
	}
	deprecatedVersion := func(av string) bool {
		e, ok := r.Table.Lookup(av, kind)
		return ok && interesting(e)
	}
	live := map[string]bool{}
	for _, mf := range u.GetManagedFields() {
		if !deprecatedVersion(mf.APIVersion) {
			continue
		}
		live[mf.APIVersion] = true
		f := Finding{Source: SourceObjects, Location: kind + " " + loc, APIVersion: mf.APIVersion, Kind: kind,
			Namespace: u.GetNamespace(), Name: u.GetName(), Who: mf.Manager, Verb: string(mf.Operation),
			Detail: "field manager " + mf.Manager + " wrote this object through " + mf.APIVersion}
		if mf.Subresource != "" {
			f.Subresource = mf.Subresource
		}
		if mf.Time != nil {
			f.LastSeen = mf.Time.UTC()
		}
		res.Findings = append(res.Findings, f)
	}
	la := u.GetAnnotations()[LastAppliedAnnotation]
	if la == "" {
		return
	}
	var applied struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal([]byte(la), &applied) != nil || applied.APIVersion == "" || !deprecatedVersion(applied.APIVersion) {
		return
	}
	if live[applied.APIVersion] {
		return // the writer is already reported
	}
	if len(u.GetManagedFields()) > 0 {
		// Every manager, kubectl's apply included, last wrote through a
		// current version: the annotation is stale, not a live writer.
		res.StaleAnnotations++
		return
	}
	res.Findings = append(res.Findings, Finding{Source: SourceObjects, Location: kind + " " + loc,
		APIVersion: applied.APIVersion, Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(),
		Who: "kubectl apply", Detail: "last-applied-configuration uses " + applied.APIVersion + " (no managedFields to tell whether it is stale)"})
}

// HelmReader reads Helm 3 release records from Secrets (type
// helm.sh/release.v1) and ConfigMaps (label owner=helm) with paged lists,
// one list per kind rather than a request per release.
type HelmReader struct {
	Kube    kubernetes.Interface
	Scanner *ManifestScanner
	// Namespace limits the scan ("" is every namespace).
	Namespace string
	// History scans every kept revision, not only the deployed one.
	History    bool
	PageSize   int64
	MaxRelease int64
	// Retry retries a page's transient errors.
	Retry Retry
	// Metadata, when set, serves the first pass (which revisions to decode)
	// as object metadata only, so each record's data crosses the wire once
	// rather than twice.
	Metadata metadata.Interface
}

// HelmResult is what the Helm reader found.
type HelmResult struct {
	Findings []Finding
	Skipped  []Skipped
	Releases int
	Records  int
	// Decoded are the records read, without their manifests: which chart
	// at which version each release runs (the addons gate of pre-flight
	// finds addons by them).
	Decoded []HelmRelease
}

type helmRef struct {
	kind, ns, name string
	release        string
	revision       int
	status         string
}

// Read scans the deployed revision of every release (every kept revision
// with History).
func (h *HelmReader) Read(ctx context.Context) (HelmResult, error) {
	var res HelmResult
	page := h.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	if h.History {
		// Every kept revision is decoded: one pass.
		releases := map[string]bool{}
		decode := func(ref helmRef, data []byte) {
			res.Records++
			releases[ref.kind+"/"+ref.ns+"/"+ref.release] = true
			h.decode(ref, data, &res)
		}
		if err := h.listSecrets(ctx, page, func(s *corev1.Secret) { decode(refOf("Secret", s.ObjectMeta), s.Data["release"]) }); err != nil {
			return res, err
		}
		if err := h.listConfigMaps(ctx, page, func(c *corev1.ConfigMap) { decode(refOf("ConfigMap", c.ObjectMeta), []byte(c.Data["release"])) }); err != nil {
			return res, err
		}
		res.Releases = len(releases)
		return res, nil
	}
	// First pass: labels only, to pick the revisions to decode. The list
	// pages are dropped as soon as they are read.
	refs, err := h.labels(ctx, page)
	if err != nil {
		return res, err
	}
	res.Records = len(refs)
	pick := h.pick(refs)
	res.Releases = len(pick.releases)
	if len(pick.decode) == 0 {
		return res, nil
	}
	// Second pass: decode the chosen records page by page.
	if err := h.listSecrets(ctx, page, func(s *corev1.Secret) {
		if ref := refOf("Secret", s.ObjectMeta); pick.decode[ref.key()] {
			h.decode(ref, s.Data["release"], &res)
		}
	}); err != nil {
		return res, err
	}
	if err := h.listConfigMaps(ctx, page, func(c *corev1.ConfigMap) {
		if ref := refOf("ConfigMap", c.ObjectMeta); pick.decode[ref.key()] {
			h.decode(ref, []byte(c.Data["release"]), &res)
		}
	}); err != nil {
		return res, err
	}
	return res, nil
}

// labels returns a ref per release record, read as metadata alone when
// h.Metadata is set.
func (h *HelmReader) labels(ctx context.Context, page int64) ([]helmRef, error) {
	var refs []helmRef
	if h.Metadata == nil {
		if err := h.listSecrets(ctx, page, func(s *corev1.Secret) {
			refs = append(refs, refOf("Secret", s.ObjectMeta))
		}); err != nil {
			return nil, err
		}
		if err := h.listConfigMaps(ctx, page, func(c *corev1.ConfigMap) {
			refs = append(refs, refOf("ConfigMap", c.ObjectMeta))
		}); err != nil {
			return nil, err
		}
		return refs, nil
	}
	for _, l := range []struct {
		kind, what string
		gvr        schema.GroupVersionResource
		opts       metav1.ListOptions
	}{
		{"Secret", "Helm release Secrets", corev1.SchemeGroupVersion.WithResource("secrets"), metav1.ListOptions{FieldSelector: "type=" + helmSecretType}},
		{"ConfigMap", "Helm release ConfigMaps", corev1.SchemeGroupVersion.WithResource("configmaps"), metav1.ListOptions{LabelSelector: "owner=helm"}},
	} {
		err := listPages(ctx, h.Retry, "list of "+l.what, page,
			func(ctx context.Context, opts metav1.ListOptions) ([]metav1.PartialObjectMetadata, string, error) {
				opts.FieldSelector, opts.LabelSelector = l.opts.FieldSelector, l.opts.LabelSelector
				ml, err := h.Metadata.Resource(l.gvr).Namespace(h.Namespace).List(ctx, opts)
				if err != nil {
					return nil, "", err
				}
				return ml.Items, ml.Continue, nil
			},
			func(m *metav1.PartialObjectMetadata) string { return m.Namespace + "/" + m.Name },
			func(m *metav1.PartialObjectMetadata) { refs = append(refs, refOf(l.kind, m.ObjectMeta)) })
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	return refs, nil
}

// listSecrets hands each Helm release Secret to each, page by page.
func (h *HelmReader) listSecrets(ctx context.Context, page int64, each func(*corev1.Secret)) error {
	err := listPages(ctx, h.Retry, "list of Helm release Secrets", page,
		func(ctx context.Context, opts metav1.ListOptions) ([]corev1.Secret, string, error) {
			opts.FieldSelector = "type=" + helmSecretType
			l, err := h.Kube.CoreV1().Secrets(h.Namespace).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.Continue, nil
		},
		func(s *corev1.Secret) string { return s.Namespace + "/" + s.Name },
		func(s *corev1.Secret) {
			if s.Type == helmSecretType {
				each(s)
			}
		})
	if err != nil {
		return fmt.Errorf("listing Helm release Secrets: %w", err)
	}
	return nil
}

// listConfigMaps hands each Helm release ConfigMap to each, page by page.
func (h *HelmReader) listConfigMaps(ctx context.Context, page int64, each func(*corev1.ConfigMap)) error {
	err := listPages(ctx, h.Retry, "list of Helm release ConfigMaps", page,
		func(ctx context.Context, opts metav1.ListOptions) ([]corev1.ConfigMap, string, error) {
			opts.LabelSelector = "owner=helm"
			l, err := h.Kube.CoreV1().ConfigMaps(h.Namespace).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.Continue, nil
		},
		func(c *corev1.ConfigMap) string { return c.Namespace + "/" + c.Name },
		func(c *corev1.ConfigMap) {
			if c.Labels["owner"] == "helm" {
				each(c)
			}
		})
	if err != nil {
		return fmt.Errorf("listing Helm release ConfigMaps: %w", err)
	}
	return nil
}

func (r helmRef) key() string { return r.kind + "/" + r.ns + "/" + r.name }

func refOf(kind string, m metav1.ObjectMeta) helmRef {
	rev, _ := strconv.Atoi(m.Labels["version"])
	rel := m.Labels["name"]
	if rel == "" {
		rel = m.Name
	}
	return helmRef{kind: kind, ns: m.Namespace, name: m.Name, release: rel, revision: rev, status: m.Labels["status"]}
}

type helmPick struct {
	releases map[string]bool
	decode   map[string]bool
}

// pick chooses the records to decode: every one with History, else the
// deployed revision of each release (the latest when none is deployed).
func (h *HelmReader) pick(refs []helmRef) helmPick {
	p := helmPick{releases: map[string]bool{}, decode: map[string]bool{}}
	best := map[string]helmRef{}
	for _, r := range refs {
		rel := r.kind + "/" + r.ns + "/" + r.release
		p.releases[rel] = true
		if h.History {
			p.decode[r.key()] = true
			continue
		}
		b, ok := best[rel]
		switch {
		case !ok:
			best[rel] = r
		case r.status == "deployed" && b.status != "deployed":
			best[rel] = r
		case (r.status == "deployed") == (b.status == "deployed") && r.revision > b.revision:
			best[rel] = r
		}
	}
	for _, r := range best {
		p.decode[r.key()] = true
	}
	return p
}

func (h *HelmReader) decode(ref helmRef, data []byte, res *HelmResult) {
	where := strings.ToLower(ref.kind) + " " + ref.ns + "/" + ref.name
	rel, err := DecodeRelease(data, h.MaxRelease)
	if err != nil {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceHelm, File: where, Reason: "corrupt Helm release record: " + err.Error()})
		return
	}
	if rel.Name == "" {
		rel.Name = ref.release
	}
	if rel.Namespace == "" {
		rel.Namespace = ref.ns
	}
	if rel.Revision == 0 {
		rel.Revision = ref.revision
	}
	if rel.Status == "" {
		rel.Status = ref.status
	}
	head := rel
	head.Manifests = nil
	res.Decoded = append(res.Decoded, head)
	loc := releaseLocation(rel.Namespace, rel.Name, rel.Revision)
	for _, m := range rel.Manifests {
		var sub ManifestResult
		h.Scanner.init()
		h.Scanner.scanYAML(loc, []byte(m), 0, &sub)
		for _, f := range sub.Findings {
			f.Source = SourceHelm
			f.Who = "helm release " + rel.Namespace + "/" + rel.Name
			if f.Name != "" {
				f.Location = loc + ": " + f.Kind + " " + f.Name
			} else {
				f.Location = loc
			}
			f.File, f.Line = "", 0
			status := rel.Status
			f.Detail = strings.TrimSpace(fmt.Sprintf("chart %s %s, revision %d %s; stored in %s", rel.Chart, rel.ChartVersion, rel.Revision, status, where))
			if status == "deployed" {
				f.Hint = "helm upgrade " + rel.Name + " -n " + rel.Namespace + " with a chart that uses " + f.Kind + " in a current version"
			}
			res.Findings = append(res.Findings, f)
		}
		for _, s := range sub.Skipped {
			if s.Partial {
				continue
			}
			s.Source, s.File = SourceHelm, loc+" ("+where+")"
			res.Skipped = append(res.Skipped, s)
		}
	}
}

// CRDReader reports CustomResourceDefinition versions marked deprecated and
// stored versions that are deprecated or no longer served.
type CRDReader struct {
	Client apiextclient.Interface
	// Retry retries a page's transient errors.
	Retry Retry
	// List, when set, supplies the CRDs (a caller that has listed them
	// already) instead of a paged list; its error is returned as it is.
	List func(ctx context.Context) ([]*apiextv1.CustomResourceDefinition, error)
}

// Read lists every CRD.
func (c *CRDReader) Read(ctx context.Context) ([]Finding, int, error) {
	var out []Finding
	n := 0
	if c.List != nil {
		crds, err := c.List(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, crd := range crds {
			n++
			out = append(out, crdFindings(crd)...)
		}
		return out, n, nil
	}
	err := listPages(ctx, c.Retry, "list of CustomResourceDefinitions", DefaultPageSize,
		func(ctx context.Context, opts metav1.ListOptions) ([]apiextv1.CustomResourceDefinition, string, error) {
			l, err := c.Client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.Continue, nil
		},
		func(crd *apiextv1.CustomResourceDefinition) string { return crd.Name },
		func(crd *apiextv1.CustomResourceDefinition) {
			n++
			out = append(out, crdFindings(crd)...)
		})
	if err != nil {
		return nil, n, fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	return out, n, nil
}

func crdFindings(crd *apiextv1.CustomResourceDefinition) []Finding {
	var out []Finding
	versions := map[string]apiextv1.CustomResourceDefinitionVersion{}
	for _, v := range crd.Spec.Versions {
		versions[v.Name] = v
		if !v.Deprecated {
			continue
		}
		detail := "version marked deprecated"
		if v.DeprecationWarning != nil && *v.DeprecationWarning != "" {
			detail = "deprecation warning: " + *v.DeprecationWarning
		}
		f := Finding{Source: SourceCRDs, Location: "crd " + crd.Name, APIVersion: crd.Spec.Group + "/" + v.Name,
			Kind: crd.Spec.Names.Kind, Resource: crd.Spec.Names.Plural, Name: crd.Name, Detail: detail}
		f.server = &serverLifecycle{notServed: !v.Served}
		out = append(out, f)
	}
	for _, sv := range crd.Status.StoredVersions {
		v, ok := versions[sv]
		if ok && v.Served && !v.Deprecated {
			continue
		}
		why := "no longer served"
		if ok && v.Served {
			why = "deprecated"
		}
		f := Finding{Source: SourceCRDs, Location: "crd " + crd.Name, APIVersion: crd.Spec.Group + "/" + sv,
			Kind: crd.Spec.Names.Kind, Resource: crd.Spec.Names.Plural, Name: crd.Name,
			Detail: "status.storedVersions still lists " + sv + ", which is " + why + ": objects may still be stored in it",
			Hint:   CRDMigrateHint + " " + crd.Name}
		f.server = &serverLifecycle{notServed: !ok || !v.Served}
		out = append(out, f)
	}
	return out
}
