package deprecations

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// HelmFixAction is what fix-helm did (or would do) to a release.
type HelmFixAction string

// Actions of fix-helm, per release.
const (
	// HelmFixUpToDate: the deployed revision uses no API to map.
	HelmFixUpToDate HelmFixAction = "up-to-date"
	// HelmFixPlanned: a dry run would write a new revision.
	HelmFixPlanned HelmFixAction = "planned"
	// HelmFixFixed: a new revision was written and the old one superseded.
	HelmFixFixed HelmFixAction = "fixed"
	// HelmFixFinished: an interrupted run had written the new revision;
	// this one superseded the old.
	HelmFixFinished HelmFixAction = "finished"
	// HelmFixNeedsChart: a replacement needs field changes (or there is
	// none); the release is left alone.
	HelmFixNeedsChart HelmFixAction = "needs-chart-change"
	// HelmFixSkipped: nothing that fix-helm should touch (no deployed
	// revision, an operation in progress, an inconsistent history).
	HelmFixSkipped HelmFixAction = "skipped"
	// HelmFixFailed: a read or a write failed.
	HelmFixFailed HelmFixAction = "failed"
)

// HelmFix is the outcome for one release.
type HelmFix struct {
	Namespace string `json:"namespace"`
	Release   string `json:"release"`
	// Storage is Secret or ConfigMap (Helm's storage driver).
	Storage     string          `json:"storage"`
	Chart       string          `json:"chart,omitempty"`
	Revision    int             `json:"revision"`
	NewRevision int             `json:"newRevision,omitempty"`
	Action      HelmFixAction   `json:"action"`
	Changes     []HelmFixChange `json:"changes,omitempty"`
	NeedsChange []HelmFixManual `json:"needsChartChange,omitempty"`
	Detail      string          `json:"detail,omitempty"`
	Error       string          `json:"error,omitempty"`
	// Diff is the unified diff of the stored manifests (dry run).
	Diff string `json:"diff,omitempty"`
	// Forbidden is set when the error was a missing permission.
	Forbidden bool `json:"-"`
}

// HelmFixResult is what fix-helm found and did.
type HelmFixResult struct {
	Items []HelmFix
	// Records is the number of release records read.
	Records int
	// ListErrors are the storages that could not be listed ("list
	// configmaps in ns: forbidden ...").
	ListErrors []error
}

// HelmFixer rewrites Helm release records whose deployed revision stores
// an API removed at the target, the way Helm itself records an upgrade: a
// new revision (the last one + 1) with the mapped manifest, status
// deployed, and the previous deployed revision marked superseded, so that
// `helm upgrade`, `helm history` and `helm rollback` keep working. It
// reads and writes through Helm's own storage drivers (Secret and
// ConfigMap), so records written by Helm 3 and Helm 4 are read, and
// written back, exactly as Helm does.
type HelmFixer struct {
	Kube  kubernetes.Interface
	Table *apilifecycle.Table
	// Target is the release the APIs are judged at.
	Target            apilifecycle.Release
	IncludeDeprecated bool
	// Served, when set, says whether the cluster serves a group version
	// and kind: a replacement it does not serve yet is left alone.
	Served func(groupVersion, kind string) bool
	// Namespace limits the run ("" is every namespace).
	Namespace string
	// Releases limits the run to these release names (all when empty).
	Releases []string
	DryRun   bool
	// FieldRules are the replacements that need field changes (the
	// built-in rules when nil).
	FieldRules *FieldRules
	// AfterCreate, when set, runs once a new revision is stored and before
	// the previous one is superseded; an error stops the run there, which
	// a later run finishes.
	AfterCreate func(HelmFix) error
	// OnChange is told each write as it is made.
	OnChange func(fix HelmFix, what string)
}

// storages are Helm's Kubernetes storage drivers.
var helmStorages = []string{"Secret", "ConfigMap"}

type helmDriver interface {
	Query(labels map[string]string) ([]release.Releaser, error)
	Create(key string, rls release.Releaser) error
	Update(key string, rls release.Releaser) error
}

