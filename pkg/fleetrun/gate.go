package fleetrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// KindGate is a gate's report.
const KindGate = "FleetGate"

// Programme runs the commands of one run: its store, frozen plan and
// clusters.
type Programme struct {
	Store  Store
	Plan   *Plan
	Access *Access
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Holder names who runs a step (host and pid by default).
	Holder string
	// RateWindow is the time between the two /metrics reads of the
	// apiserver-429-rate check (10s when 0).
	RateWindow time.Duration
	// Exec runs the suite's plugins (ExecPlugins when nil).
	Exec Executor
	// ErrOut gets progress lines.
	ErrOut io.Writer
	// Heartbeat is how often an in-progress step says it still runs (10s
	// when 0); a step whose heartbeat is three of these old is taken over.
	Heartbeat time.Duration
}

func (p *Programme) now() time.Time {
	if p.Now != nil {
		return p.Now().UTC()
	}
	return time.Now().UTC()
}

func (p *Programme) holder() string {
	if p.Holder != "" {
		return p.Holder
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

func (p *Programme) logf(format string, args ...any) {
	if p.ErrOut != nil {
		fmt.Fprintf(p.ErrOut, format+"\n", args...)
	}
}

// firstDisruptive is the expected duration of the cluster's first
// disruptive step, which its gate's window check fits.
func (p *Programme) firstDisruptive(cp *ClusterPlan) time.Duration {
	for _, s := range cp.Steps {
		if s.Disruptive {
			return p.expected(s)
		}
	}
	return p.Plan.Spec.Upgrade.StepDurationValue()
}

// expected is how long a step is expected to take (the fleet file's
// spec.upgrade.stepDurations by kind, and an inference pool's planned
// cold starts).
func (p *Programme) expected(s Step) time.Duration {
	return expectedDuration(p.Plan.Spec.Upgrade, s)
}

// GateReport is what a gate decided, with every check.
type GateReport struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Run        string    `json:"run"`
	Ring       string    `json:"ring,omitempty"`
	Cluster    string    `json:"cluster,omitempty"`
	At         time.Time `json:"at"`
	// Verdict is go, halt, not-yet or unknown; ExitCode the matching
	// exit code (0, 1, 4, 3).
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exitCode"`
	// NextAt, on a "not yet", is the next opening: the earliest time the
	// gate can pass, when a wait only the clock ends holds it (the latest
	// Until of its waits). Asking again before then changes nothing; the
	// engine waits until then (RunStep, --wait-file). Unset when every
	// wait is on something else.
	NextAt *time.Time `json:"nextAt,omitempty"`
	Checks []Check    `json:"checks"`
}

func (g *GateReport) add(name, cluster, result, format string, args ...any) {
	g.Checks = append(g.Checks, Check{Name: name, Cluster: cluster, Result: result, Message: fmt.Sprintf(format, args...)})
}

// wait adds a wait that the clock ends at until.
func (g *GateReport) wait(name, cluster string, until time.Time, format string, args ...any) {
	g.add(name, cluster, CheckWait, format, args...)
	u := until.UTC()
	g.Checks[len(g.Checks)-1].Until = &u
}

func (g *GateReport) finish() {
	g.Verdict, g.ExitCode, g.NextAt = "go", cli.ExitOK, nil
	worst := 0
	for _, c := range g.Checks {
		r := map[string]int{CheckWait: 1, CheckUnknown: 2, CheckFail: 3}[c.Result]
		worst = max(worst, r)
		if c.Result == CheckWait && c.Until != nil && (g.NextAt == nil || c.Until.After(*g.NextAt)) {
			g.NextAt = c.Until
		}
	}
	if worst != 1 {
		g.NextAt = nil
	}
	switch worst {
	case 1:
		g.Verdict, g.ExitCode = "not-yet", cli.ExitIncomplete
	case 2:
		g.Verdict, g.ExitCode = "unknown", cli.ExitUnavailable
	case 3:
		g.Verdict, g.ExitCode = "halt", cli.ExitFindings
	}
}

// Reason is the first check that stops the gate, for one-line messages.
func (g *GateReport) Reason() string {
	for _, want := range []string{CheckFail, CheckUnknown, CheckWait} {
		for _, c := range g.Checks {
			if c.Result == want {
				s := c.Name + ": " + c.Message
				if c.Cluster != "" && c.Cluster != g.Cluster {
					s = c.Cluster + ": " + s
				}
				return s
			}
		}
	}
	return "every check passes"
}

func (p *Programme) newGate(ring, cluster string) *GateReport {
	return &GateReport{APIVersion: APIVersion, Kind: KindGate, Run: p.Plan.Run, Ring: ring, Cluster: cluster, At: p.now()}
}

// haltCheck adds the halt decisions that hold (ring, cluster).
func haltCheck(p *Plan, g *GateReport, ds []Decision, ring, cluster string) {
	if h, ok := p.ActiveHalt(ds, ring, cluster); ok {
		g.add("halt", cluster, CheckFail, "%s; lift it with `kubectl skew fleet approve --run %s --ring %s --reason ...` (%s)", describeHalt(h), g.Run, orRing(h.Ring, ring), cli.Plural(p.Lifters(h.Ring), "distinct approver"))
		return
	}
	g.add("halt", cluster, CheckPass, "no halt holds")
}

func orRing(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// budgetCheck counts the ring's failed clusters against its budget.
func budgetCheck(g *GateReport, r *RingPlan, states map[string]*ClusterState, p *Plan, except string) {
	var failed []string
	for _, c := range p.Clusters {
		if c.Ring != r.Name || c.Name == except {
			continue
		}
		if step, ok := states[c.Name].CountsAsFailed(); ok {
			failed = append(failed, c.Name+" ("+step+")")
		}
	}
	if len(failed) > r.MaxFailures {
		g.add("failure-budget", "", CheckFail, "%d failed in ring %s (%s), budget %d", len(failed), r.Name, strings.Join(failed, ", "), r.MaxFailures)
		return
	}
	g.add("failure-budget", "", CheckPass, "%d failed in ring %s, budget %d", len(failed), r.Name, r.MaxFailures)
}

// GateCluster is the gate before a cluster starts (its first step):
// halts, the earlier rings done, the ring's approvals, its failure budget,
// the window and freezes, the cluster's halt checks, and last the caps,
// which admit it in flight.
func (p *Programme) GateCluster(ctx context.Context, cluster string) (*GateReport, error) {
	return p.gateCluster(ctx, cluster, true)
}

// PreviewClusterGate is GateCluster without the admission: read-only, for
// people asking whether a cluster could start.
func (p *Programme) PreviewClusterGate(ctx context.Context, cluster string) (*GateReport, error) {
	return p.gateCluster(ctx, cluster, false)
}

func (p *Programme) gateCluster(ctx context.Context, cluster string, admit bool) (*GateReport, error) {
	cp, ok := p.Plan.Cluster(cluster)
	if !ok {
		return nil, cli.Usagef("cluster %s is not in run %s", cluster, p.Plan.Run)
	}
	g := p.newGate(cp.Ring, cluster)
	ds, states, err := p.readRun(ctx, func(c string) bool { return c == cluster })
	if err != nil {
		return nil, err
	}
	p.startChecks(g, cp, ds, states)
	g.finish()
	if g.ExitCode != cli.ExitOK {
		return g, nil
	}
	st := states[cluster]
	target, err := p.Access.For(ctx, cp)
	if err != nil {
		g.add("access", cluster, CheckUnknown, "%v", err)
		g.finish()
		return g, nil
	}
	kc, err := target.Getter.Kube()
	if err == nil {
		g.Checks = append(g.Checks, haltChecks(ctx, kc, p.Plan.Spec.HaltOn, cluster, 0, p.rateWindow(), nil, p.promqlBaselineOf(st))...)
	} else {
		g.add("access", cluster, CheckUnknown, "%v", err)
	}
	g.finish()
	if g.ExitCode != cli.ExitOK {
		return g, nil
	}
	switch {
	case st.InFlight():
		g.add("caps", cluster, CheckPass, "admitted at %s", st.AdmittedAt.Format(time.RFC3339))
	case !admit:
		g.add("caps", cluster, CheckSkip, "decided when the step gate runs, under the run's lock")
	default:
		if err := p.admit(ctx, g, cp); err != nil {
			return nil, err
		}
	}
	g.finish()
	return g, nil
}

// startChecks are the checks of a cluster's start gate that read only
// the store (its decisions and the clusters' states) and the clock: halts,
// the earlier rings and their soaks, the ring's approvals and failure
// budget, the window and freezes. A step gate that waits on one of them
// needs no attempt (RunStep).
func (p *Programme) startChecks(g *GateReport, cp *ClusterPlan, ds []Decision, states map[string]*ClusterState) {
	r, _ := p.Plan.Ring(cp.Ring)
	haltCheck(p.Plan, g, ds, cp.Ring, cp.Name)
	// Rings run in order: every cluster of an earlier ring finished.
	var waiting []string
	for _, other := range p.Plan.Clusters {
		if other.Ring == cp.Ring {
			break
		}
		if s := states[other.Name]; !s.Decided() {
			waiting = append(waiting, other.Name)
		}
	}
	if len(waiting) > 0 {
		g.add("earlier-rings", "", CheckWait, "not finished: %s", strings.Join(waiting, ", "))
	} else {
		g.add("earlier-rings", "", CheckPass, "every cluster of the earlier rings is decided (finished, failed within its budget, or skipped)")
		for i := range p.Plan.Rings {
			if p.Plan.Rings[i].Name == cp.Ring {
				break
			}
			p.soakCheck(g, &p.Plan.Rings[i], states)
		}
	}
	if r.Approvers > 0 {
		who := Approvers(ds, r.Name)
		if len(who) < r.Approvers {
			g.add("approval", "", CheckWait, "ring %s has %d of %d approvals (%s): `kubectl skew fleet approve --run %s --ring %s --reason ...`",
				r.Name, len(who), r.Approvers, orNone(who), p.Plan.Run, r.Name)
		} else {
			g.add("approval", "", CheckPass, "approved by %s", strings.Join(who, ", "))
		}
	}
	budgetCheck(g, r, states, p.Plan, cp.Name)
	if !states[cp.Name].InFlight() {
		p.windowCheck(g, cp, p.firstDisruptive(cp))
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none yet"
	}
	return strings.Join(s, ", ")
}

func (p *Programme) rateWindow() time.Duration {
	if p.RateWindow > 0 {
		return p.RateWindow
	}
	return 10 * time.Second
}

// windowCheck says whether a disruptive step of the cluster, expected to
// take step, may start now: in a window with room for it, and the whole
// step clear of every freeze.
func (p *Programme) windowCheck(g *GateReport, cp *ClusterPlan, step time.Duration) {
	now := p.now()
	f := &fleetfile.Fleet{Spec: p.Plan.Spec}
	end := now.Add(step + finishMargin(f, cp.Labels))
	for _, fr := range p.Plan.Spec.Freezes {
		fs, fe := fr.Span()
		if fleetfile.Selects(fr.Selector, cp.Labels) && now.Before(fe) && end.After(fs) {
			next, ok, _ := NextStart(f, cp.Labels, now, step)
			when := "no start fits in the coming year"
			if ok {
				when = "the next start that fits is " + next.Format(time.RFC3339)
			}
			add := func(format string, args ...any) { g.add("window", cp.Name, CheckWait, format, args...) }
			if ok {
				add = func(format string, args ...any) { g.wait("window", cp.Name, next, format, args...) }
			}
			if fr.Holds(now) {
				add("the %s holds until %s; %s", fr.Describe(), fe.Format(time.RFC3339), when)
			} else {
				add("a %s step started now would run into the %s (from %s); %s", step, fr.Describe(), fs.Format(time.RFC3339), when)
			}
			return
		}
	}
	next, ok, windows := NextStart(f, cp.Labels, now, step)
	switch {
	case len(windows) == 0:
		g.add("window", cp.Name, CheckPass, "no window applies: always open")
	case !ok:
		g.add("window", cp.Name, CheckFail, "none of its windows (%s) lets a %s step start in the coming year", strings.Join(windows, "; "), step)
	case next.After(now):
		g.wait("window", cp.Name, next, "closed: the next window that fits a %s step opens at %s", step, next.Format(time.RFC3339))
	default:
		g.add("window", cp.Name, CheckPass, "open now, with room for a %s step", step)
	}
}

// GateRing is the gate after a ring's soak, before the next ring: halts,
// every cluster of the ring finished, the failure budget, and the halt
// checks on each of its clusters (GPU allocatable against the planned
// count, verify and gpu-validate verdicts from the state).
func (p *Programme) GateRing(ctx context.Context, ring string) (*GateReport, error) {
	r, ok := p.Plan.Ring(ring)
	if !ok {
		return nil, cli.Usagef("ring %s is not in run %s", ring, p.Plan.Run)
	}
	g := p.newGate(ring, "")
	ds, states, err := p.readRun(ctx, func(c string) bool { cp, _ := p.Plan.Cluster(c); return cp != nil && cp.Ring == ring })
	if err != nil {
		return nil, err
	}
	haltCheck(p.Plan, g, ds, ring, "")
	budgetCheck(g, r, states, p.Plan, "")
	if p.Plan.ringIndex(ring) < len(p.Plan.Rings)-1 {
		p.soakCheck(g, r, states)
	}
	for i := range p.Plan.Clusters {
		cp := &p.Plan.Clusters[i]
		if cp.Ring != ring {
			continue
		}
		st := states[cp.Name]
		if st.LeftAt != nil {
			g.add("finished", cp.Name, CheckPass, "cluster %s left the run at %s (%s)", cp.Name, st.LeftAt.Format(time.RFC3339), st.Outcome)
			continue
		}
		if st.FinishedAt == nil {
			g.add("finished", cp.Name, CheckWait, "cluster %s has not finished its steps", cp.Name)
			continue
		}
		for _, s := range cp.Steps {
			if s.Kind == StepVerify || s.Kind == StepGPUValidate {
				ss := st.Step(s.Name)
				res := CheckPass
				if ss.Phase != PhaseCompleted {
					res = CheckFail
				}
				name := map[string]string{StepVerify: "verify-regressions", StepGPUValidate: "gpu-validate"}[s.Kind]
				g.add(name, cp.Name, res, "step %s %s (attempt %d, exit %d)", s.Name, ss.Phase, ss.Attempt, ss.ExitCode)
			}
		}
		target, err := p.Access.For(ctx, cp)
		if err != nil {
			g.add("access", cp.Name, CheckUnknown, "%v", err)
			continue
		}
		kc, err := target.Getter.Kube()
		if err != nil {
			g.add("access", cp.Name, CheckUnknown, "%v", err)
			continue
		}
		g.Checks = append(g.Checks, haltChecks(ctx, kc, p.Plan.Spec.HaltOn, cp.Name, cp.GPUs, p.rateWindow(), nil, p.promqlBaselineOf(st))...)
	}
	g.finish()
	return g, nil
}

// soakCheck adds the soak of ring r, read from the store: the ring
// finished when its last cluster was decided, and the next ring opens
// a soak later. A resubmitted, resumed (argo resume) or hand-run programme
// keeps it; the engine's timed suspend only waits for it.
func (p *Programme) soakCheck(g *GateReport, r *RingPlan, states map[string]*ClusterState) {
	d := fleetfile.Duration(r.Soak).Value()
	if d <= 0 {
		return
	}
	var last *time.Time
	for _, c := range p.Plan.Clusters {
		if c.Ring != r.Name {
			continue
		}
		t := states[c.Name].DecidedAt()
		if t == nil {
			return // not finished: the earlier-rings or finished check says so
		}
		if last == nil || t.After(*last) {
			last = t
		}
	}
	if last == nil {
		return
	}
	opens := last.Add(d)
	if now := p.now(); now.Before(opens) {
		g.wait("soak", "", opens, "ring %s finished at %s, soak %s: opens at %s", r.Name, last.Format(time.RFC3339), r.Soak, opens.Format(time.RFC3339))
		return
	}
	g.add("soak", "", CheckPass, "ring %s finished at %s, soak %s: open since %s", r.Name, last.Format(time.RFC3339), r.Soak, opens.Format(time.RFC3339))
}

// readRun reads the run's decisions and what each gate weighs of every
// cluster: from the run's index, with the state files of the clusters
// full names (readGateStates).
func (p *Programme) readRun(ctx context.Context, full func(cluster string) bool) ([]Decision, map[string]*ClusterState, error) {
	ds, err := ReadDecisions(ctx, p.Store, p.Plan.Run)
	if err != nil {
		return nil, nil, err
	}
	states, err := readGateStates(ctx, p.Store, p.Plan, full)
	if err != nil {
		return nil, nil, err
	}
	p.Plan.ApplySkips(ds, states)
	return ds, states, nil
}

// GateRun is the run-wide view: halts of the run and each ring's budget.
func (p *Programme) GateRun(ctx context.Context) (*GateReport, error) {
	g := p.newGate("", "")
	ds, states, err := p.readRun(ctx, nil)
	if err != nil {
		return nil, err
	}
	for i := range p.Plan.Rings {
		r := &p.Plan.Rings[i]
		haltCheck(p.Plan, g, ds, r.Name, "")
		g.Checks[len(g.Checks)-1].Name = "halt:" + r.Name
		budgetCheck(g, r, states, p.Plan, "")
	}
	g.finish()
	return g, nil
}

// lockKey serializes admissions of a run.
func lockKey(run string) string { return runKey(run, "lock") }

type lockRecord struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// errLockHeld is a lock another holder has not let expire.
var errLockHeld = errors.New("held by another command")

// takeLock takes the lock at key for holder until expires, once: created
// when absent, or taken over from a holder that let it expire (or released
// it) by an Update from the version read, so that of any number of takers
// that saw one expired record exactly one wins. It returns the version the
// lock was written at, or an error wrapping errLockHeld, ErrConflict
// (another taker won the race) or the store's failure.
func takeLock(ctx context.Context, st Store, key string, me lockRecord, now time.Time) (string, lockRecord, error) {
	b, _ := json.Marshal(me)
	v, err := st.Update(ctx, key, b, "")
	if err == nil {
		return v, lockRecord{}, nil
	}
	if !errors.Is(err, ErrConflict) {
		return "", lockRecord{}, err
	}
	old, ver, err := st.ReadVersion(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return "", lockRecord{}, fmt.Errorf("%s: %w", key, ErrConflict)
	}
	if err != nil {
		return "", lockRecord{}, err
	}
	var lr lockRecord
	if json.Unmarshal(old, &lr) == nil && !now.After(lr.Expires) {
		return "", lr, fmt.Errorf("%s: %w", key, errLockHeld)
	}
	v, err = st.Update(ctx, key, b, ver)
	return v, lr, err
}

// releaseLock ends a lock held at version: rewritten as released (expired,
// no holder) by an Update from that version, so a lock another command
// took over since is left alone.
func releaseLock(ctx context.Context, st Store, key, version string) error {
	b, _ := json.Marshal(lockRecord{})
	_, err := st.Update(ctx, key, b, version)
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// withLock runs f holding the run's lock (takeLock), waiting up to two
// minutes for another holder.
func (p *Programme) withLock(ctx context.Context, f func() error) error {
	key := lockKey(p.Plan.Run)
	me := lockRecord{Holder: p.holder() + "/" + fmt.Sprint(time.Now().UnixNano())}
	deadline := time.Now().Add(2 * time.Minute)
	var version string
	for {
		me.Expires = p.now().Add(30 * time.Second)
		v, old, err := takeLock(ctx, p.Store, key, me, p.now())
		if err == nil {
			if old.Holder != "" {
				p.logf("took over the lock of run %s that %s let expire", p.Plan.Run, old.Holder)
			}
			version = v
			break
		}
		if !errors.Is(err, errLockHeld) && !errors.Is(err, ErrConflict) && !Transient(err) {
			return err
		}
		if time.Now().After(deadline) {
			return cli.Incomplete(fmt.Errorf("the lock of run %s (%s) is held by another command", p.Plan.Run, key))
		}
		if !errors.Is(err, errLockHeld) {
			// Another taker won the race, or the store failed: a retry.
			// Waiting for a live holder is not one.
			noteRetry(ctx, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer func() { _ = releaseLock(context.WithoutCancel(ctx), p.Store, key, version) }()
	return f()
}

// admit puts the cluster in flight when the caps allow: clusters in
// flight in the fleet and in its ring, and GPUs in flight. A cluster above
// the GPU cap on its own is admitted when nothing else is in flight.
// Decided and recorded under the run's lock, from the store's states, so
// two gates can never both take the last place (Argo's semaphore is the
// first line; argoproj/argo-workflows#10286 is why it is not the only one).
//
// The admission is itself a compare-and-swap of the cluster's state: a
// step of the cluster written between the read and the admission sends it
// round again, under the same lock.
func (p *Programme) admit(ctx context.Context, g *GateReport, cp *ClusterPlan) error {
	return p.withLock(ctx, func() error {
		return retryStore(ctx, storeBackoff, func(err error) bool { return errors.Is(err, ErrConflict) }, func() error {
			return p.admitLocked(ctx, g, cp)
		})
	})
}

func (p *Programme) admitLocked(ctx context.Context, g *GateReport, cp *ClusterPlan) error {
	states, err := readGateStates(ctx, p.Store, p.Plan, func(c string) bool { return c == cp.Name })
	if err != nil {
		return err
	}
	ds, err := ReadDecisions(ctx, p.Store, p.Plan.Run)
	if err != nil {
		return err
	}
	p.Plan.ApplySkips(ds, states)
	st := states[cp.Name]
	if st.InFlight() {
		g.add("caps", cp.Name, CheckPass, "admitted at %s", st.AdmittedAt.Format(time.RFC3339))
		return nil
	}
	wait, fleet, gpus := p.capsWait(cp, states)
	if wait != "" {
		g.add("caps", cp.Name, CheckWait, "%s", wait)
		return nil
	}
	now := p.now()
	st.AdmittedAt, st.GPUs, st.Ring = &now, cp.GPUs, cp.Ring
	if err := WriteState(ctx, p.Store, st); err != nil {
		return err
	}
	g.add("caps", cp.Name, CheckPass, "admitted: %d of %s clusters, %d of %s GPUs in flight with it",
		fleet+1, capText(p.Plan.MaxClustersInFlight), gpus+cp.GPUs, capText(p.Plan.MaxGPUsInFlight))
	return nil
}

// capsWait says what holds cp out of flight under the caps ("" when
// nothing does): the clusters in flight in the fleet and in its ring, its
// DR partner, the GPUs in flight. fleet and gpus are what is in flight
// without it.
func (p *Programme) capsWait(cp *ClusterPlan, states map[string]*ClusterState) (wait string, fleet, gpus int) {
	r, _ := p.Plan.Ring(cp.Ring)
	ring := 0
	var names []string
	for _, c := range p.Plan.Clusters {
		if s := states[c.Name]; s.InFlight() {
			fleet++
			gpus += s.GPUs
			names = append(names, c.Name)
			if c.Ring == cp.Ring {
				ring++
			}
		}
	}
	switch {
	case p.Plan.MaxClustersInFlight > 0 && fleet >= p.Plan.MaxClustersInFlight:
		wait = fmt.Sprintf("%s in flight (%s), the fleet's cap is %d", cli.Plural(fleet, "cluster"), strings.Join(names, ", "), p.Plan.MaxClustersInFlight)
	case r.MaxConcurrent > 0 && ring >= r.MaxConcurrent:
		wait = fmt.Sprintf("%s of ring %s in flight, its cap is %d", cli.Plural(ring, "cluster"), r.Name, r.MaxConcurrent)
	case cp.DRPair != "" && drPartnerInFlight(p.Plan, states, cp) != "":
		wait = fmt.Sprintf("%s, the other half of DR pair %s, is in flight: the two are never upgraded at once", drPartnerInFlight(p.Plan, states, cp), cp.DRPair)
	case p.Plan.MaxGPUsInFlight > 0 && fleet > 0 && gpus+cp.GPUs > p.Plan.MaxGPUsInFlight:
		wait = fmt.Sprintf("%s in flight, %d more would pass the cap of %d", cli.Plural(gpus, "GPU"), cp.GPUs, p.Plan.MaxGPUsInFlight)
	}
	return wait, fleet, gpus
}

// drPartnerInFlight is the other half of cp's DR pair when it is in
// flight ("" when not): checked again at admission, whatever the plan's
// batches say, since a batch's clusters can overlap the next's.
func drPartnerInFlight(p *Plan, states map[string]*ClusterState, cp *ClusterPlan) string {
	for _, c := range p.Clusters {
		if c.Name != cp.Name && c.DRPair == cp.DRPair && states[c.Name].InFlight() {
			return c.Name
		}
	}
	return ""
}

func capText(n int) string {
	if n == 0 {
		return "no cap of"
	}
	return fmt.Sprint(n)
}
