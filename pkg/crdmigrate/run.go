package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// MethodAuto picks the in-tree StorageVersionMigration API when it is
// served and its controller runs, and the client-side loop otherwise.
const MethodAuto = "auto"

// Run migrates a set of CRDs one after the other, the way `kubectl
// crd-migrate run` does: pick the CRDs, run the pre-flight checks of each,
// record break-glass use, then migrate it in-tree or client-side, resuming
// a client-side checkpoint where one exists.
type Run struct {
	Clients Clients
	// Discovery finds the StorageVersionMigration API.
	Discovery discovery.DiscoveryInterface
	// Checkpoints keeps the client-side loop's checkpoints.
	Checkpoints *CheckpointStore

	// Names are the CRDs to migrate; with All, every CRD whose
	// storedVersions lists an old version (or that has a checkpoint).
	Names []string
	All   bool
	// Method is MethodAuto, MethodClient or MethodInTree.
	Method string
	// Force rewrites every object even when storedVersions is trimmed,
	// recorded on the CRD as break-glass.
	Force bool
	// Workers are the client-side loop's concurrent writes.
	Workers int
	// Retry is the retry policy of transient errors.
	Retry Retry
	// InTreeTimeout bounds the wait for the in-tree controller to pick a
	// migration up.
	InTreeTimeout time.Duration
	// Now is the clock of the break-glass record (time.Now when nil).
	Now func() time.Time

	// OnStart is called when a CRD's migration starts; OnEvent and
	// OnProgress report its state changes and counts.
	OnStart    func(crd string)
	OnEvent    func(Event)
	OnProgress func(Progress)

	who string
}

// ErrInTreeNotServed is returned by Prepare for --method in-tree on a
// server without the StorageVersionMigration API.
var ErrInTreeNotServed = fmt.Errorf("the server does not serve %s (feature gate StorageVersionMigrator; v1 from Kubernetes 1.37, v1beta1 from 1.35 with --runtime-config)", SVMGroup)

// Prepared is what a run reads before it changes anything.
type Prepared struct {
	CRDs  []*apiextv1.CustomResourceDefinition
	Hooks *Webhooks
	// SVM is the served StorageVersionMigration version ("" for none, or
	// with MethodClient).
	SVM string
}

// Prepare reads the CRDs to migrate, the webhook configurations and,
// unless the method is client, the StorageVersionMigration API. Errors
// say which of the three failed: *NotFoundError for a named CRD that does
// not exist, ErrInTreeNotServed for --method in-tree without the API.
func (r *Run) Prepare(ctx context.Context) (*Prepared, PrepareStep, error) {
	p := &Prepared{}
	var err error
	if p.CRDs, err = r.selectCRDs(ctx); err != nil {
		return nil, StepCRDs, err
	}
	if p.Hooks, err = LoadWebhooks(ctx, r.Clients.Kube); err != nil {
		return nil, StepWebhooks, err
	}
	if r.Method != MethodClient {
		if p.SVM, err = DetectInTree(r.Discovery); err != nil {
			return nil, StepDiscovery, err
		}
		if p.SVM == "" && r.Method == MethodInTree {
			return nil, StepDiscovery, ErrInTreeNotServed
		}
	}
	return p, "", nil
}

// PrepareStep names what Prepare was reading when it failed.
type PrepareStep string

// Steps of Prepare.
const (
	StepCRDs      PrepareStep = "reading CRDs"
	StepWebhooks  PrepareStep = "reading webhook configurations"
	StepDiscovery PrepareStep = "discovering the StorageVersionMigration API"
)

