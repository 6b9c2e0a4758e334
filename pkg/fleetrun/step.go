package fleetrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// StepResult is what `kubectl skew fleet step` reports.
type StepResult struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Run        string `json:"run"`
	Cluster    string `json:"cluster"`
	Step       string `json:"step"`
	// Phase after the command, Attempt the attempt it ran (0: none ran).
	Phase   string `json:"phase"`
	Attempt int    `json:"attempt"`
	// Skipped says why nothing ran (already completed with the same
	// inputs).
	Skipped string `json:"skipped,omitempty"`
	// ExitCode is the command's own exit code: 0 done, 1 halt, 3 cannot
	// evaluate, 4 not yet.
	ExitCode int    `json:"exitCode"`
	Message  string `json:"message,omitempty"`
	// NextAt, on a "not yet" that only the clock ends (a window, a
	// freeze, a soak), is when asking again can change the answer
	// (GateReport.NextAt).
	NextAt *time.Time `json:"nextAt,omitempty"`
	// Evidence lists the store keys written by this attempt.
	Evidence []string `json:"evidence,omitempty"`
	// StoreRetries counts what the store's compare-and-swap and
	// transient failures made this run of the step try again.
	StoreRetries *StoreRetries `json:"storeRetries,omitempty"`
}

// Err turns the result into the command's exit: nil for 0.
func (r *StepResult) Err() error {
	if r.ExitCode == 0 {
		return nil
	}
	return &cli.ExitError{Code: r.ExitCode, Err: errors.New(r.Message)}
}

// KindStepResult is the kind of a StepResult.
const KindStepResult = "FleetStepResult"

// stepOutcome is how an action ended.
type stepOutcome struct {
	// code is the step's exit code; message why.
	code    int
	message string
	// report is the -o json of the command (or the gate's report),
	// stderr its progress lines.
	report []byte
	stderr []byte
	argv   []string
	// extra evidence files by name.
	extra map[string][]byte
}

// stepRun is one attempt in progress.
type stepRun struct {
	p       *Programme
	cp      *ClusterPlan
	step    Step
	mu      sync.Mutex
	state   *ClusterState
	ss      *StepState
	target  Target
	action  fleetfile.UpgradeAction
	digests string
}

// inputsDigest identifies a step's inputs: its definition, the target, the
// cluster's upgrade action and halt checks.
func (p *Programme) inputsDigest(cp *ClusterPlan, s Step) string {
	a, _ := p.Plan.Spec.Upgrade.ActionFor(cp.Labels)
	return Digest(struct {
		Step   Step
		Target string
		Action fleetfile.UpgradeAction
		Halt   []fleetfile.HaltCheck
	}{s, p.Plan.Target, a, p.Plan.Spec.HaltOn})
}

