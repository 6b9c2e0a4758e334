package eviction

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// MaxDisruptedPods is the API server's limit on evictions a PDB may have
// that its controller has not confirmed yet (status.disruptedPods); above
// it evictions are refused with 403.
const MaxDisruptedPods = 2000

// DoNotDisruptAnnotation keeps Karpenter from voluntarily disrupting a pod
// (on a pod) or a node (on a node).
const DoNotDisruptAnnotation = "karpenter.sh/do-not-disrupt"

// DefaultDrainTimeout is the drain timeout assumed when Evaluator.DrainTimeout is 0.
const DefaultDrainTimeout = time.Hour

// BlockerKind names one reason a pod holds up a drain.
type BlockerKind string

// Blocker kinds. The budget kinds mirror the eviction API's refusals; the
// others are what a drain meets besides the API.
const (
	// BlockerBudgetExhausted: the PDB allows no disruption now and will once
	// more selected pods are healthy.
	BlockerBudgetExhausted BlockerKind = "BudgetExhausted"
	// BlockerBudgetSpent: earlier evictions of this drain spent the budget;
	// the drain waits for their replacements to become Ready.
	BlockerBudgetSpent BlockerKind = "BudgetSpentByDrain"
	// BlockerMinAvailableAll: minAvailable (or its percentage) asks for every
	// pod the PDB expects, so the budget never allows a disruption.
	BlockerMinAvailableAll BlockerKind = "MinAvailableEqualsReplicas"
	// BlockerMaxUnavailableZero: maxUnavailable is 0 (or 0%).
	BlockerMaxUnavailableZero BlockerKind = "MaxUnavailableZero"
	// BlockerSyncFailed: the PDB controller cannot compute the budget.
	BlockerSyncFailed BlockerKind = "PDBSyncFailed"
	// BlockerMultiplePDBs: several PDBs select the pod (the API answers 500).
	BlockerMultiplePDBs BlockerKind = "MultiplePDBs"
	// BlockerEmptySelector: a PDB with an empty selector selects every pod
	// of its namespace.
	BlockerEmptySelector BlockerKind = "EmptySelector"
	// BlockerPDBStale: the PDB status lags its spec (429 with Retry-After).
	BlockerPDBStale BlockerKind = "PDBStale"
	// BlockerNegativeBudget: disruptionsAllowed is negative (403).
	BlockerNegativeBudget BlockerKind = "NegativeBudget"
	// BlockerTooManyUnconfirmed: too many unconfirmed evictions (403).
	BlockerTooManyUnconfirmed BlockerKind = "TooManyUnconfirmedDisruptions"
	// BlockerUnhealthyPod: the pod is not Ready and the PDB's
	// unhealthyPodEvictionPolicy (IfHealthyBudget) does not let it go.
	BlockerUnhealthyPod BlockerKind = "UnhealthyPodGuarded"
	// BlockerDoNotDisrupt: karpenter.sh/do-not-disrupt on the pod or node.
	BlockerDoNotDisrupt BlockerKind = "DoNotDisrupt"
	// BlockerNoController: the pod has no controller; kubectl drain refuses
	// it without --force, and nothing recreates it.
	BlockerNoController BlockerKind = "NoController"
	// BlockerEmptyDir: the pod has emptyDir data; kubectl drain refuses it
	// without --delete-emptydir-data, and the data is lost.
	BlockerEmptyDir BlockerKind = "EmptyDirData"
	// BlockerFinalizers: finalizers keep a terminating pod after its grace
	// period ended.
	BlockerFinalizers BlockerKind = "Finalizers"
	// BlockerTerminating: the pod is terminating within its grace period.
	BlockerTerminating BlockerKind = "Terminating"
	// BlockerGracePeriod: terminationGracePeriodSeconds is longer than the
	// drain timeout, so the drain gives up before the pod exits.
	BlockerGracePeriod BlockerKind = "GracePeriodExceedsDrainTimeout"
	// BlockerPDBsUnknown: the PDBs of the pod's namespace could not be read.
	BlockerPDBsUnknown BlockerKind = "PDBsUnreadable"
	// BlockerDaemonSet: a DaemonSet pod, which drain leaves in place.
	BlockerDaemonSet BlockerKind = "DaemonSet"
	// BlockerMirrorPod: a static (mirror) pod, which drain leaves in place.
	BlockerMirrorPod BlockerKind = "MirrorPod"
)