func (h *HelmFixer) driver(storage, ns string) helmDriver {
	if storage == "ConfigMap" {
		return driver.NewConfigMaps(h.Kube.CoreV1().ConfigMaps(ns))
	}
	return driver.NewSecrets(h.Kube.CoreV1().Secrets(ns))
}

// releaseKey is the name of a revision's storage object, as Helm's
// pkg/storage makeKey writes it (helm.sh/helm/v4 pkg/storage/storage.go).
func releaseKey(name string, version int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version)
}

type helmHistory struct {
	storage, ns, name string
	revs              []*rspb.Release // ascending version
}

// Run reads every release record in scope, then fixes (or, with DryRun,
// plans) each release. Named releases that do not exist are an error
// before anything is written.
func (h *HelmFixer) Run(ctx context.Context) (HelmFixResult, error) {
	var res HelmFixResult
	mapper := h.mapper()
	byRelease := map[string]*helmHistory{}
	for _, st := range helmStorages {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		rels, err := h.driver(st, h.Namespace).Query(map[string]string{"owner": "helm"})
		if errors.Is(err, driver.ErrReleaseNotFound) {
			continue
		}
		if err != nil {
			res.ListErrors = append(res.ListErrors, fmt.Errorf("listing Helm release %ss: %w", strings.ToLower(st), err))
			continue
		}
		for _, r := range rels {
			rel, ok := r.(*rspb.Release)
			if !ok || rel.Info == nil {
				continue
			}
			if len(h.Releases) > 0 && !slices.Contains(h.Releases, rel.Name) {
				continue
			}
			res.Records++
			// Helm keeps a release's records in its namespace; in one
			// namespace that is where they were listed.
			ns := rel.Namespace
			if h.Namespace != "" {
				ns = h.Namespace
			}
			if ns == "" {
				continue
			}
			k := st + "/" + ns + "/" + rel.Name
			hh := byRelease[k]
			if hh == nil {
				hh = &helmHistory{storage: st, ns: ns, name: rel.Name}
				byRelease[k] = hh
			}
			hh.revs = append(hh.revs, rel)
		}
	}
	if len(res.ListErrors) == len(helmStorages) {
		return res, errors.Join(res.ListErrors...)
	}
	found := map[string]bool{}
	for _, hh := range byRelease {
		found[hh.name] = true
	}
	var missing []string
	for _, r := range h.Releases {
		if !found[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 && len(res.ListErrors) == 0 {
		where := "namespace " + h.Namespace
		if h.Namespace == "" {
			where = "any namespace"
		}
		return res, &HelmReleaseNotFoundError{Names: missing, Where: where}
	}
	keys := slices.Sorted(maps.Keys(byRelease))
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := byRelease[keys[i]], byRelease[keys[j]]
		if a.ns != b.ns {
			return a.ns < b.ns
		}
		return a.name < b.name
	})
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		hh := byRelease[k]
		sort.Slice(hh.revs, func(i, j int) bool { return hh.revs[i].Version < hh.revs[j].Version })
		fix, stop := h.fixRelease(hh, mapper)
		res.Items = append(res.Items, fix)
		if stop != nil {
			return res, stop
		}
	}
	return res, nil
}

// HelmReleaseNotFoundError names releases given on the command line that
// have no record.
type HelmReleaseNotFoundError struct {
	Names []string
	Where string
}

func (e *HelmReleaseNotFoundError) Error() string {
	return fmt.Sprintf("no Helm release %s in %s", strings.Join(e.Names, ", "), e.Where)
}

func (h *HelmFixer) mapper() *manifestMapper {
	fr := h.FieldRules
	if fr == nil {
		b := BuiltinFieldRules()
		fr = &b
	}
	return newManifestMapper(h.Table, h.Target, h.IncludeDeprecated, h.Served, *fr)
}