// RunStep runs one step of one cluster: the only thing an engine runs.
// It is idempotent: a step completed with the same inputs is not run
// again; an earlier step not completed, a halt, a closed window or a step
// another process is running end it without running anything. Each attempt
// is counted and its evidence is stored under its own number, never over
// an earlier one.
//
// Every write of the cluster's state is a compare-and-swap from the version
// read (WriteState): when another runner wrote the state between this
// one's read and its claim, the claim changes nothing and the step is
// decided again from a fresh read, which then sees the other runner's
// claim. A runner whose claim was taken over (its heartbeat stopped long
// enough for another to take the step) cannot write the state again: its
// step is stopped and its end is not recorded over the other's.
func (p *Programme) RunStep(ctx context.Context, cluster, stepName string) (*StepResult, error) {
	backoff := storeBackoff
	if c, _ := ctx.Value(retryCounterKey{}).(*retryCounter); c == nil {
		ctx, _ = countRetries(ctx)
	}
	for {
		res, err := p.runStep(ctx, cluster, stepName)
		if !errors.Is(err, errRedecide) || backoff.Steps <= 1 || ctx.Err() != nil {
			return res, err
		}
		noteRetry(ctx, err)
		d := backoff.Step()
		p.logf("%s/%s: %v; deciding again in %s", cluster, stepName, err, d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
}

// errRedecide is a state write before the claim that met another
// runner's write: RunStep reads and decides again.
var errRedecide = errors.New("the state changed while the step was being decided")

// claimWrite writes the state before and at the claim: a conflict there
// sends RunStep round again.
func claimWrite(ctx context.Context, st Store, s *ClusterState) error {
	err := WriteState(ctx, st, s)
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w: %w", errRedecide, err)
	}
	return err
}

func (p *Programme) runStep(ctx context.Context, cluster, stepName string) (*StepResult, error) {
	cp, ok := p.Plan.Cluster(cluster)
	if !ok {
		return nil, cli.Usagef("cluster %s is not in run %s (clusters: %s)", cluster, p.Plan.Run, strings.Join(p.clusterNames(), ", "))
	}
	s, idx, ok := cp.Step(stepName)
	if !ok {
		var names []string
		for _, x := range cp.Steps {
			names = append(names, x.Name)
		}
		return nil, cli.Usagef("cluster %s has no step %s in run %s (steps: %s)", cluster, stepName, p.Plan.Run, strings.Join(names, ", "))
	}
	res := &StepResult{APIVersion: APIVersion, Kind: KindStepResult, Run: p.Plan.Run, Cluster: cluster, Step: stepName}
	st, err := ReadState(ctx, p.Store, p.Plan.Run, cluster, cp.Ring)
	if err != nil {
		return nil, err
	}
	ss := st.Step(stepName)
	digest := p.inputsDigest(cp, s)
	res.Phase, res.Attempt = ss.Phase, ss.Attempt
	if st.LeftAt != nil {
		res.Skipped = fmt.Sprintf("cluster %s left the run at %s (%s)", cluster, st.LeftAt.Format(time.RFC3339), st.Outcome)
		res.Message = "nothing to do: " + res.Skipped
		return res, nil
	}
	ds, err := ReadDecisions(ctx, p.Store, p.Plan.Run)
	if err != nil {
		return nil, err
	}
	if who, ok := p.Plan.Skipped(ds, cluster); ok {
		at, _ := p.Plan.SkippedAt(ds, cluster)
		st.LeftAt, st.Outcome = &at, OutcomeSkipped
		if err := claimWrite(ctx, p.Store, st); err != nil {
			return nil, err
		}
		res.Skipped = fmt.Sprintf("cluster %s skipped by %s: it leaves the run", cluster, strings.Join(who, ", "))
		res.Message = "nothing to do: " + res.Skipped
		return res, nil
	}
	if ss.Phase == PhaseCompleted && ss.InputsDigest == digest {
		res.Skipped = fmt.Sprintf("completed at %s (attempt %d) with the same inputs", ss.FinishedAt.Format(time.RFC3339), ss.Attempt)
		res.Message = "nothing to do: " + res.Skipped
		return res, nil
	}
	for _, before := range cp.Steps[:idx] {
		if b := st.Step(before.Name); b.Phase != PhaseCompleted {
			// Not yet: the earlier step comes first (a script that runs
			// every step in a loop asks again).
			res.ExitCode = cli.ExitIncomplete
			res.Message = fmt.Sprintf("step %s of cluster %s comes after %s, which is %s: not yet, run the steps in order", stepName, cluster, before.Name, b.Phase)
			return res, nil
		}
	}
	if ss.Phase == PhaseInProgress && ss.Heartbeat != nil && ss.Holder != p.holder() && p.now().Sub(*ss.Heartbeat) < 3*p.heartbeat() && !holderGone(ss.Holder) {
		res.ExitCode = cli.ExitIncomplete
		res.Message = fmt.Sprintf("step %s of cluster %s is running in %s (heartbeat %s ago): not starting a second one",
			stepName, cluster, ss.Holder, p.now().Sub(*ss.Heartbeat).Round(time.Second))
		return res, nil
	}
	if h, ok := p.Plan.ActiveHalt(ds, cp.Ring, cluster); ok {
		// Refused, not failed: the step's record is unchanged and no
		// further halt is written.
		res.ExitCode = cli.ExitFindings
		res.Message = describeHalt(h) + "; nothing started"
		return res, nil
	}
	if s.Kind == StepGate && ss.Phase != PhaseInProgress {
		// "Not yet" is not an attempt: a gate held by what the store and
		// the clock say (an earlier ring, a soak, an approval, the
		// window, the caps as the run's index has them) starts none and
		// writes no evidence; its answer carries the next opening when
		// the clock decides it, and the step's record says why it waits,
		// once per distinct reason (waitOnce). What needs the clusters
		// runs as an attempt, with its evidence, and the caps are decided
		// again there under the run's lock.
		g := p.newGate(cp.Ring, cluster)
		ds2, states, err := p.readRun(ctx, nil)
		if err != nil {
			return nil, err
		}
		p.startChecks(g, cp, ds2, states)
		g.finish()
		if g.ExitCode == cli.ExitOK && !states[cluster].InFlight() {
			if wait, _, _ := p.capsWait(cp, states); wait != "" {
				g.add("caps", cluster, CheckWait, "%s", wait)
				g.finish()
			}
		}
		if g.ExitCode == cli.ExitIncomplete {
			res.ExitCode, res.NextAt = g.ExitCode, g.NextAt
			res.Message = "not yet: " + g.Reason()
			if err := p.waitOnce(ctx, st, ss, g); err != nil {
				return nil, err
			}
			return res, nil
		}
	}
	// A step already in progress (its attempt was stopped: its deadline, a
	// node lost) resumes from its recorded state: it is not refused for
	// want of window room for its whole expected duration, as the gate
	// does not check the window of a cluster in flight.
	if s.Kind != StepGate && s.Disruptive && ss.Phase != PhaseInProgress {
		g := p.newGate(cp.Ring, cluster)
		p.windowCheck(g, cp, p.expected(s))
		g.finish()
		if g.ExitCode != cli.ExitOK {
			res.ExitCode, res.NextAt = g.ExitCode, g.NextAt
			res.Message = "not starting " + stepName + ": " + g.Reason()
			// The state says why once; the same answer again writes
			// nothing.
			if ss.Message != res.Message {
				ss.Message = res.Message
				if err := claimWrite(ctx, p.Store, st); err != nil {
					return nil, err
				}
			}
			return res, nil
		}
	}

	// Claim the attempt.
	now := p.now()
	if ss.Phase == PhaseInProgress && ss.StartedAt != nil {
		// The last attempt's process died without recording its end
		// (killed): record it, so the run says what happened.
		msg := fmt.Sprintf("abandoned: %s stopped without recording an end (last heartbeat %s); taken over by %s", ss.Holder, timeOrDash(ss.Heartbeat), p.holder())
		b, _ := json.MarshalIndent(stepMeta{Run: p.Plan.Run, Cluster: cluster, Step: stepName, Kind: s.Kind, Attempt: ss.Attempt, InputsDigest: ss.InputsDigest,
			Holder: ss.Holder, ExitCode: cli.ExitInterrupted, Message: msg, StartedAt: *ss.StartedAt, FinishedAt: now}, "", "  ")
		key := path.Join(EvidencePrefix(p.Plan.Run, cluster, stepName, ss.Attempt), "meta.json")
		if err := PutEvidence(ctx, p.Store, key, append(b, '\n')); err == nil {
			ss.Evidence = append(ss.Evidence, key)
		}
		ss.History = append(ss.History, Attempt{Attempt: ss.Attempt, Phase: PhasePending, ExitCode: cli.ExitInterrupted, StartedAt: *ss.StartedAt, FinishedAt: now, Message: msg})
		p.logf("%s/%s: attempt %d %s", cluster, stepName, ss.Attempt, msg)
	}
	ss.Attempt++
	ss.Waiting = nil
	ss.Phase, ss.InputsDigest, ss.Holder = PhaseInProgress, digest, p.holder()
	st.Fence++
	ss.Fence = st.Fence
	ss.StartedAt, ss.FinishedAt, ss.Heartbeat, ss.Message, ss.ExitCode = &now, nil, &now, "", 0
	if s.Kind == StepDrain || s.Kind == StepRestore {
		ss.RunID = p.drainRunID(cp, s)
	}
	if err := claimWrite(ctx, p.Store, st); err != nil {
		return nil, err
	}
	res.Attempt, res.Phase = ss.Attempt, ss.Phase
	p.logf("%s/%s: attempt %d of %s started", cluster, stepName, ss.Attempt, s.Kind)

	r := &stepRun{p: p, cp: cp, step: s, state: st, ss: ss, digests: digest}
	r.action, _ = p.Plan.Spec.Upgrade.ActionFor(cp.Labels)
	var out stepOutcome
	if s.Kind == StepGate {
		// The gate is short and writes the admission itself: no
		// heartbeat, and the admission is read back before the step's
		// record is written.
		out = r.do(ctx)
		fresh, err := ReadState(context.WithoutCancel(ctx), p.Store, p.Plan.Run, cluster, cp.Ring)
		if err != nil {
			return nil, err
		}
		// The admission is this attempt's only while the step's record
		// is still its claim; another runner's takeover stands.
		if fs := fresh.Step(stepName); fs == nil || fs.Fence != ss.Fence || fs.Attempt != ss.Attempt || fs.Holder != ss.Holder {
			return nil, fmt.Errorf("step %s of cluster %s was taken over by another runner while attempt %d ran; its outcome (exit %d: %s) is not recorded: %w",
				stepName, cluster, ss.Attempt, out.code, out.message, ErrConflict)
		}
		st.AdmittedAt, st.GPUs, st.version, st.seen = fresh.AdmittedAt, fresh.GPUs, fresh.version, fresh.seen
	} else {
		sctx, cancel := context.WithCancelCause(ctx)
		stop := r.heartbeat(sctx, cancel)
		out = r.do(sctx)
		stop()
		cancel(nil)
		if err := context.Cause(sctx); errors.Is(err, ErrConflict) {
			// Taken over: the other runner's record stands.
			p.logf("%s/%s: attempt %d stopped: %v", cluster, stepName, ss.Attempt, err)
			return nil, fmt.Errorf("step %s of cluster %s was taken over by another runner while attempt %d ran; its outcome (exit %d: %s) is not recorded: %w",
				stepName, cluster, ss.Attempt, out.code, out.message, err)
		}
	}

	if ctx.Err() != nil && out.code != 0 {
		// Stopped by the step's own interruption, whatever failed
		// after it: the next attempt resumes.
		out.code, out.message = cli.ExitInterrupted, "interrupted: "+out.message
	}
	// Record the outcome and the evidence.
	r.mu.Lock()
	defer r.mu.Unlock()
	end := p.now()
	keys, err := p.storeEvidence(ctx, r, out, now, end)
	if err != nil {
		return nil, err
	}
	ss.Evidence = append(ss.Evidence, keys...)
	ss.StoreRetries = nil
	if n := retriesIn(ctx); !n.Zero() {
		ss.StoreRetries, res.StoreRetries = &n, &n
	}
	ss.ExitCode, ss.Message, ss.FinishedAt, ss.Heartbeat, ss.Holder = out.code, out.message, &end, nil, ""
	switch {
	case out.code == 0:
		ss.Phase = PhaseCompleted
	case out.code == cli.ExitIncomplete || out.code == cli.ExitInterrupted:
		// Not yet, or interrupted: the next attempt resumes.
		ss.Phase = PhasePending
		out.code = cli.ExitIncomplete
	default:
		ss.Phase = PhaseFailed
	}
	ss.History = append(ss.History, Attempt{Attempt: ss.Attempt, Phase: ss.Phase, ExitCode: ss.ExitCode, StartedAt: now, FinishedAt: end, Message: out.message})
	if ss.Phase == PhaseCompleted && idx == len(cp.Steps)-1 {
		st.FinishedAt = &end
	}
	if err := WriteState(context.WithoutCancel(ctx), p.Store, st); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("step %s of cluster %s was taken over by another runner while attempt %d ran; its outcome (%s) is not recorded: %w", stepName, cluster, ss.Attempt, ss.Phase, err)
		}
		return nil, err
	}
	if ss.Phase == PhaseFailed && out.code == cli.ExitFindings {
		code, msg, err := p.settleFailure(context.WithoutCancel(ctx), cp, st, stepName, out.message, end)
		if err != nil {
			return nil, err
		}
		out.code, out.message = code, msg
	}
	res.Phase, res.ExitCode, res.Message, res.Evidence = ss.Phase, out.code, out.message, keys
	p.logf("%s/%s: attempt %d %s (exit %d): %s", cluster, stepName, ss.Attempt, ss.Phase, out.code, out.message)
	return res, nil
}

