package crdmigrate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// PageSize is the number of objects per list page, for counting and for the
// migration loop.
const PageSize = 500

// Clients are the API clients the package uses. Metadata and Objects are
// optional: when nil, objects are counted with Dynamic (full objects
// instead of metadata) and rewritten with Dynamic (decoded and encoded
// again instead of passed through).
type Clients struct {
	Ext      apiextclient.Interface
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Objects  Objects
}

func (c Clients) objects() Objects {
	if c.Objects != nil {
		return c.Objects
	}
	return DynamicObjects{Client: c.Dynamic}
}

// Verdict says what a CRD needs.
type Verdict string

// Verdicts, from best to worst.
const (
	// VerdictUpToDate: status.storedVersions holds only the storage version;
	// nothing to do.
	VerdictUpToDate Verdict = "UpToDate"
	// VerdictMigrationNeeded: storedVersions lists other versions, so
	// objects may still be stored at them; `run` rewrites them.
	VerdictMigrationNeeded Verdict = "MigrationNeeded"
	// VerdictBlocked: a migration is needed but cannot succeed now (a
	// webhook the reads or writes depend on is down); Reasons say which.
	VerdictBlocked Verdict = "Blocked"
)

// Word is the verdict's word in a table's STATUS column: OK when up to
// date, WARN when a migration is needed, BLOCKED when one cannot succeed
// now. JSON writes the same word in lower case (MarshalText).
func (v Verdict) Word() cli.Status {
	switch v {
	case VerdictUpToDate:
		return cli.StatusOK
	case VerdictMigrationNeeded:
		return cli.StatusWarn
	case VerdictBlocked:
		return cli.StatusBlocked
	}
	return cli.StatusUnknown
}

// MarshalText writes the verdict as every report's JSON and YAML do: its
// table word in lower case ("ok", "warn", "blocked").
func (v Verdict) MarshalText() ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	return []byte(v.Word().JSONWord()), nil
}

// UnmarshalText reads a verdict as MarshalText writes it, or as reports of
// gpufleet.dev/v1alpha1 did ("UpToDate", "MigrationNeeded", "Blocked").
func (v *Verdict) UnmarshalText(b []byte) error {
	w := string(b)
	for _, vd := range []Verdict{VerdictUpToDate, VerdictMigrationNeeded, VerdictBlocked} {
		if w == string(vd) || w == vd.Word().JSONWord() {
			*v = vd
			return nil
		}
	}
	if w == "" {
		*v = ""
		return nil
	}
	return fmt.Errorf("verdict %q is not one of ok, warn, blocked", w)
}

// CRDStatus is the storage state of one CustomResourceDefinition.
type CRDStatus struct {
	Name               string   `json:"name"`
	Group              string   `json:"group"`
	Resource           string   `json:"resource"`
	Scope              string   `json:"scope"`
	StorageVersion     string   `json:"storageVersion"`
	ServedVersions     []string `json:"servedVersions"`
	DeprecatedVersions []string `json:"deprecatedVersions,omitempty"`
	StoredVersions     []string `json:"storedVersions"`
	// Objects is the number of stored objects; -1 when they could not be
	// counted (CountError says why).
	Objects    int64  `json:"objects"`
	CountError string `json:"countError,omitempty"`
	// Conversion is the conversion strategy, None or Webhook.
	Conversion        string          `json:"conversion"`
	ConversionWebhook *WebhookHealth  `json:"conversionWebhook,omitempty"`
	Webhooks          []WebhookHealth `json:"webhooks,omitempty"`
	// Checkpoint describes an earlier run that stopped before the end.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	Verdict    Verdict     `json:"verdict"`
	Reasons    []string    `json:"reasons,omitempty"`
}

// NeedsMigration reports whether storedVersions lists anything besides the
// storage version.
func (s CRDStatus) NeedsMigration() bool {
	return NeedsMigration(s.StoredVersions, s.StorageVersion)
}