// fixRelease handles one release. stop is non-nil when the run must end
// (AfterCreate said so).
func (h *HelmFixer) fixRelease(hh *helmHistory, m *manifestMapper) (HelmFix, error) {
	latest := hh.revs[len(hh.revs)-1]
	fix := HelmFix{Namespace: hh.ns, Release: hh.name, Storage: hh.storage, Revision: latest.Version}
	if latest.Chart != nil && latest.Chart.Metadata != nil {
		fix.Chart = latest.Chart.Metadata.Name + "-" + latest.Chart.Metadata.Version
	}
	var deployed []*rspb.Release
	for _, r := range hh.revs {
		if r.Info.Status == common.StatusDeployed {
			deployed = append(deployed, r)
		}
	}
	if st := latest.Info.Status; st.IsPending() {
		fix.Action = HelmFixSkipped
		fix.Detail = fmt.Sprintf("revision %d is %s: a helm operation is running or was interrupted; finish it first (helm history %s -n %s)", latest.Version, st, hh.name, hh.ns)
		return fix, nil
	}
	switch len(deployed) {
	case 0:
		fix.Action = HelmFixSkipped
		fix.Detail = fmt.Sprintf("no deployed revision (revision %d is %s)", latest.Version, latest.Info.Status)
		return fix, nil
	case 1:
	default:
		return h.resume(hh, deployed, m, fix)
	}
	cur := deployed[0]
	fix.Revision = cur.Version
	next, changes, manual := mapRelease(cur, m)
	fix.Changes, fix.NeedsChange = changes, manual
	switch {
	case len(manual) > 0:
		fix.Action = HelmFixNeedsChart
		fix.Detail = "left alone: a pure apiVersion mapping is not enough"
		return fix, nil
	case len(changes) == 0:
		fix.Action = HelmFixUpToDate
		return fix, nil
	}
	fix.NewRevision = latest.Version + 1
	next.Version = fix.NewRevision
	next.Info.Description = "Mapped removed APIs in the stored manifest (kubectl deprecations fix-helm): " + describeChanges(changes)
	if h.DryRun {
		fix.Action = HelmFixPlanned
		fix.Diff = releaseDiff(cur, next)
		return fix, nil
	}
	d := h.driver(hh.storage, hh.ns)
	if err := d.Create(releaseKey(hh.name, next.Version), next); err != nil {
		return h.failed(fix, fmt.Sprintf("writing revision %d", next.Version), err), nil
	}
	h.changed(fix, fmt.Sprintf("wrote revision %d (deployed)", next.Version))
	if h.AfterCreate != nil {
		if err := h.AfterCreate(fix); err != nil {
			fix.Action = HelmFixFailed
			fix.Error = err.Error()
			return fix, err
		}
	}
	if err := h.supersede(d, cur); err != nil {
		return h.failed(fix, fmt.Sprintf("marking revision %d superseded (run again to finish)", cur.Version), err), nil
	}
	h.changed(fix, fmt.Sprintf("marked revision %d superseded", cur.Version))
	fix.Action = HelmFixFixed
	return fix, nil
}

// resume handles a release with several deployed revisions: when the
// newest holds exactly what fix-helm writes for an older one, a run was
// stopped between its two writes, and only the superseding is left.
func (h *HelmFixer) resume(hh *helmHistory, deployed []*rspb.Release, m *manifestMapper, fix HelmFix) (HelmFix, error) {
	newest := deployed[len(deployed)-1]
	latest := hh.revs[len(hh.revs)-1]
	var vs []string
	for _, r := range deployed {
		vs = append(vs, fmt.Sprint(r.Version))
	}
	inconsistent := func(why string) (HelmFix, error) {
		fix.Action = HelmFixSkipped
		fix.Detail = fmt.Sprintf("revisions %s are all deployed and %s; left alone (helm history %s -n %s)", strings.Join(vs, ", "), why, hh.name, hh.ns)
		return fix, nil
	}
	if newest != latest {
		return inconsistent(fmt.Sprintf("the last revision, %d, is %s", latest.Version, latest.Info.Status))
	}
	older := deployed[:len(deployed)-1]
	for _, old := range older {
		mapped, changes, manual := mapRelease(old, m)
		if len(manual) > 0 || len(changes) == 0 || !sameManifests(mapped, newest) {
			return inconsistent(fmt.Sprintf("revision %d is not what fix-helm writes for revision %d", newest.Version, old.Version))
		}
		fix.Changes = changes
	}
	fix.Revision, fix.NewRevision = older[len(older)-1].Version, newest.Version
	fix.Detail = fmt.Sprintf("revision %d was written by an interrupted run", newest.Version)
	if h.DryRun {
		fix.Action = HelmFixPlanned
		return fix, nil
	}
	d := h.driver(hh.storage, hh.ns)
	for _, old := range older {
		if err := h.supersede(d, old); err != nil {
			return h.failed(fix, fmt.Sprintf("marking revision %d superseded", old.Version), err), nil
		}
		h.changed(fix, fmt.Sprintf("marked revision %d superseded", old.Version))
	}
	fix.Action = HelmFixFinished
	return fix, nil
}