// selectCRDs returns the named CRDs, or with All those whose
// storedVersions lists an old version or that have a checkpoint.
func (r *Run) selectCRDs(ctx context.Context) ([]*apiextv1.CustomResourceDefinition, error) {
	if !r.All {
		return GetCRDs(ctx, r.Clients.Ext, r.Names)
	}
	all, err := GetCRDs(ctx, r.Clients.Ext, nil)
	if err != nil {
		return nil, err
	}
	withCheckpoint := map[string]bool{}
	if cms, err := r.Clients.Kube.CoreV1().ConfigMaps(r.Checkpoints.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy}); err == nil {
		for _, cm := range cms.Items {
			withCheckpoint[cm.Annotations[AnnotationCRD]] = true
		}
	}
	var out []*apiextv1.CustomResourceDefinition
	for _, crd := range all {
		if r.Force || withCheckpoint[crd.Name] || NeedsMigration(crd.Status.StoredVersions, StorageVersion(crd)) {
			out = append(out, crd)
		}
	}
	return out, nil
}

// Outcome is one CRD's migration: its result (nil when it did not start)
// and the error it stopped on.
type Outcome struct {
	CRD    string
	Result *Result
	Err    error
}

// Migrate migrates the prepared CRDs in order and stops at the first that
// fails; the outcomes of the CRDs it got to come back, the failed one
// last.
func (r *Run) Migrate(ctx context.Context, p *Prepared) []Outcome {
	var out []Outcome
	for _, crd := range p.CRDs {
		res, err := r.migrate(ctx, p, crd)
		out = append(out, Outcome{CRD: crd.Name, Result: res, Err: err})
		if err != nil {
			break
		}
	}
	return out
}

func (r *Run) event(e Event) {
	if r.OnEvent != nil {
		r.OnEvent(e)
	}
}

// migrate runs pre-flight and then the migration of one CRD.
func (r *Run) migrate(ctx context.Context, p *Prepared, crd *apiextv1.CustomResourceDefinition) (*Result, error) {
	c := r.Clients
	sv := StorageVersion(crd)
	if r.Force || NeedsMigration(crd.Status.StoredVersions, sv) {
		r.event(Event{CRD: crd.Name, Message: fmt.Sprintf("%s: pre-flight checks", crd.Name)})
		if _, err := Preflight(ctx, c, p.Hooks, crd); err != nil {
			return nil, err
		}
	}
	if r.Force {
		// Break-glass: the CRD keeps who forced the rewrite and the trim,
		// and when; a run that cannot record it does not start.
		if r.who == "" {
			if id, err := cli.WhoAmI(ctx, c.Kube); err == nil {
				r.who = id.User
			} else {
				r.who = "unknown"
			}
		}
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		v := BreakGlassValue("crd-migrate run --force", r.who, now())
		if err := RecordBreakGlass(ctx, c, crd.Name, v); err != nil {
			return nil, err
		}
		r.event(Event{CRD: crd.Name, Message: fmt.Sprintf("%s: --force is break-glass; recorded %s=%q", crd.Name, AnnotationBreakGlass, v)})
	}
	if r.OnStart != nil {
		r.OnStart(crd.Name)
	}
	cp, _ := r.Checkpoints.Load(ctx, crd.Name)
	resumeClient := cp != nil && cp.Matches(string(crd.UID), sv)
	useInTree := p.SVM != "" && (r.Method == MethodInTree || !resumeClient)
	if useInTree {
		it := &InTree{
			Clients: c, Version: p.SVM, Force: r.Force, AckTimeout: r.InTreeTimeout, Retry: r.Retry,
			OnEvent: r.OnEvent, OnProgress: r.OnProgress,
		}
		res, err := it.Run(ctx, crd.Name)
		switch {
		case err == nil:
			if cp != nil {
				_ = r.Checkpoints.Delete(ctx, cp)
			}
			return res, nil
		case errors.Is(err, ErrNoController) && r.Method == MethodAuto:
			r.event(Event{CRD: crd.Name, Message: fmt.Sprintf("%s: %v; using the client-side loop", crd.Name, err)})
		default:
			return res, err
		}
	}
	m := &Migrator{
		Clients: c, Checkpoints: r.Checkpoints, Workers: r.Workers, Force: r.Force, Retry: r.Retry,
		OnEvent: r.OnEvent, OnProgress: r.OnProgress,
	}
	return m.Run(ctx, crd.Name)
}