// blockerWords are the blocker kinds as reports write them: the suite's
// multi-word enum values are kebab-case (docs/output-schemas.md). Reports
// of PDBBlockersReport and GangDrainPlan gpufleet.dev/v1alpha2 and earlier
// wrote the Go values (CamelCase), which UnmarshalText still reads.
var blockerWords = map[BlockerKind]string{
	BlockerBudgetExhausted:    "budget-exhausted",
	BlockerBudgetSpent:        "budget-spent-by-drain",
	BlockerMinAvailableAll:    "min-available-equals-replicas",
	BlockerMaxUnavailableZero: "max-unavailable-zero",
	BlockerSyncFailed:         "pdb-sync-failed",
	BlockerMultiplePDBs:       "multiple-pdbs",
	BlockerEmptySelector:      "empty-selector",
	BlockerPDBStale:           "pdb-stale",
	BlockerNegativeBudget:     "negative-budget",
	BlockerTooManyUnconfirmed: "too-many-unconfirmed-disruptions",
	BlockerUnhealthyPod:       "unhealthy-pod-guarded",
	BlockerDoNotDisrupt:       "do-not-disrupt",
	BlockerNoController:       "no-controller",
	BlockerEmptyDir:           "empty-dir-data",
	BlockerFinalizers:         "finalizers",
	BlockerTerminating:        "terminating",
	BlockerGracePeriod:        "grace-period-exceeds-drain-timeout",
	BlockerPDBsUnknown:        "pdbs-unreadable",
	BlockerDaemonSet:          "daemonset",
	BlockerMirrorPod:          "mirror-pod",
}

// BlockerKinds are every blocker kind, in the order of their declaration.
var BlockerKinds = []BlockerKind{BlockerBudgetExhausted, BlockerBudgetSpent, BlockerMinAvailableAll, BlockerMaxUnavailableZero,
	BlockerSyncFailed, BlockerMultiplePDBs, BlockerEmptySelector, BlockerPDBStale, BlockerNegativeBudget, BlockerTooManyUnconfirmed,
	BlockerUnhealthyPod, BlockerDoNotDisrupt, BlockerNoController, BlockerEmptyDir, BlockerFinalizers, BlockerTerminating,
	BlockerGracePeriod, BlockerPDBsUnknown, BlockerDaemonSet, BlockerMirrorPod}

// JSONWord is the kind as reports write it (kebab-case: "budget-exhausted").
func (k BlockerKind) JSONWord() string {
	if w, ok := blockerWords[k]; ok {
		return w
	}
	return string(k)
}

// MarshalText writes the kind as JSONWord.
func (k BlockerKind) MarshalText() ([]byte, error) { return []byte(k.JSONWord()), nil }

// UnmarshalText reads a kind as MarshalText writes it or as an earlier
// release did ("BudgetExhausted").
func (k *BlockerKind) UnmarshalText(b []byte) error {
	v, err := cli.ReadEnumWord(b, BlockerKinds, BlockerKind.JSONWord)
	if err != nil {
		return fmt.Errorf("blocker kind %w", err)
	}
	*k = v
	return nil
}

// Blocker is one reason a pod holds up a drain, with a command that fixes it.
type Blocker struct {
	// Kind classifies the blocker (JSON: kebab-case, JSONWord).
	Kind BlockerKind `json:"kind"`
	// Outcome says whether this blocker clears by waiting (Later) or not (Never).
	Outcome Outcome `json:"outcome"`
	// PDB names the PodDisruptionBudget involved, if any.
	PDB string `json:"pdb,omitempty"`
	// Message explains the blocker in one sentence.
	Message string `json:"message"`
	// Fix is a copy-paste command that removes the blocker.
	Fix string `json:"fix,omitempty"`
	// FixWarning says what the fix costs, when it is not free.
	FixWarning string `json:"fixWarning,omitempty"`
}