func (h *HelmFixer) supersede(d helmDriver, rel *rspb.Release) error {
	info := *rel.Info
	info.Status = common.StatusSuperseded
	cp := *rel
	cp.Info = &info
	return d.Update(releaseKey(rel.Name, rel.Version), &cp)
}

func (h *HelmFixer) failed(fix HelmFix, what string, err error) HelmFix {
	fix.Action = HelmFixFailed
	fix.Error = what + ": " + err.Error()
	fix.Forbidden = isForbidden(err)
	return fix
}

func (h *HelmFixer) changed(fix HelmFix, what string) {
	if h.OnChange != nil {
		h.OnChange(fix, what)
	}
}

// mapRelease returns the release as the next revision would store it
// (version not set): the mapped manifest and hooks, status deployed,
// user labels only; and the changes and the objects that need a chart
// change.
func mapRelease(cur *rspb.Release, m *manifestMapper) (*rspb.Release, []HelmFixChange, []HelmFixManual) {
	next := *cur
	info := *cur.Info
	now := time.Now()
	info.LastDeployed = now
	info.Status = common.StatusDeployed
	info.Deleted = time.Time{}
	next.Info = &info
	var changes []HelmFixChange
	var manual []HelmFixManual
	var ch []HelmFixChange
	var mn []HelmFixManual
	next.Manifest, ch, mn = m.mapManifest("manifest", cur.Manifest)
	changes, manual = append(changes, ch...), append(manual, mn...)
	next.Hooks = make([]*rspb.Hook, 0, len(cur.Hooks))
	for _, hk := range cur.Hooks {
		if hk == nil {
			continue
		}
		nh := *hk
		nh.Manifest, ch, mn = m.mapManifest("hook "+hk.Path, hk.Manifest)
		changes, manual = append(changes, ch...), append(manual, mn...)
		next.Hooks = append(next.Hooks, &nh)
	}
	// Helm's Create adds createdAt and the system labels; only the
	// user's labels carry over (as an upgrade keeps them).
	next.Labels = map[string]string{}
	for k, v := range cur.Labels {
		if !slices.Contains(driver.GetSystemLabels(), k) {
			next.Labels[k] = v
		}
	}
	return &next, changes, manual
}

func sameManifests(a, b *rspb.Release) bool {
	if a.Manifest != b.Manifest || len(a.Hooks) != len(b.Hooks) {
		return false
	}
	for i := range a.Hooks {
		if a.Hooks[i].Manifest != b.Hooks[i].Manifest {
			return false
		}
	}
	return true
}

// releaseDiff is a unified diff of the stored manifest and hooks.
func releaseDiff(a, b *rspb.Release) string {
	var out strings.Builder
	name := fmt.Sprintf("%s/%s", a.Namespace, a.Name)
	diff := func(what, x, y string) {
		if x == y {
			return
		}
		s, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(x), B: difflib.SplitLines(y),
			FromFile: fmt.Sprintf("%s revision %d %s", name, a.Version, what),
			ToFile:   fmt.Sprintf("%s revision %d %s", name, b.Version, what),
			Context:  3,
		})
		out.WriteString(s)
	}
	diff("manifest", a.Manifest, b.Manifest)
	for i, hk := range a.Hooks {
		if i < len(b.Hooks) && hk != nil {
			diff("hook "+hk.Path, hk.Manifest, b.Hooks[i].Manifest)
		}
	}
	return out.String()
}

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }
