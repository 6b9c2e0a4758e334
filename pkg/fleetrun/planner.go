package fleetrun

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// LintError is a fleet file the programme cannot run: one or more
// problems, each a one-line error naming its field path.
type LintError struct {
	Problems []*fleetfile.Error
}

func (e *LintError) Error() string {
	if len(e.Problems) == 0 {
		return "the fleet file cannot be planned"
	}
	return e.Problems[0].Error()
}

// Lint checks what the programme needs beyond a loadable file, without
// reading any cluster: a target, rings that each select a cluster, no
// cluster in two rings, windows that
// can fit a step, an upgrade action for every planned cluster, a store.
// now is when the windows are evaluated.
func Lint(f *fleetfile.Fleet, now time.Time) []*fleetfile.Error {
	var errs []*fleetfile.Error
	bad := func(p *field.Path, format string, args ...any) {
		errs = append(errs, &fleetfile.Error{Field: p.String(), Msg: fmt.Sprintf(format, args...)})
	}
	sp := field.NewPath("spec")
	if f.Spec.Target == nil {
		bad(sp.Child("target", "version"), "required: the version the programme upgrades to")
	}
	if len(f.Spec.Rings) == 0 {
		bad(sp.Child("rings"), "required: at least one ring")
	}
	if f.Spec.Store == nil {
		bad(sp.Child("store", "url"), "required: where the run's state and evidence live (file:///path, s3://bucket/prefix, ...)")
	}
	ringOf := map[string]int{}
	for i, r := range f.Spec.Rings {
		sel := r.Selector
		n := 0
		for j, c := range f.Spec.Clusters {
			if !fleetfile.Selects(&sel, c.Labels) {
				continue
			}
			n++
			if k, dup := ringOf[c.Name]; dup {
				bad(sp.Child("clusters").Index(j), "cluster %s is in rings %s (%s) and %s (%s): a cluster belongs to one ring",
					c.Name, f.Spec.Rings[k].Name, sp.Child("rings").Index(k), r.Name, sp.Child("rings").Index(i))
				continue
			}
			ringOf[c.Name] = i
		}
		if n == 0 {
			bad(sp.Child("rings").Index(i).Child("selector"), "ring %s selects no cluster", r.Name)
		}
	}
	step := f.Spec.Upgrade.StepDurationValue()
	for i, w := range f.Spec.Windows {
		wp := sp.Child("windows").Index(i)
		room := w.Duration.Value() - w.FinishMargin.Value()
		if room < step {
			bad(wp.Child("duration"), "%q leaves %s after the finish margin, less than a step (spec.upgrade.stepDuration %s): no step could ever start in it",
				string(w.Duration), room, step)
			continue
		}
		if _, ok := w.NextOpening(now, step); !ok {
			bad(wp.Child("schedule"), "%q never opens in the coming year", w.Schedule)
		}
	}
	for j, c := range f.Spec.Clusters {
		if _, ok := ringOf[c.Name]; !ok {
			continue
		}
		if _, ok := f.Spec.Upgrade.ActionFor(c.Labels); !ok {
			bad(sp.Child("upgrade", "actions"), "no action selects cluster %s (%s): add one (clusterAPI, command or manual)", c.Name, sp.Child("clusters").Index(j))
		}
	}
	return errs
}

// ErrUnreachable wraps the clusters planning could not read.
var ErrUnreachable = errors.New("cannot plan clusters that cannot be read")

// MakePlan plans a run: Lint, then each ring's clusters in batches, then
// each cluster's steps from its own skew plan. infos holds what was read
// from each cluster of a ring; a ring's cluster missing from infos is an
// error wrapping ErrUnreachable. A lint problem returns a *LintError.
func MakePlan(f *fleetfile.Fleet, infos map[string]ClusterInfo, now time.Time) (*Plan, error) {
	if problems := Lint(f, now); len(problems) > 0 {
		return nil, &LintError{Problems: problems}
	}
	target, err := pkgskew.ParseVersion(f.Spec.Target.Version)
	if err != nil {
		return nil, &LintError{Problems: []*fleetfile.Error{{Field: "spec.target.version", Msg: err.Error()}}}
	}
	step := f.Spec.Upgrade.StepDurationValue()
	p := &Plan{
		APIVersion: APIVersion, Kind: KindPlan, Fleet: f.Metadata.Name, Target: f.Spec.Target.Version,
		CreatedAt: now.UTC().Truncate(time.Second), FleetDigest: Digest(f), StepDuration: step.String(),
		MaxClustersInFlight: f.Spec.Caps.MaxConcurrentClusters, Spec: f.Spec,
	}
	var missing []string
	ringed := map[string]bool{}
	for _, r := range f.Spec.Rings {
		sel := r.Selector
		for _, c := range f.Spec.Clusters {
			if fleetfile.Selects(&sel, c.Labels) {
				ringed[c.Name] = true
				if _, ok := infos[c.Name]; !ok {
					missing = append(missing, c.Name)
				}
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnreachable, strings.Join(missing, ", "))
	}
	for _, c := range f.Spec.Clusters {
		if !ringed[c.Name] {
			p.Unplanned = append(p.Unplanned, c.Name)
		}
		if in, ok := infos[c.Name]; ok {
			p.GPUs += in.GPUs
		}
	}
	if len(p.Unplanned) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("no ring selects %s: this run does not upgrade them", strings.Join(p.Unplanned, ", ")))
	}
	if pct := f.Spec.Caps.MaxGPUPercentInFlight; pct > 0 {
		// Rounded down with a floor of one, as Azure Fleet Manager
		// resolves a percentage concurrency.
		p.MaxGPUsInFlight = max(1, p.GPUs*pct/100)
	}
	for _, r := range f.Spec.Rings {
		rp, cps, warns, err := planRing(f, r, infos, target, p.MaxGPUsInFlight, now, step)
		if err != nil {
			return nil, err
		}
		p.Rings = append(p.Rings, rp)
		p.Clusters = append(p.Clusters, cps...)
		p.Warnings = append(p.Warnings, warns...)
	}
	project(f, p, now)
	for _, fr := range f.Spec.Freezes {
		if _, e := fr.Span(); e.After(now) {
			p.Warnings = append(p.Warnings, "no disruptive step starts during the "+fr.Describe())
		}
	}
	return p, nil
}

func planRing(f *fleetfile.Fleet, r fleetfile.Ring, infos map[string]ClusterInfo, target pkgskew.Version, gpuCap int, now time.Time, step time.Duration) (RingPlan, []ClusterPlan, []string, error) {
	rp := RingPlan{Name: r.Name, Soak: string(r.Soak), MaxFailures: r.MaxFailures}
	if r.Approval != nil {
		rp.Approvers = max(1, r.Approval.Approvers)
	}
	limit := r.MaxConcurrent
	if c := f.Spec.Caps.MaxConcurrentClusters; c > 0 && (limit == 0 || c < limit) {
		limit = c
	}
	rp.MaxConcurrent = limit
	var (
		cps   []ClusterPlan
		warns []string
	)
	sel := r.Selector
	for _, c := range f.Spec.Clusters {
		if !fleetfile.Selects(&sel, c.Labels) {
			continue
		}
		in := infos[c.Name]
		if in.Saved {
			var inferenceWarns []string
			in.Inventory, inferenceWarns = readInference(f, c.Name, in.Inventory)
			for _, s := range inferenceWarns {
				warns = append(warns, "cluster "+c.Name+": "+s)
			}
		}
		prov := in.Provider
		if prov == "" && c.Provider != "" {
			prov, _ = pkgskew.ParseProvider(c.Provider)
		}
		sp, err := pkgskew.MakePlan(in.Inventory, target, pkgskew.PlanOptions{Provider: prov})
		if err != nil {
			return rp, nil, nil, fmt.Errorf("cluster %s: planning to %s: %w", c.Name, target.MinorString(), err)
		}
		steps, w := clusterSteps(sp, in.Inventory, target, f.Spec.Upgrade != nil && f.Spec.Upgrade.MigrateCRDs)
		var problems []*fleetfile.Error
		for _, s := range steps {
			if s.Kind == StepDrain && s.Inference != nil {
				if msg := inferenceProblem(c.Name, invPool(in.Inventory, s.Pool)); msg != "" {
					problems = append(problems, &fleetfile.Error{Field: "spec.upgrade.hydrateBandwidth", Msg: msg})
				}
			}
		}
		if len(problems) > 0 {
			return rp, nil, nil, &LintError{Problems: problems}
		}
		for _, s := range w {
			warns = append(warns, "cluster "+c.Name+": "+s)
		}
		cp := ClusterPlan{Name: c.Name, Context: c.ContextName(), Labels: c.Labels, Ring: r.Name, GPUs: in.GPUs,
			From: sp.Summary.From, Provider: string(sp.Provider.Provider), Steps: steps, Skew: sp,
			DRPair: c.Labels[f.Spec.DRPairs.Key()], DrainArgs: f.Spec.DrainArgs(c.Name), DrainOverride: c.Drain != nil}
		if a, ok := f.Spec.Upgrade.ActionFor(c.Labels); ok {
			cp.Action = actionKind(a)
		}
		first := step
		for _, s := range steps {
			if s.Disruptive {
				first = expectedDuration(f.Spec.Upgrade, s)
				break
			}
		}
		next, ok, desc := NextStart(f, c.Labels, now, first)
		cp.Windows = desc
		switch {
		case !ok:
			warns = append(warns, "cluster "+c.Name+": no window lets a step start in the coming year")
		case len(desc) > 0 || next.After(now):
			t := next.UTC()
			cp.NextWindow = &t
		}
		if gpuCap > 0 && cp.GPUs > gpuCap {
			if !slices.Contains(f.Spec.Caps.GPUCapExceptions, c.Name) {
				return rp, nil, nil, &LintError{Problems: []*fleetfile.Error{{Field: "spec.caps.maxGPUPercentInFlight",
					Msg: fmt.Sprintf("cluster %s alone has %s, above the %d the cap lets in flight: raise the cap, or list it in spec.caps.gpuCapExceptions to let it run alone", c.Name, cli.Plural(cp.GPUs, "GPU"), gpuCap)}}}
			}
			warns = append(warns, fmt.Sprintf("cluster %s alone has %s, above the cap of %d in flight: it runs alone (spec.caps.gpuCapExceptions)", c.Name, cli.Plural(cp.GPUs, "GPU"), gpuCap))
		}
		cps = append(cps, cp)
	}
	// Clusters whose windows open first go first (Azure Fleet Manager
	// orders members by window); then by name, for a stable plan.
	sort.SliceStable(cps, func(i, j int) bool {
		a, b := cps[i].NextWindow, cps[j].NextWindow
		switch {
		case a == nil && b != nil:
			return true
		case a != nil && b == nil:
			return false
		case a != nil && b != nil && !a.Equal(*b):
			return a.Before(*b)
		}
		return cps[i].Name < cps[j].Name
	})
	// Greedy batches in that order: a new batch when the current one is
	// full (the ring's and the fleet's cluster caps), would exceed the
	// GPU cap, holds the other half of a DR pair, or waits for another
	// window; a cluster above the GPU cap on its own is a batch of one.
	var cur *Batch
	winKey := func(cp ClusterPlan) string { return strings.Join(cp.Windows, "|") }
	curKey, curPairs := "", map[string]bool{}
	for i := range cps {
		cp := &cps[i]
		fits := cur != nil && (limit == 0 || len(cur.Clusters) < limit) &&
			(gpuCap == 0 || cur.GPUs+cp.GPUs <= gpuCap) && winKey(*cp) == curKey &&
			(cp.DRPair == "" || !curPairs[cp.DRPair])
		if !fits {
			rp.Batches = append(rp.Batches, Batch{})
			cur = &rp.Batches[len(rp.Batches)-1]
			curKey, curPairs = winKey(*cp), map[string]bool{}
		}
		cur.Clusters = append(cur.Clusters, cp.Name)
		cur.GPUs += cp.GPUs
		if cp.DRPair != "" {
			curPairs[cp.DRPair] = true
		}
		if cp.NextWindow != nil && (cur.Opens == nil || cp.NextWindow.After(*cur.Opens)) {
			t := *cp.NextWindow
			cur.Opens = &t
		}
		cp.Batch = len(rp.Batches)
	}
	return rp, cps, warns, nil
}