// NeedsMigration reports whether storedVersions lists anything besides
// storageVersion.
func NeedsMigration(storedVersions []string, storageVersion string) bool {
	for _, v := range storedVersions {
		if v != storageVersion {
			return true
		}
	}
	return false
}

// StorageVersion returns the version marked storage: true, or "" when none is.
func StorageVersion(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// GVR returns the resource at the CRD's storage version.
func GVR(crd *apiextv1.CustomResourceDefinition) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: StorageVersion(crd), Resource: crd.Spec.Names.Plural}
}

// Inspector reads the storage state of CRDs. It never writes.
type Inspector struct {
	Clients
	// Checkpoints, when set, is consulted for runs that stopped early.
	Checkpoints *CheckpointStore
	// Parallel bounds how many CRDs are counted at once (default 4).
	Parallel int
}

// NotFoundError names CRDs asked for that do not exist.
type NotFoundError struct {
	Names []string
}

func (e *NotFoundError) Error() string {
	if len(e.Names) == 1 {
		return fmt.Sprintf("customresourcedefinition %q not found", e.Names[0])
	}
	return fmt.Sprintf("customresourcedefinitions not found: %s", strings.Join(e.Names, ", "))
}

// GetCRDs returns the named CRDs (all of them when names is empty), sorted
// by name. Missing names give a *NotFoundError.
func GetCRDs(ctx context.Context, ext apiextclient.Interface, names []string) ([]*apiextv1.CustomResourceDefinition, error) {
	var out []*apiextv1.CustomResourceDefinition
	if len(names) == 0 {
		list, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing customresourcedefinitions: %w", err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	} else {
		var missing []string
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				missing = append(missing, n)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading customresourcedefinition %s: %w", n, err)
			}
			out = append(out, crd)
		}
		if len(missing) > 0 {
			return nil, &NotFoundError{Names: missing}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Status inspects the named CRDs (all when names is empty). Errors reading
// the CRDs or the webhook configurations are returned; a CRD whose objects
// cannot be counted gets Objects -1 and a CountError instead.
func (in *Inspector) Status(ctx context.Context, names []string) ([]CRDStatus, error) {
	crds, err := GetCRDs(ctx, in.Ext, names)
	if err != nil {
		return nil, err
	}
	hooks, err := LoadWebhooks(ctx, in.Kube)
	if err != nil {
		return nil, err
	}
	out := make([]CRDStatus, len(crds))
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i, crd := range crds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := in.inspect(ctx, crd, hooks)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			out[i] = st
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

func (in *Inspector) inspect(ctx context.Context, crd *apiextv1.CustomResourceDefinition, hooks *Webhooks) (CRDStatus, error) {
	st := Describe(crd)
	health, err := hooks.Check(ctx, in.Kube, crd)
	if err != nil {
		return st, err
	}
	st.ConversionWebhook, st.Webhooks = health.Conversion, health.Admission
	n, err := CountObjects(ctx, in.Clients, crd)
	if err != nil {
		st.Objects, st.CountError = -1, err.Error()
	} else {
		st.Objects = n
	}
	if in.Checkpoints != nil {
		cp, err := in.Checkpoints.Load(ctx, crd.Name)
		if err == nil && cp != nil {
			st.Checkpoint = cp
		}
	}
	st.Verdict, st.Reasons = verdict(st)
	return st, nil
}

// Describe returns the parts of a CRDStatus that come from the CRD alone.
func Describe(crd *apiextv1.CustomResourceDefinition) CRDStatus {
	st := CRDStatus{
		Name:           crd.Name,
		Group:          crd.Spec.Group,
		Resource:       crd.Spec.Names.Plural,
		Scope:          string(crd.Spec.Scope),
		StorageVersion: StorageVersion(crd),
		StoredVersions: append([]string{}, crd.Status.StoredVersions...),
		ServedVersions: []string{},
		Conversion:     string(apiextv1.NoneConverter),
	}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			st.ServedVersions = append(st.ServedVersions, v.Name)
		}
		if v.Deprecated {
			st.DeprecatedVersions = append(st.DeprecatedVersions, v.Name)
		}
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != "" {
		st.Conversion = string(crd.Spec.Conversion.Strategy)
	}
	return st
}

// verdict decides what a CRD needs, and why.
func verdict(st CRDStatus) (Verdict, []string) {
	if !st.NeedsMigration() {
		if st.Checkpoint != nil {
			return VerdictUpToDate, []string{"a stale checkpoint of an earlier run is left; the next run removes it"}
		}
		return VerdictUpToDate, nil
	}
	var reasons []string
	var old []string
	for _, v := range st.StoredVersions {
		if v != st.StorageVersion {
			old = append(old, v)
		}
	}
	reasons = append(reasons, fmt.Sprintf("storedVersions still lists %s (storage version %s)", strings.Join(old, ", "), st.StorageVersion))
	blocked := false
	if st.Objects != 0 {
		for _, h := range Blockers(st) {
			blocked = true
			reasons = append(reasons, h.Problem())
		}
	}
	for _, h := range st.Webhooks {
		if h.Health == HealthDown && !h.Blocks() {
			reasons = append(reasons, fmt.Sprintf("%s %s is down but has failurePolicy %s: writes skip it", kindWord(h.Kind), h.Name, h.FailurePolicy))
		}
	}
	if st.Objects < 0 {
		blocked = true
		reasons = append(reasons, "objects cannot be listed: "+st.CountError)
	}
	if st.Checkpoint != nil {
		reasons = append(reasons, fmt.Sprintf("an earlier run (%s) stopped after %d of %d objects; `run` resumes it", st.Checkpoint.RunID, st.Checkpoint.Processed, st.Checkpoint.Total))
	}
	if blocked {
		return VerdictBlocked, reasons
	}
	return VerdictMigrationNeeded, reasons
}

// Blockers returns the webhooks that are down and would make reads or
// writes of the CRD's objects fail.
func Blockers(st CRDStatus) []WebhookHealth {
	var out []WebhookHealth
	if st.ConversionWebhook != nil && st.ConversionWebhook.Blocks() {
		out = append(out, *st.ConversionWebhook)
	}
	for _, h := range st.Webhooks {
		if h.Blocks() {
			out = append(out, h)
		}
	}
	return out
}

// CountObjects counts the CRD's objects with paged metadata lists at the
// storage version. The first page's remainingItemCount usually answers at
// once; otherwise every page is read. A list that got no answer at all is
// retried (readRetry).
func CountObjects(ctx context.Context, c Clients, crd *apiextv1.CustomResourceDefinition) (int64, error) {
	gvr := GVR(crd)
	var n int64
	cont := ""
	for {
		opts := metav1.ListOptions{Limit: PageSize, Continue: cont}
		var (
			items     int
			meta      metav1.ListMeta
			listError error
		)
		listError = readRetry.Do(ctx, func() error {
			if c.Metadata != nil {
				l, err := c.Metadata.Resource(gvr).List(ctx, opts)
				if err == nil {
					items, meta = len(l.Items), l.ListMeta
				}
				return err
			}
			l, err := c.Dynamic.Resource(gvr).List(ctx, opts)
			if err == nil {
				items = len(l.Items)
				meta = metav1.ListMeta{Continue: l.GetContinue(), RemainingItemCount: l.GetRemainingItemCount()}
			}
			return err
		})
		if apierrors.IsResourceExpired(listError) || apierrors.IsGone(listError) {
			n, cont = 0, ""
			continue
		}
		if listError != nil {
			return 0, fmt.Errorf("listing %s: %w", gvr.GroupResource(), listError)
		}
		n += int64(items)
		if meta.Continue == "" {
			return n, nil
		}
		if meta.RemainingItemCount != nil {
			return n + *meta.RemainingItemCount, nil
		}
		cont = meta.Continue
	}
}

// SortStatuses orders statuses by name.
func SortStatuses(s []CRDStatus) {
	slices.SortFunc(s, func(a, b CRDStatus) int { return strings.Compare(a.Name, b.Name) })
}