// Budget is a PodDisruptionBudget's state as a simulated drain sees it.
type Budget struct {
	// Name of the PDB (same namespace as the pod).
	Name string `json:"name"`
	// DisruptionsAllowed is status.disruptionsAllowed minus what the
	// simulation has spent so far.
	DisruptionsAllowed int32 `json:"disruptionsAllowed"`
	// CurrentHealthy, DesiredHealthy and ExpectedPods are from the status.
	CurrentHealthy int32 `json:"currentHealthy"`
	DesiredHealthy int32 `json:"desiredHealthy"`
	ExpectedPods   int32 `json:"expectedPods"`
	// Spent counts the disruptions this simulation has spent.
	Spent int32 `json:"spent,omitempty"`
	// UnhealthyPodEvictionPolicy is the spec's policy (IfHealthyBudget when unset).
	UnhealthyPodEvictionPolicy string `json:"unhealthyPodEvictionPolicy"`
}

// Verdict is the Evaluator's answer for one pod.
type Verdict struct {
	// Namespace, Name and Node identify the pod.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	// UID is the pod's UID.
	UID types.UID `json:"-"`
	// Outcome is the worst of the eviction's outcome and the blockers'.
	Outcome Outcome `json:"outcome"`
	// Eviction is the answer the eviction API would give at this point of
	// the simulated drain: the same Result type Classify returns.
	Eviction Result `json:"eviction"`
	// SpendsBudget is true when the eviction takes one disruption from the
	// pod's PDB (healthy pod, or unhealthy pod the policy does not let go).
	SpendsBudget bool `json:"spendsBudget,omitempty"`
	// PDBs names the PodDisruptionBudgets that select the pod.
	PDBs []string `json:"pdbs,omitempty"`
	// Budget is the state of the pod's only PDB, when it has exactly one.
	Budget *Budget `json:"budget,omitempty"`
	// Blockers explain everything that holds the pod up, worst first.
	Blockers []Blocker `json:"blockers,omitempty"`
}

// Evaluator predicts evictions without touching the network. Its fields
// mirror kubectl drain's flags.
type Evaluator struct {
	// Now is the time to judge ages against (terminating pods, grace periods).
	Now time.Time
	// DrainTimeout is how long the drain waits in all (0: DefaultDrainTimeout).
	DrainTimeout time.Duration
	// DeleteEmptyDirData is kubectl drain's --delete-emptydir-data: emptyDir
	// pods are evicted, with a note that the data is lost.
	DeleteEmptyDirData bool
	// Force is kubectl drain's --force: pods without a controller are
	// evicted, with a note that nothing recreates them.
	Force bool
}

// Simulation drains nodes in order against an Index, spending each PDB's
// budget as pods are evicted, so that "waits for replacements" is told from
// "blocked forever". A server-side dry run does not spend budget; a
// Simulation keeps its own count instead.
type Simulation struct {
	eval  Evaluator
	idx   *Index
	spent map[string]int32 // namespace/name of a PDB -> disruptions spent
	done  map[types.UID]bool
}

// NewSimulation starts a simulation over idx with no budget spent.
func (e Evaluator) NewSimulation(idx *Index) *Simulation {
	if e.DrainTimeout <= 0 {
		e.DrainTimeout = DefaultDrainTimeout
	}
	return &Simulation{eval: e, idx: idx, spent: map[string]int32{}, done: map[types.UID]bool{}}
}

// Index returns the index the simulation works on.
func (s *Simulation) Index() *Index { return s.idx }

// Spent returns how many disruptions the simulation took from a PDB.
func (s *Simulation) Spent(namespace, name string) int32 { return s.spent[namespace+"/"+name] }

// DrainNode evicts every pod on node in order (namespace, name) and
// returns a verdict per pod. Pods a drain leaves alone come back with
// OutcomeIgnored and spend nothing.
func (s *Simulation) DrainNode(node string) []Verdict {
	pods := s.idx.PodsOn(node)
	out := make([]Verdict, 0, len(pods))
	for _, p := range pods {
		out = append(out, s.Evict(p))
	}
	return out
}

// Predict returns the verdict for evicting pod at this point of the drain
// (counting the budget the drain spent so far), without spending any.
func (s *Simulation) Predict(pod *corev1.Pod) Verdict { return s.evaluate(pod, s.spent) }

// PredictAlone returns the verdict for evicting pod by itself, as if this
// drain had evicted nothing: what a server-side dry run of the eviction
// answers, since a dry run spends no budget (checkAndDecrement returns
// before writing the PDB status under dryRun: pkg/registry/core/pod/
// storage/eviction.go in k8s.io/kubernetes v1.37.2).
func (s *Simulation) PredictAlone(pod *corev1.Pod) Verdict { return s.evaluate(pod, nil) }

// Evict returns the verdict for evicting pod at this point of the drain and,
// when the eviction API would accept it and take a disruption, spends one
// from the pod's PDB. A pod already evicted by this simulation is answered
// as PodGone.
func (s *Simulation) Evict(pod *corev1.Pod) Verdict {
	if s.done[pod.UID] && pod.UID != "" {
		v := Verdict{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName, UID: pod.UID, Outcome: OutcomeNow,
			Eviction: Result{Reason: ReasonPodGone, Code: http.StatusNotFound, Message: "evicted earlier in this drain"}}
		return v
	}
	v := s.evaluate(pod, s.spent)
	if v.Outcome != OutcomeIgnored && v.Eviction.Evicted() {
		if v.SpendsBudget && len(v.PDBs) == 1 {
			s.spent[pod.Namespace+"/"+v.PDBs[0]]++
		}
		if pod.UID != "" {
			s.done[pod.UID] = true
		}
	}
	return v
}

// evaluate judges pod against the budgets less what spent records as taken
// (nil: nothing taken).
func (s *Simulation) evaluate(pod *corev1.Pod, spent map[string]int32) Verdict {
	v := Verdict{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName, UID: pod.UID}
	node := s.idx.Node(pod.Spec.NodeName)
	entries := s.idx.entriesFor(pod)
	for _, e := range entries {
		v.PDBs = append(v.PDBs, e.pdb.Name)
	}
	why, unknown := s.idx.unknownNS[pod.Namespace]
	if unknown {
		v.Eviction = Result{Reason: ReasonError, Message: "PodDisruptionBudgets could not be read: " + why}
		v.Blockers = append(v.Blockers, Blocker{Kind: BlockerPDBsUnknown, Outcome: OutcomeUnknown,
			Message: fmt.Sprintf("cannot read PodDisruptionBudgets in namespace %s: %s", pod.Namespace, why),
			Fix:     fmt.Sprintf("kubectl auth can-i list poddisruptionbudgets -n %s", pod.Namespace)})
	} else {
		s.predictAPI(pod, entries, spent, &v)
	}
	v.Blockers = append(v.Blockers, s.podBlockers(pod, node)...)

	switch {
	case isMirror(pod):
		v.Outcome = OutcomeIgnored
		v.Blockers = []Blocker{{Kind: BlockerMirrorPod, Outcome: OutcomeIgnored,
			Message: "static pod managed by the kubelet; drain leaves it in place"}}
		return v
	case isDaemonSetPod(pod) && !finished(pod):
		v.Outcome = OutcomeIgnored
		v.Blockers = []Blocker{{Kind: BlockerDaemonSet, Outcome: OutcomeIgnored,
			Message: "DaemonSet pod; drain (--ignore-daemonsets) leaves it in place"}}
		return v
	}
	v.Outcome = OutcomeNow
	if !unknown {
		v.Outcome = v.Eviction.Outcome()
	}
	for _, b := range v.Blockers {
		v.Outcome = Worse(v.Outcome, b.Outcome)
	}
	sort.SliceStable(v.Blockers, func(i, j int) bool { return v.Blockers[i].Outcome.rank() > v.Blockers[j].Outcome.rank() })
	return v
}

// predictAPI reproduces the eviction handler of the API server (policy/v1)
// for pod, given the PDBs that select it and the budget spent so far.
func (s *Simulation) predictAPI(pod *corev1.Pod, entries []*pdbEntry, spentSoFar map[string]int32, v *Verdict) {
	accepted := Result{Reason: ReasonEvicted, Code: http.StatusCreated}
	// Terminal, pending and terminating pods are deleted without
	// looking at any PDB.
	if canIgnorePDB(pod) {
		v.Eviction = accepted
		v.Eviction.Message = ignoreReason(pod)
		return
	}
	if len(entries) > 1 {
		v.Eviction = Result{Reason: ReasonMultiplePDBs, Code: http.StatusInternalServerError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}
		v.Blockers = append(v.Blockers, multiplePDBBlocker(pod, entries))
		return
	}
	if len(entries) == 0 {
		v.Eviction = accepted
		return
	}
	e := entries[0]
	pdb := e.pdb
	spent := spentSoFar[pdb.Namespace+"/"+pdb.Name]
	policy := string(policyv1.IfHealthyBudget)
	if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
		policy = string(*pdb.Spec.UnhealthyPodEvictionPolicy)
	}
	st := pdb.Status
	v.Budget = &Budget{Name: pdb.Name, DisruptionsAllowed: st.DisruptionsAllowed - spent, CurrentHealthy: st.CurrentHealthy - spent,
		DesiredHealthy: st.DesiredHealthy, ExpectedPods: st.ExpectedPods, Spent: spent, UnhealthyPodEvictionPolicy: policy}

	if !podReady(pod) {
		if policy == string(policyv1.AlwaysAllow) {
			v.Eviction = accepted
			v.Eviction.PDB = pdb.Name
			v.Eviction.Message = "pod is not Ready and the PDB's unhealthyPodEvictionPolicy is AlwaysAllow"
			return
		}
		if st.CurrentHealthy-spent >= st.DesiredHealthy && st.DesiredHealthy > 0 {
			v.Eviction = accepted
			v.Eviction.PDB = pdb.Name
			v.Eviction.Message = "pod is not Ready and the PDB has enough healthy pods (IfHealthyBudget)"
			return
		}
	}
	// checkAndDecrement.
	ref := pdb.Name
	fixWait := fmt.Sprintf("kubectl get pdb %s -n %s -w", pdb.Name, pdb.Namespace)
	switch {
	case st.ObservedGeneration < pdb.Generation:
		v.Eviction = Result{Reason: ReasonPDBStale, Code: http.StatusTooManyRequests, PDB: ref, RetryAfter: 10 * time.Second, RetryAfterSeconds: 10,
			Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name)}
		if syncFailed(pdb) {
			// A failed sync leaves observedGeneration behind, so the API
			// answers "still being processed" for as long as it fails.
			b := s.budgetBlocker(pod, e, spent)
			b.Message += " (the API server answers \"still being processed\" because the controller never observed this generation)"
			v.Blockers = append(v.Blockers, b)
			return
		}
		v.Blockers = append(v.Blockers, Blocker{Kind: BlockerPDBStale, Outcome: OutcomeLater, PDB: ref,
			Message: fmt.Sprintf("PDB status is behind its spec (observedGeneration %d < generation %d); the disruption controller has not caught up", st.ObservedGeneration, pdb.Generation),
			Fix:     fixWait, FixWarning: "if it never catches up, check that kube-controller-manager is running"})
		return
	case st.DisruptionsAllowed < 0:
		v.Eviction = Result{Reason: ReasonNegativeBudget, Code: http.StatusForbidden, PDB: ref,
			Message: fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name)}
		v.Blockers = append(v.Blockers, Blocker{Kind: BlockerNegativeBudget, Outcome: OutcomeNever, PDB: ref,
			Message: fmt.Sprintf("status.disruptionsAllowed is %d", st.DisruptionsAllowed),
			Fix:     fmt.Sprintf("kubectl describe pdb %s -n %s", pdb.Name, pdb.Namespace)})
		return
	case len(st.DisruptedPods) > MaxDisruptedPods:
		v.Eviction = Result{Reason: ReasonTooManyUnconfirmed, Code: http.StatusForbidden, PDB: ref,
			Message: fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb.Name)}
		v.Blockers = append(v.Blockers, Blocker{Kind: BlockerTooManyUnconfirmed, Outcome: OutcomeLater, PDB: ref,
			Message: fmt.Sprintf("%s not yet confirmed by the disruption controller (limit %d)", cli.Plural(len(st.DisruptedPods), "eviction")+cli.Agree(len(st.DisruptedPods), " is", " are"), MaxDisruptedPods),
			Fix:     fixWait})
		return
	case st.DisruptionsAllowed-spent <= 0:
		v.Eviction = Result{Reason: ReasonBudgetExhausted, Code: http.StatusTooManyRequests, PDB: ref}
		cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		switch {
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" && cond.Reason == policyv1.SyncFailedReason:
			v.Eviction.Reason = ReasonPDBSyncFailed
			v.Eviction.Message = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
		case st.CurrentHealthy-spent <= st.DesiredHealthy:
			d, c := st.DesiredHealthy, st.CurrentHealthy-spent
			v.Eviction.DesiredHealthy, v.Eviction.CurrentHealthy = &d, &c
			v.Eviction.Message = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, d, c)
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "":
			v.Eviction.Message = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
		default:
			v.Eviction.Message = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		v.Blockers = append(v.Blockers, s.budgetBlocker(pod, e, spent))
		return
	}
	v.Eviction = accepted
	v.Eviction.PDB = ref
	v.SpendsBudget = true
}

// budgetBlocker tells a budget that clears by waiting from one that never does.
func (s *Simulation) budgetBlocker(pod *corev1.Pod, e *pdbEntry, spent int32) Blocker {
	pdb := e.pdb
	st := pdb.Status
	ns := pdb.Namespace
	b := Blocker{PDB: pdb.Name}
	owner := workloadOf(pod)
	cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
	switch {
	case syncFailed(pdb):
		b.Kind, b.Outcome = BlockerSyncFailed, OutcomeNever
		b.Message = fmt.Sprintf("the disruption controller cannot compute this budget: %s", cond.Message)
		keep := max(s.idx.podsSelectedBy(e)-1, 0)
		b.Fix = fmt.Sprintf(`kubectl patch pdb %s -n %s --type merge -p '{"spec":{"maxUnavailable":null,"minAvailable":%d}}'`, pdb.Name, ns, keep)
		b.FixWarning = "an integer minAvailable needs no /scale subresource; alternatively give the owning resource a scale subresource"
	case st.ExpectedPods > 0 && st.DesiredHealthy >= st.ExpectedPods:
		if mu := pdb.Spec.MaxUnavailable; mu != nil && isZero(*mu) {
			b.Kind, b.Outcome = BlockerMaxUnavailableZero, OutcomeNever
			b.Message = fmt.Sprintf("maxUnavailable is %s, so no pod may ever be evicted", mu.String())
			b.Fix = fmt.Sprintf(`kubectl patch pdb %s -n %s --type merge -p '{"spec":{"maxUnavailable":1}}'`, pdb.Name, ns)
		} else {
			b.Kind, b.Outcome = BlockerMinAvailableAll, OutcomeNever
			ma := "minAvailable"
			if pdb.Spec.MinAvailable != nil {
				ma = "minAvailable " + pdb.Spec.MinAvailable.String()
			}
			b.Message = fmt.Sprintf("%s asks for all %s the budget expects (desiredHealthy %d), so no pod may ever be evicted", ma, cli.Plural(int(st.ExpectedPods), "pod"), st.DesiredHealthy)
			if owner.scalable() {
				b.Fix = fmt.Sprintf("kubectl scale %s/%s -n %s --replicas=%d", strings.ToLower(owner.Kind), owner.Name, ns, st.ExpectedPods+1)
				b.FixWarning = "or lower minAvailable: " + fmt.Sprintf(`kubectl patch pdb %s -n %s --type merge -p '{"spec":{"minAvailable":%d}}'`, pdb.Name, ns, max(st.ExpectedPods-1, 0))
			} else {
				b.Fix = fmt.Sprintf(`kubectl patch pdb %s -n %s --type merge -p '{"spec":{"minAvailable":%d}}'`, pdb.Name, ns, max(st.ExpectedPods-1, 0))
			}
		}
	case spent > 0:
		b.Kind, b.Outcome = BlockerBudgetSpent, OutcomeLater
		b.Message = fmt.Sprintf("this drain already evicted %s under the budget, which allowed %d; it waits for their replacements to become Ready", cli.Plural(int(spent), "pod"), st.DisruptionsAllowed)
		b.Fix = fmt.Sprintf("kubectl get pdb %s -n %s -w", pdb.Name, ns)
	default:
		b.Kind, b.Outcome = BlockerBudgetExhausted, OutcomeLater
		missing := st.DesiredHealthy - st.CurrentHealthy + 1
		b.Message = fmt.Sprintf("needs %d healthy pods and has %d; waits for %s to be Ready", st.DesiredHealthy, st.CurrentHealthy, cli.Plural(int(max(missing, 1)), "more selected pod"))
		b.Fix = fmt.Sprintf("kubectl get pods -n %s -l %s", ns, selectorString(pdb))
	}
	if !podReady(pod) && b.Outcome != OutcomeNever && (pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow) {
		b.Kind = BlockerUnhealthyPod
		b.Message = "the pod is not Ready and unhealthyPodEvictionPolicy IfHealthyBudget guards it while the budget is short: " + b.Message
		b.Fix = fmt.Sprintf(`kubectl patch pdb %s -n %s --type merge -p '{"spec":{"unhealthyPodEvictionPolicy":"AlwaysAllow"}}'`, pdb.Name, ns)
		b.FixWarning = ""
	}
	if e.empty {
		b.Message += "; the PDB has an empty selector and covers every pod in the namespace"
	}
	return b
}

func syncFailed(pdb *policyv1.PodDisruptionBudget) bool {
	c := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == policyv1.SyncFailedReason
}

func multiplePDBBlocker(pod *corev1.Pod, entries []*pdbEntry) Blocker {
	names := make([]string, 0, len(entries))
	var empty []string
	for _, e := range entries {
		names = append(names, e.pdb.Name)
		if e.empty {
			empty = append(empty, e.pdb.Name)
		}
	}
	b := Blocker{Kind: BlockerMultiplePDBs, Outcome: OutcomeNever, PDB: strings.Join(names, ","),
		Message: fmt.Sprintf("%s the pod (%s); the eviction API refuses such pods", cli.Plural(len(names), "PodDisruptionBudget")+cli.Agree(len(names), " selects", " select"), strings.Join(names, ", "))}
	drop := names[1:]
	if len(empty) > 0 {
		b.Kind = BlockerEmptySelector
		b.Message += fmt.Sprintf("; %s has an empty selector and covers every pod in the namespace", strings.Join(empty, ", "))
		drop = empty
	}
	b.Fix = fmt.Sprintf("kubectl delete pdb %s -n %s", strings.Join(drop, " "), pod.Namespace)
	b.FixWarning = "keep exactly one PDB per workload; narrow a selector instead of deleting if the PDB guards other pods"
	return b
}

// podBlockers returns what holds the pod up besides the eviction API.
func (s *Simulation) podBlockers(pod *corev1.Pod, node *corev1.Node) []Blocker {
	var out []Blocker
	ns, name := pod.Namespace, pod.Name
	if finished(pod) {
		return nil
	}
	if pod.Annotations[DoNotDisruptAnnotation] == "true" {
		out = append(out, Blocker{Kind: BlockerDoNotDisrupt, Outcome: OutcomeNever,
			Message:    "pod has karpenter.sh/do-not-disrupt=true: Karpenter will not voluntarily disrupt its node (kubectl drain ignores the annotation)",
			Fix:        fmt.Sprintf("kubectl annotate pod %s -n %s %s-", name, ns, DoNotDisruptAnnotation),
			FixWarning: "the annotation usually protects a job that cannot be interrupted; remove it only once the job can checkpoint or end"})
	}
	if node != nil && node.Annotations[DoNotDisruptAnnotation] == "true" {
		out = append(out, Blocker{Kind: BlockerDoNotDisrupt, Outcome: OutcomeNever,
			Message: fmt.Sprintf("node %s has karpenter.sh/do-not-disrupt=true: Karpenter will not voluntarily disrupt it", node.Name),
			Fix:     fmt.Sprintf("kubectl annotate node %s %s-", node.Name, DoNotDisruptAnnotation)})
	}
	if isMirror(pod) || isDaemonSetPod(pod) {
		return out
	}
	if metav1.GetControllerOf(pod) == nil {
		b := Blocker{Kind: BlockerNoController, Outcome: OutcomeNever,
			Message:    "pod has no controller: kubectl drain refuses it without --force, and nothing recreates it",
			Fix:        fmt.Sprintf("kubectl drain %s --ignore-daemonsets --force", pod.Spec.NodeName),
			FixWarning: "the pod is deleted for good"}
		if s.eval.Force {
			b.Outcome = OutcomeNow
			b.Message = "pod has no controller: --force evicts it and nothing recreates it"
			b.Fix = ""
		}
		out = append(out, b)
	}
	if hasEmptyDir(pod) {
		b := Blocker{Kind: BlockerEmptyDir, Outcome: OutcomeNever,
			Message:    "pod has emptyDir data: kubectl drain refuses it without --delete-emptydir-data",
			Fix:        fmt.Sprintf("kubectl drain %s --ignore-daemonsets --delete-emptydir-data", pod.Spec.NodeName),
			FixWarning: "the emptyDir data is lost"}
		if s.eval.DeleteEmptyDirData {
			b.Outcome = OutcomeNow
			b.Message = "pod has emptyDir data; --delete-emptydir-data evicts it and the data is lost"
			b.Fix = ""
		}
		out = append(out, b)
	}
	if dt := pod.DeletionTimestamp; dt != nil {
		if len(pod.Finalizers) > 0 && !s.eval.Now.Before(dt.Time) {
			out = append(out, Blocker{Kind: BlockerFinalizers, Outcome: OutcomeNever,
				Message: fmt.Sprintf("terminating since %s, grace period over, held by finalizers %s",
					dt.Time.UTC().Format(time.RFC3339), strings.Join(pod.Finalizers, ", ")),
				Fix:        fmt.Sprintf(`kubectl patch pod %s -n %s --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`, name, ns),
				FixWarning: "first find out why the finalizer's controller did not remove it; removing it skips that cleanup"})
		} else {
			b := Blocker{Kind: BlockerTerminating, Outcome: OutcomeLater,
				Message: fmt.Sprintf("terminating; its grace period ends at %s", dt.Time.UTC().Format(time.RFC3339))}
			if len(pod.Finalizers) > 0 {
				b.Message += fmt.Sprintf(", then finalizers %s must be removed", strings.Join(pod.Finalizers, ", "))
			}
			out = append(out, b)
		}
	} else if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second > s.eval.DrainTimeout {
		out = append(out, Blocker{Kind: BlockerGracePeriod, Outcome: OutcomeNever,
			Message: fmt.Sprintf("terminationGracePeriodSeconds %ds is longer than the drain timeout %s: the drain gives up before the pod exits",
				*g, s.eval.DrainTimeout),
			Fix:        fmt.Sprintf("kubectl drain %s --ignore-daemonsets --timeout=%ds", pod.Spec.NodeName, *g+60),
			FixWarning: "managed upgrades have their own limit; a shorter --grace-period cuts the pod's shutdown (and checkpoint) short"})
	}
	return out
}