// waitOnce records in the step's state why a gate step waits and until
// when: "waiting until T because R", R the names of the checks that hold
// it. The state is written only when that changes (another check holds
// it, or the opening moves), so asking again every backoff interval
// writes nothing.
func (p *Programme) waitOnce(ctx context.Context, st *ClusterState, ss *StepState, g *GateReport) error {
	var names []string
	for _, c := range g.Checks {
		if c.Result == CheckWait {
			names = append(names, c.Name)
		}
	}
	w := &StepWait{Since: p.now(), Until: g.NextAt, Reason: strings.Join(names, ", "), Message: g.Reason()}
	if old := ss.Waiting; old != nil && old.Reason == w.Reason && sameTime(old.Until, w.Until) {
		return nil
	}
	ss.Waiting = w
	return claimWrite(ctx, p.Store, st)
}

// ExitLeftRun is `fleet step`'s exit code for a step that failed while its
// ring's failure budget still had room: the cluster leaves the run (its
// place in flight is free, its other steps do nothing) and the ring goes
// on without it. The budget is the programme's own: Azure Fleet Manager's
// update strategy has stages, groups, maxConcurrency,
// afterStageWaitInSeconds and gates and no failure budget (Azure Policy
// aliases of Microsoft.ContainerService/fleets/updateStrategies, read
// 2026-12-06). Past the budget a failure is exit 1 and halts.
const ExitLeftRun = 5