// DryRunItem is what a run would do to one CRD.
type DryRunItem struct {
	CRD            string    `json:"crd"`
	StorageVersion string    `json:"storageVersion"`
	StoredVersions []string  `json:"storedVersions"`
	Objects        int64     `json:"objects"`
	NeedsMigration bool      `json:"needsMigration"`
	Method         string    `json:"method"`
	Estimate       *Estimate `json:"estimate,omitempty"`
	Probe          string    `json:"probe,omitempty"`
	Problems       []string  `json:"problems,omitempty"`
}

// DryRunSummary adds up a dry run at the chosen rate.
type DryRunSummary struct {
	CRDs     int     `json:"crds"`
	Blocked  int     `json:"blocked"`
	Objects  int64   `json:"objects"`
	Requests int64   `json:"requests"`
	Seconds  float64 `json:"seconds"`
	QPS      float32 `json:"qps"`
	Burst    int     `json:"burst"`
	Workers  int     `json:"workers"`
}

// DryRun runs the pre-flight checks of the prepared CRDs and estimates each
// migration at qps and burst; it changes nothing. With server, the
// pre-flight sends one object of each CRD back as a server-side dry-run
// update; without, it only reads. A CRD whose pre-flight fails is listed
// with its problems and counted as blocked; any other error ends the dry
// run.
func (r *Run) DryRun(ctx context.Context, p *Prepared, server bool, qps float32, burst int) ([]DryRunItem, DryRunSummary, error) {
	items := []DryRunItem{}
	sum := DryRunSummary{QPS: qps, Burst: burst, Workers: r.Workers}
	check := PreflightReadOnly
	if server {
		check = Preflight
	}
	for _, crd := range p.CRDs {
		plan, err := check(ctx, r.Clients, p.Hooks, crd)
		var pre *PreflightError
		if err != nil && !errors.As(err, &pre) {
			return nil, sum, fmt.Errorf("pre-flight checks of %s: %w", crd.Name, err)
		}
		item := DryRunItem{CRD: crd.Name, Method: MethodClient}
		if plan != nil {
			item.StorageVersion, item.StoredVersions, item.Objects = plan.Status.StorageVersion, plan.Status.StoredVersions, plan.Status.Objects
			item.Probe = plan.Probe
		} else {
			st := Describe(crd)
			item.StorageVersion, item.StoredVersions, item.Objects = st.StorageVersion, st.StoredVersions, -1
		}
		if p.SVM != "" {
			item.Method = MethodInTree + " (" + SVMGroup + "/" + p.SVM + ", if its controller runs)"
		}
		item.NeedsMigration = NeedsMigration(item.StoredVersions, item.StorageVersion) || r.Force
		if pre != nil {
			item.Problems = pre.Problems
			sum.Blocked++
		}
		if item.NeedsMigration && item.Objects >= 0 {
			e := EstimateRun(item.Objects, PageSize, float64(qps), burst)
			item.Estimate = &e
			sum.Objects += item.Objects
			sum.Requests += e.Requests
			sum.Seconds += e.Seconds
		}
		items = append(items, item)
	}
	sum.CRDs = len(items)
	return items, sum, nil
}

// StatusOf inspects the CRDs (all of them when names is empty) with their
// checkpoints in checkpoints, and says which StorageVersionMigration
// version the server serves ("" for none).
func StatusOf(ctx context.Context, c Clients, d discovery.DiscoveryInterface, checkpoints *CheckpointStore, names []string) ([]CRDStatus, string, error) {
	in := &Inspector{Clients: c, Checkpoints: checkpoints}
	items, err := in.Status(ctx, names)
	if err != nil {
		return nil, "", err
	}
	svm, _ := DetectInTree(d)
	return items, svm, nil
}
