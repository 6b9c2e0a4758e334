package fleetrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Step phases (seed: "a per-step state file (completed / in-progress /
// pending)"); failed is a step that ended with a halt.
const (
	PhasePending    = "pending"
	PhaseInProgress = "in-progress"
	PhaseCompleted  = "completed"
	PhaseFailed     = "failed"
)

// ClusterState is runs/<run>/state/<cluster>.json: what happened to one
// cluster, step by step.
type ClusterState struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Run        string `json:"run"`
	Cluster    string `json:"cluster"`
	Ring       string `json:"ring"`
	// AdmittedAt is when the gate let the cluster in flight (under the
	// caps); FinishedAt when its last step completed and it left.
	AdmittedAt *time.Time `json:"admittedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// LeftAt is when the cluster left the run before finishing: it failed
	// within its ring's failure budget, or people skipped it (Outcome
	// says which). Its place in flight is free again, its remaining steps
	// do nothing, and the gates treat it as decided.
	LeftAt  *time.Time `json:"leftAt,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	// GPUs in flight while admitted.
	GPUs int `json:"gpus,omitempty"`
	// Holds are what this run holds from rolling with the control plane
	// and has not released yet: Cluster API MachineDeployment topologies,
	// or pools a holdRollouts command held.
	Holds []string `json:"holds,omitempty"`
	// Baseline is the store key of the pre-flight baseline verify reads.
	Baseline string `json:"baseline,omitempty"`
	// Fence counts the claims of the cluster's steps: each claim takes
	// the next number as its fencing token (StepState.Fence), written
	// with the claim by compare-and-swap, so no two claims ever hold the
	// same token and a takeover always holds a larger one.
	Fence int64 `json:"fence,omitempty"`
	// Steps in plan order.
	Steps []StepState `json:"steps"`

	// version is the store's version of the state as read or last
	// written ("" for a state not in the store yet): WriteState writes
	// only over that version, so a runner whose claim another runner
	// took over cannot write the state again.
	version string
	// seen is the state's bytes at version: what this process read or
	// last wrote.
	seen []byte
	// summary marks a state made from the run's index (IndexEntry.state):
	// what the gates weigh, not the state file, and never written.
	summary bool
}

// InFlight reports whether the cluster holds a place under the caps.
func (s *ClusterState) InFlight() bool {
	return s.AdmittedAt != nil && s.FinishedAt == nil && s.LeftAt == nil
}

// Outcomes of a cluster that left a run.
const (
	OutcomeFailed  = "failed"
	OutcomeSkipped = "skipped"
)

// Decided reports whether the cluster is done with the run: finished, or
// left it (failed within the budget, or skipped).
func (s *ClusterState) Decided() bool { return s.FinishedAt != nil || s.LeftAt != nil }

// DecidedAt is when it was decided (nil while it is not).
func (s *ClusterState) DecidedAt() *time.Time {
	if s.FinishedAt != nil {
		return s.FinishedAt
	}
	return s.LeftAt
}

// CountsAsFailed reports whether the cluster counts against its ring's
// failure budget: a failed step, unless people skipped the cluster.
func (s *ClusterState) CountsAsFailed() (string, bool) {
	if s.Outcome == OutcomeSkipped {
		return "", false
	}
	return s.Failed()
}

// StepState is one step's record.
type StepState struct {
	Name  string `json:"name"`
	Phase string `json:"phase"`
	// Attempt counts the times the step started (1 for the first).
	Attempt int `json:"attempt"`
	// InputsDigest identifies what the step ran with; a completed step
	// with the same digest is not run again.
	InputsDigest string `json:"inputsDigest,omitempty"`
	// Holder is who runs an in-progress step (host and pid), and
	// Heartbeat when it last said it still does.
	Holder    string     `json:"holder,omitempty"`
	Heartbeat *time.Time `json:"heartbeat,omitempty"`
	// Fence is the fencing token of the step's last claim (the
	// cluster's Fence when it was claimed). The claim's commands get it
	// as FencingTokenEnv; the runner's own writes of the attempt (its
	// heartbeats, its end) stand only while the store's record of the
	// step still carries it.
	Fence int64 `json:"fence,omitempty"`
	// StartedAt and FinishedAt are the last attempt's.
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// ExitCode of the last attempt; Message says why it ended or waits.
	ExitCode int    `json:"exitCode"`
	Message  string `json:"message,omitempty"`
	// Issued is when an attempt's provider command last succeeded, and
	// IssuedAttempt which attempt that was: a later attempt does not
	// issue it again while the step's expected duration since then has
	// not passed.
	Issued        *time.Time `json:"issued,omitempty"`
	IssuedAttempt int        `json:"issuedAttempt,omitempty"`
	// RunID is the gang-drain run the step drives (drain and restore
	// share it), so a repeated attempt resumes that run's state in the
	// cluster.
	RunID string `json:"runID,omitempty"`
	// Waiting says why a step that has not started waits, while it does:
	// written once per distinct reason, not at each ask (a gate's "not
	// yet" is no attempt).
	Waiting *StepWait `json:"waiting,omitempty"`
	// Evidence lists the store keys of every attempt's evidence.
	Evidence []string `json:"evidence,omitempty"`
	// StoreRetries counts the store's retries of the last ended attempt
	// (RunStep's decision, claim, heartbeats and evidence; the write of
	// this record is not in it): nil when there were none.
	StoreRetries *StoreRetries `json:"storeRetries,omitempty"`
	// History has one line per ended attempt.
	History []Attempt `json:"history,omitempty"`
}

// StepWait is why a step waits: "waiting until Until because Reason".
type StepWait struct {
	// Since is when it began to wait for this reason.
	Since time.Time `json:"since"`
	// Until is the next opening when only the clock ends the wait; unset
	// when it waits for a change (a ring to finish, an approval, a place
	// under the caps).
	Until *time.Time `json:"until,omitempty"`
	// Reason names the checks that hold it; Message is the first one's
	// words.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Attempt is one ended attempt of a step.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	Phase      string    `json:"phase"`
	ExitCode   int       `json:"exitCode"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Message    string    `json:"message,omitempty"`
}

// Step returns the named step's record, adding a pending one.
func (s *ClusterState) Step(name string) *StepState {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i]
		}
	}
	s.Steps = append(s.Steps, StepState{Name: name, Phase: PhasePending})
	return &s.Steps[len(s.Steps)-1]
}

// Failed reports whether a step of the cluster is failed now.
func (s *ClusterState) Failed() (string, bool) {
	for _, st := range s.Steps {
		if st.Phase == PhaseFailed {
			return st.Name, true
		}
	}
	return "", false
}

// Store keys of a run.
func runKey(run string, parts ...string) string {
	return path.Join(append([]string{"runs", run}, parts...)...)
}

// PlanKey is where a run's frozen plan lives.
func PlanKey(run string) string { return runKey(run, "plan.json") }

// StateKey is where a cluster's state lives.
func StateKey(run, cluster string) string { return runKey(run, "state", cluster+".json") }

// EvidencePrefix is the folder of one attempt's evidence.
func EvidencePrefix(run, cluster, step string, attempt int) string {
	return runKey(run, "evidence", cluster, step, fmt.Sprint(attempt))
}

// LatestPreflightKey is the latest pre-flight report of a cluster (the
// `kubectl skew preflight -o json` report), which the fleet report reads.
func LatestPreflightKey(cluster string) string { return path.Join("latest", cluster, "preflight.json") }

// ValidRun checks a run name: a DNS label, since it names Workflows.
func ValidRun(run string) error {
	if run == "" {
		return errors.New("--run is required: the run's name, such as 2026-12-v1-38")
	}
	if len(run) > 40 || strings.Trim(nonName.ReplaceAllString(run, "-"), "-") != run {
		return fmt.Errorf("run %q: want lowercase letters, digits and '-', at most 40 characters", run)
	}
	return nil
}

// ReadPlan reads a run's frozen plan.
func ReadPlan(ctx context.Context, st Store, run string) (*Plan, error) {
	b, err := st.Read(ctx, PlanKey(run))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("run %s has no plan in %s: freeze one with `kubectl skew fleet plan -f FLEET --run %s`: %w", run, st.URL(), run, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s's plan from %s: %w", run, st.URL(), err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("run %s's plan in %s is not readable: %w", run, st.URL(), err)
	}
	return &p, nil
}

// FreezePlan stores a run's plan once. A plan already frozen for the run
// with the same fleet file is kept (re-running plan is harmless);
// another one is refused unless replace is set.
func FreezePlan(ctx context.Context, st Store, p *Plan, replace bool) (kept bool, err error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return false, err
	}
	err = st.Create(ctx, PlanKey(p.Run), append(b, '\n'))
	if err == nil {
		// A new run: no cluster has a state yet, and its index says so.
		// A plan kept or replaced leaves the index as it is (or a run
		// planned before the index existed without one).
		return false, CreateIndex(ctx, st, p)
	}
	if !errors.Is(err, ErrExists) {
		return false, err
	}
	old, rerr := ReadPlan(ctx, st, p.Run)
	if rerr != nil {
		return false, rerr
	}
	if old.FleetDigest == p.FleetDigest && !replace {
		return true, nil
	}
	if !replace {
		return false, fmt.Errorf("run %s already has a plan from another fleet file (%s): pick a new run name, or pass --replace to re-plan it (completed steps stay completed)", p.Run, old.CreatedAt.Format(time.RFC3339))
	}
	return false, st.Write(ctx, PlanKey(p.Run), append(b, '\n'))
}

// ReadState reads a cluster's state and its version; a missing one is new.
func ReadState(ctx context.Context, st Store, run, cluster, ring string) (*ClusterState, error) {
	b, version, err := st.ReadVersion(ctx, StateKey(run, cluster))
	if errors.Is(err, ErrNotFound) {
		return &ClusterState{APIVersion: APIVersion, Kind: KindState, Run: run, Cluster: cluster, Ring: ring}, nil
	}
	if err != nil {
		return nil, err
	}
	var s ClusterState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state of %s in run %s is not readable: %w", cluster, run, err)
	}
	s.version, s.seen = version, b
	return &s, nil
}

// WriteState replaces a cluster's state atomically when the store still
// holds the version it was read at (compare-and-swap), and keeps the new
// version for the next write. When someone else wrote it since, it changes
// nothing and returns an error wrapping ErrConflict: the caller reads the
// state again and decides again.
//
// A version this process lost (a write that landed but whose new version
// could not be read back, a heartbeat cancelled after it landed) is
// recovered here: when the store still holds exactly the bytes this
// process last read or wrote, no one else has written since, and the
// write goes again over the store's current version.
//
// A write that changes what the run's index says of the cluster
// (summaryOf) keeps the index with it: the entry is marked pending before
// the state is written and given the new summary after (IndexEntry).
func WriteState(ctx context.Context, st Store, s *ClusterState) error {
	if s.summary {
		return fmt.Errorf("the state of cluster %s in run %s was read from the run's index and cannot be written", s.Cluster, s.Run)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	old := ClusterState{Ring: s.Ring}
	if s.seen != nil {
		old = ClusterState{}
		if err := json.Unmarshal(s.seen, &old); err != nil {
			old = ClusterState{}
		}
	}
	var token string
	if !summaryOf(&old).same(summaryOf(s)) {
		if token, err = indexBefore(ctx, st, s); err != nil {
			return err
		}
	}
	key, data := StateKey(s.Run, s.Cluster), append(b, '\n')
	v, err := st.Update(ctx, key, data, s.version)
	if errors.Is(err, ErrConflict) && s.seen != nil {
		if cur, curV, rerr := st.ReadVersion(ctx, key); rerr == nil && bytes.Equal(cur, s.seen) && curV != s.version {
			v, err = st.Update(ctx, key, data, curV)
		}
	}
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("the state of cluster %s in run %s changed since it was read (another runner wrote it): %w", s.Cluster, s.Run, err)
		}
		return err
	}
	s.version, s.seen = v, data
	indexAfter(ctx, st, s, token)
	return nil
}

// ReadStates reads the state of every cluster of a plan (new ones for
// clusters not started).
func ReadStates(ctx context.Context, st Store, p *Plan) (map[string]*ClusterState, error) {
	out := map[string]*ClusterState{}
	for _, c := range p.Clusters {
		s, err := ReadState(ctx, st, p.Run, c.Name, c.Ring)
		if err != nil {
			return nil, err
		}
		out[c.Name] = s
	}
	return out, nil
}

// PutEvidence writes one evidence file, never over an existing one.
func PutEvidence(ctx context.Context, st Store, key string, data []byte) error {
	if err := st.Create(ctx, key, data); err != nil {
		if errors.Is(err, ErrExists) {
			return fmt.Errorf("evidence %s already exists and is never overwritten: %w", key, err)
		}
		return err
	}
	return nil
}

// toYAML is the YAML of v, for evidence people read.
func toYAML(v any) []byte {
	b, err := yaml.Marshal(v)
	if err != nil {
		return []byte(err.Error())
	}
	return b
}