func actionKind(a fleetfile.UpgradeAction) string {
	switch {
	case a.ClusterAPI != nil:
		return "clusterAPI"
	case a.Command != nil:
		return "command"
	}
	return "manual"
}

// NextStart is when a disruptive step of a cluster with these labels may
// next start at or after now: inside one of the windows that select it
// with room for a step before the finish margin, and the whole step
// (its expected duration and the margin) clear of every freeze. A
// cluster no window selects is always open (the windows list is empty).
// ok is false when no start exists in the coming year.
func NextStart(f *fleetfile.Fleet, ls map[string]string, now time.Time, step time.Duration) (next time.Time, ok bool, windows []string) {
	for _, w := range f.Spec.Windows {
		if fleetfile.Selects(w.Selector, ls) {
			windows = append(windows, describeWindow(w))
		}
	}
	t := now
	// A freeze can end inside a window: look again from its end.
	for round := 0; round < 16; round++ {
		next, ok = t, len(windows) == 0
		for _, w := range f.Spec.Windows {
			if !fleetfile.Selects(w.Selector, ls) {
				continue
			}
			o, found := w.NextOpening(t, step)
			if !found {
				continue
			}
			start := o.Start
			if start.Before(t) {
				start = t
			}
			if !ok || start.Before(next) {
				next, ok = start, true
			}
		}
		if !ok {
			return time.Time{}, false, windows
		}
		// The whole step must miss every freeze, not only its start:
		// [start, start + its expected duration + the finish margin).
		frozen := false
		end := next.Add(step + finishMargin(f, ls))
		for _, fr := range f.Spec.Freezes {
			fs, fe := fr.Span()
			if fleetfile.Selects(fr.Selector, ls) && next.Before(fe) && end.After(fs) && fe.After(t) {
				t, frozen = fe, true
			}
		}
		if !frozen {
			return next, true, windows
		}
	}
	return time.Time{}, false, windows
}

// finishMargin is the margin a step keeps before a freeze: the largest
// finish margin of the windows that select the cluster (none without one).
func finishMargin(f *fleetfile.Fleet, ls map[string]string) time.Duration {
	var m time.Duration
	for _, w := range f.Spec.Windows {
		if fleetfile.Selects(w.Selector, ls) {
			m = max(m, w.FinishMargin.Value())
		}
	}
	return m
}

func describeWindow(w fleetfile.Window) string {
	z := w.TimeZone
	if z == "" {
		z = "UTC"
	}
	s := fmt.Sprintf("%q for %s (%s)", w.Schedule, string(w.Duration), z)
	if w.FinishMargin != "" {
		s += ", finish margin " + string(w.FinishMargin)
	}
	return s
}