// settleFailure counts a failed cluster against its ring's budget (seed:
// "Any failure pauses the fleet until a human approves continuation" when
// the budget is 0): within it the cluster leaves the run with a record;
// past it the ring is halted, once (a halt already holding is not written
// again).
func (p *Programme) settleFailure(ctx context.Context, cp *ClusterPlan, st *ClusterState, stepName, message string, at time.Time) (int, string, error) {
	r, _ := p.Plan.Ring(cp.Ring)
	states, err := readGateStates(ctx, p.Store, p.Plan, nil)
	if err != nil {
		return 0, "", err
	}
	ds, err := ReadDecisions(ctx, p.Store, p.Plan.Run)
	if err != nil {
		return 0, "", err
	}
	p.Plan.ApplySkips(ds, states)
	states[cp.Name] = st
	var failed []string
	for _, c := range p.Plan.Clusters {
		if c.Ring != cp.Ring {
			continue
		}
		if _, f := states[c.Name].CountsAsFailed(); f {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) <= r.MaxFailures {
		st.LeftAt, st.Outcome = &at, OutcomeFailed
		if err := WriteState(ctx, p.Store, st); err != nil {
			return 0, "", err
		}
		return ExitLeftRun, fmt.Sprintf("%s; cluster %s leaves the run: %d failed in ring %s (%s), within its failure budget of %d",
			message, cp.Name, len(failed), r.Name, strings.Join(failed, ", "), r.MaxFailures), nil
	}
	budget := fmt.Sprintf("%d failed in ring %s (%s), past its failure budget of %d", len(failed), r.Name, strings.Join(failed, ", "), r.MaxFailures)
	if _, held := p.Plan.ActiveHalt(ds, cp.Ring, ""); !held {
		if _, err := RecordStepHalt(ctx, p.Store, Decision{Run: p.Plan.Run, Decision: DecisionHalt, Ring: cp.Ring,
			By: "step " + stepName + " of " + cp.Name, At: at, Reason: message + " (" + budget + ")"}); err != nil {
			return 0, "", err
		}
	}
	return cli.ExitFindings, message + "; " + budget + ": ring " + r.Name + " halts", nil
}

func (p *Programme) clusterNames() []string {
	var out []string
	for _, c := range p.Plan.Clusters {
		out = append(out, c.Name)
	}
	return out
}

func (p *Programme) heartbeat() time.Duration {
	if p.Heartbeat > 0 {
		return p.Heartbeat
	}
	return 10 * time.Second
}

// heartbeat rewrites the state while the step runs, so another process can
// tell a running step from one whose process died. A heartbeat that meets
// another runner's write (the step was taken over) stops the step: cancel
// is called with the conflict.
func (r *stepRun) heartbeat(ctx context.Context, cancel context.CancelCauseFunc) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.p.heartbeat())
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				r.mu.Lock()
				now := r.p.now()
				r.ss.Heartbeat = &now
				err := WriteState(ctx, r.p.Store, r.state)
				r.mu.Unlock()
				if errors.Is(err, ErrConflict) {
					cancel(err)
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// drainRunID is the gang-drain run of a pool upgrade: fixed by the run,
// cluster, pool and version, so every attempt (and restore) names the same
// run and resumes its state in the cluster.
func (p *Programme) drainRunID(cp *ClusterPlan, s Step) string {
	d := Digest([]string{p.Plan.Run, cp.Name, s.Pool, s.Minor})
	return "gd-" + p.Plan.Run + "-" + strings.TrimPrefix(d, "sha256:")[:8]
}

// stepMeta is meta.json of an attempt.
type stepMeta struct {
	Run          string    `json:"run"`
	Cluster      string    `json:"cluster"`
	Step         string    `json:"step"`
	Kind         string    `json:"kind"`
	Attempt      int       `json:"attempt"`
	InputsDigest string    `json:"inputsDigest"`
	Holder       string    `json:"holder"`
	Command      []string  `json:"command,omitempty"`
	ExitCode     int       `json:"exitCode"`
	Message      string    `json:"message,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	FinishedAt   time.Time `json:"finishedAt"`
	Files        []string  `json:"files"`
	// StoreRetries counts the store's retries of the step's run up to
	// this evidence (its decision, claim, heartbeats and evidence).
	StoreRetries *StoreRetries `json:"storeRetries,omitempty"`
}

func (p *Programme) storeEvidence(ctx context.Context, r *stepRun, out stepOutcome, start, end time.Time) ([]string, error) {
	ctx = context.WithoutCancel(ctx)
	prefix := EvidencePrefix(p.Plan.Run, r.cp.Name, r.step.Name, r.ss.Attempt)
	files := map[string][]byte{}
	if len(out.report) > 0 {
		// A plugin's -o json is the report; an action's command prints
		// what it prints.
		if json.Valid(out.report) {
			files["report.json"] = out.report
		} else {
			files["stdout.log"] = out.report
		}
	}
	if len(out.stderr) > 0 {
		files["stderr.log"] = out.stderr
	}
	for k, v := range out.extra {
		files[k] = v
	}
	var keys []string
	for _, name := range sortedKeys(files) {
		key := path.Join(prefix, name)
		if err := PutEvidence(ctx, p.Store, key, files[name]); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	meta := stepMeta{Run: p.Plan.Run, Cluster: r.cp.Name, Step: r.step.Name, Kind: r.step.Kind, Attempt: r.ss.Attempt, InputsDigest: r.digests,
		Holder: p.holder(), Command: out.argv, ExitCode: out.code, Message: out.message, StartedAt: start, FinishedAt: end, Files: sortedKeys(files)}
	if n := retriesIn(ctx); !n.Zero() {
		meta.StoreRetries = &n
	}
	b, _ := json.MarshalIndent(meta, "", "  ")
	key := path.Join(prefix, "meta.json")
	if err := PutEvidence(ctx, p.Store, key, append(b, '\n')); err != nil {
		return nil, err
	}
	return append(keys, key), nil
}

// FencingTokenEnv names the fencing token of the attempt in the
// environment of every command a step starts: the cluster's claim counter
// (ClusterState.Fence) at the attempt's claim. A takeover claims with a
// larger one, so a system the command writes to can refuse a write
// carrying a token smaller than the largest it has seen from the cluster's
// run, which is what keeps a runner whose claim was taken over (a paused
// process, a partitioned pod) from acting after the takeover; the runner's
// own state writes are refused by the store's compare-and-swap.
const FencingTokenEnv = "GPUFLEET_FENCING_TOKEN"

// launch runs a command and keeps its output; ex is how it ended, ok is
// false when it could not start (out then says why, exit 2).
func (r *stepRun) launch(ctx context.Context, argv []string, env []string) (out stepOutcome, ex Exit, ok bool) {
	runner := r.p.Exec
	if runner == nil {
		runner = ExecPlugins{}
	}
	var stdout, stderr bytes.Buffer
	env = append(env, fmt.Sprintf("%s=%d", FencingTokenEnv, r.ss.Fence))
	ex, err := runner.Run(ctx, argv, env, &stdout, &stderr)
	out = stepOutcome{code: ex.Code, report: stdout.Bytes(), stderr: stderr.Bytes(), argv: argv}
	if err != nil {
		out.code, out.message = cli.ExitUsage, err.Error()
		return out, ex, false
	}
	out.message = fmt.Sprintf("%s exited %d", strings.Join(displayArgv(argv), " "), ex.Code)
	if ex.Signal != "" {
		out.message = fmt.Sprintf("%s was killed by %s", strings.Join(displayArgv(argv), " "), ex.Signal)
	}
	if ex.Code != 0 {
		if line := lastLine(stderr.Bytes()); line != "" {
			out.message += ": " + line
		}
	}
	return out, ex, true
}

// exec runs one of the suite's plugins and reads its exit code by the
// suite's own table (pkg/cli): 0 done, 1 findings, 2 usage, 3 the cluster
// could not be evaluated, 4 not yet, 130 interrupted. A plugin killed by a
// signal is "not yet" only when this step stopped it (the step itself was
// interrupted); killed by anything else, it failed.
func (r *stepRun) exec(ctx context.Context, argv []string, env ...string) stepOutcome {
	out, ex, ok := r.launch(ctx, argv, env)
	if !ok {
		return out
	}
	switch {
	case ex.Signal != "" && ctx.Err() != nil:
		out.code = cli.ExitInterrupted
	case ex.Signal != "":
		out.code = cli.ExitFindings
	case ex.Code == cli.ExitOK, ex.Code == cli.ExitFindings, ex.Code == cli.ExitUsage, ex.Code == cli.ExitUnavailable,
		ex.Code == cli.ExitIncomplete, ex.Code == cli.ExitInterrupted:
	default:
		out.message += " (not an exit code of the suite's table)"
		out.code = cli.ExitFindings
	}
	return out
}

// NotYetExitCode is the one exit code of an action's command (a fleet
// file's command template) that means "not yet, ask again": the suite's
// own "stopped but resumable". Every other code but 0 is a failure whose
// output is the attempt's evidence: the step does not read other tools'
// codes, whose meanings are their own (the AWS CLI exits 252 for a bad
// parameter, 253 for a bad environment or missing credentials, 254 for an
// error the service returned and 255 for any other failure:
// https://docs.aws.amazon.com/cli/latest/userguide/cli-usage-returncodes.html,
// read 2026-12-06; none of them is a signal).
const NotYetExitCode = cli.ExitIncomplete

// command runs an action's command: 0 done, NotYetExitCode not yet, and
// anything else (a signal included, unless this step was interrupted) a
// failure.
func (r *stepRun) command(ctx context.Context, argv []string, env ...string) stepOutcome {
	out, ex, ok := r.launch(ctx, argv, env)
	if !ok {
		out.code = cli.ExitFindings
		return out
	}
	switch {
	case ex.Code == 0 && ex.Signal == "":
	case ctx.Err() != nil:
		out.code = cli.ExitInterrupted
	case ex.Code == NotYetExitCode && ex.Signal == "":
		out.message += " (not yet: the command asks to be run again)"
	default:
		out.code = cli.ExitFindings
		out.message += "; its output is the attempt's evidence"
	}
	return out
}

// displayArgv is a command as messages show it: the binary's name, no
// kubeconfig path.
func displayArgv(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		switch {
		case argv[i] == "--kubeconfig":
			i++
		case i == 0:
			out = append(out, filepath.Base(argv[i]))
		default:
			out = append(out, argv[i])
		}
	}
	return out
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// do runs the step's action.
func (r *stepRun) do(ctx context.Context) stepOutcome {
	p, s := r.p, r.step
	if s.Kind == StepGate {
		g, err := p.GateCluster(ctx, r.cp.Name)
		if err != nil {
			return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
		}
		b, _ := json.MarshalIndent(g, "", "  ")
		msg := "gate: " + g.Verdict
		if g.ExitCode != 0 {
			msg += ": " + g.Reason()
		}
		return stepOutcome{code: g.ExitCode, message: msg, report: append(b, '\n')}
	}
	t, err := p.Access.For(ctx, r.cp)
	if err != nil {
		return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
	}
	r.target = t
	switch s.Kind {
	case StepPDBBlockers, StepDrain, StepGPUValidate:
		// A plugin given a selector that matches nothing reports on
		// nothing and passes: the step would pass over an empty set.
		if out, ok := r.poolNotEmpty(ctx); !ok {
			return out
		}
	}
	switch s.Kind {
	case StepPreflight:
		return r.preflight(ctx)
	case StepEtcdSnapshot, StepControlPlane, StepPoolUpgrade, StepHold:
		return r.upgrade(ctx)
	case StepPDBBlockers:
		return r.exec(ctx, r.plugin(BinPDBBlockers, "-l", s.Selector, "--fail-on", "blocking"))
	case StepDrain:
		args, err := p.drainArgs(r.cp.Name, s, r.ss.RunID)
		if err != nil {
			return stepOutcome{code: cli.ExitUsage, message: "the cluster's hydrate bandwidth: " + err.Error()}
		}
		return r.exec(ctx, r.plugin(BinGangDrain, args...))
	case StepGPUValidate:
		return r.exec(ctx, r.plugin(BinGPUValidate, "nodes", "-l", s.Selector))
	case StepRestore:
		return r.exec(ctx, r.plugin(BinGangDrain, restoreArgs(s, r.ss.RunID)...))
	case StepVerify:
		return r.verify(ctx)
	case StepCRDMigrate:
		return r.exec(ctx, r.plugin(BinCRDMigrate, "run", "--all"))
	}
	return stepOutcome{code: cli.ExitUsage, message: "unknown step kind " + s.Kind}
}

// plugin is the argv of a plugin run against the cluster with -o json.
func (r *stepRun) plugin(bin string, args ...string) []string {
	argv := append([]string{bin}, args...)
	argv = append(argv, r.target.Args()...)
	return append(argv, "-o", "json")
}

func (r *stepRun) tempDir() (string, func(), error) {
	d, err := os.MkdirTemp("", "gpufleet-step-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}

// preflight runs skew preflight; the cluster's first one saves the baseline
// verify compares with, and every one becomes the cluster's latest
// pre-flight report for the fleet report.
func (r *stepRun) preflight(ctx context.Context) stepOutcome {
	dir, done, err := r.tempDir()
	if err != nil {
		return stepOutcome{code: cli.ExitUsage, message: err.Error()}
	}
	defer done()
	first := r.state.Baseline == ""
	args := []string{"preflight", "--target", "v" + r.step.Minor}
	base := filepath.Join(dir, "baseline.yaml")
	if first {
		args = append(args, "--save", base)
	}
	pq, err := promqlFlags(r.p.Plan.Spec.HaltOn, r.cp.Name, dir)
	if err != nil {
		return stepOutcome{code: cli.ExitUsage, message: "writing the PromQL checks: " + err.Error()}
	}
	args = append(args, pq...)
	out := r.exec(ctx, r.plugin(BinSkew, args...))
	if len(out.report) > 0 && json.Valid(out.report) {
		if err := r.p.Store.Write(context.WithoutCancel(ctx), LatestPreflightKey(r.cp.Name), out.report); err != nil {
			out.message += "; writing the latest pre-flight report: " + err.Error()
		}
	}
	if first && out.code == 0 {
		b, err := os.ReadFile(base)
		if err != nil {
			return stepOutcome{code: cli.ExitUnavailable, message: "preflight saved no baseline: " + err.Error(), report: out.report, stderr: out.stderr, argv: out.argv}
		}
		out.extra = map[string][]byte{"baseline.yaml": b}
		r.state.Baseline = path.Join(EvidencePrefix(r.p.Plan.Run, r.cp.Name, r.step.Name, r.ss.Attempt), "baseline.yaml")
	}
	return out
}

// verify runs skew verify against the stored baseline, with each pool's
// planned kubelet minor.
func (r *stepRun) verify(ctx context.Context) stepOutcome {
	if r.state.Baseline == "" {
		return stepOutcome{code: cli.ExitUsage, message: "no pre-flight baseline recorded for cluster " + r.cp.Name}
	}
	b, err := r.p.Store.Read(ctx, r.state.Baseline)
	if err != nil {
		return stepOutcome{code: cli.ExitUnavailable, message: "reading the baseline: " + err.Error()}
	}
	dir, done, err := r.tempDir()
	if err != nil {
		return stepOutcome{code: cli.ExitUsage, message: err.Error()}
	}
	defer done()
	base := filepath.Join(dir, "baseline.yaml")
	if err := os.WriteFile(base, b, 0o600); err != nil {
		return stepOutcome{code: cli.ExitUsage, message: err.Error()}
	}
	args := []string{"verify", "--baseline", base}
	pools := r.cp.FinalPools()
	for _, name := range sortedKeys(pools) {
		args = append(args, "--pool", name+"=v"+pools[name])
	}
	return r.exec(ctx, r.plugin(BinSkew, args...))
}