// BreakGlass returns the command that removes a pod regardless of its
// PodDisruptionBudget, and the warning that must go with it.
func BreakGlass(namespace, name string) (cmd, warning string) {
	return fmt.Sprintf("kubectl delete pod %s -n %s", name, namespace),
		"break-glass: deletes the pod without the eviction API and ignores its PodDisruptionBudget"
}

type workload struct {
	Kind, Name string
}

func (w workload) scalable() bool {
	switch w.Kind {
	case "Deployment", "StatefulSet", "ReplicaSet", "ReplicationController":
		return true
	}
	return false
}

// workloadOf names the object to scale for pod: the Deployment behind a
// ReplicaSet (from the pod-template-hash naming), or the controller itself.
func workloadOf(pod *corev1.Pod) workload {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return workload{}
	}
	if ref.Kind == "ReplicaSet" {
		if h := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			return workload{Kind: "Deployment", Name: strings.TrimSuffix(ref.Name, "-"+h)}
		}
	}
	return workload{Kind: ref.Kind, Name: ref.Name}
}

func selectorString(pdb *policyv1.PodDisruptionBudget) string {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		return "''"
	}
	return "'" + sel.String() + "'"
}

func isZero(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	s := strings.TrimSpace(v.StrVal)
	return s == "0%" || s == "0"
}

func canIgnorePDB(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.Status.Phase == corev1.PodPending || pod.DeletionTimestamp != nil
}

func ignoreReason(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "pod is terminating; the PDB is not consulted"
	}
	return fmt.Sprintf("pod is %s; the PDB is not consulted", pod.Status.Phase)
}

func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func isMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String()
}

func hasEmptyDir(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// CordonedSince says whether node is cordoned and, when the managed fields
// record it, since when: the time of the last write that owns
// spec.unschedulable.
func CordonedSince(node *corev1.Node) (since time.Time, cordoned bool) {
	if node == nil || !node.Spec.Unschedulable {
		return time.Time{}, false
	}
	for _, mf := range node.ManagedFields {
		if mf.FieldsV1 == nil || mf.Time == nil {
			continue
		}
		if strings.Contains(string(mf.FieldsV1.Raw), `"f:unschedulable"`) && mf.Time.After(since) {
			since = mf.Time.Time
		}
	}
	return since, true
}
