package fleetrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// version is what a step moves to, as the action's templates and Cluster
// API want it: the target's full version on the step that reaches the
// target minor when the target names a patch, else vMAJOR.MINOR.
func (r *stepRun) version() string {
	t, err := pkgskew.ParseVersion(r.p.Plan.Target)
	if err == nil && t.MinorString() == r.step.Minor && strings.Count(strings.TrimPrefix(r.p.Plan.Target, "v"), ".") == 2 {
		return "v" + strings.TrimPrefix(r.p.Plan.Target, "v")
	}
	return "v" + r.step.Minor
}

// upgrade runs the cluster's upgrade action for an etcd snapshot, a
// control-plane hop or a pool, then checks the result: every apiserver on
// the hop's minor, every node of the pool on its new kubelet minor. A
// check that does not hold yet is "not yet" (exit 4): providers finish on
// their own time and the engine asks again.
//
// The desired state is checked before anything is issued: a step whose
// result is there already issues nothing (a re-run after success), and a
// provider command that an earlier attempt issued with success is not
// issued again while the step's expected duration since then has not
// passed (a re-run during an update in flight, which a provider would
// refuse: EKS answers ResourceInUseException).
func (r *stepRun) upgrade(ctx context.Context) stepOutcome {
	a, s := r.action, r.step
	switch {
	case s.Kind == StepHold:
		return r.hold(ctx)
	case s.Kind == StepEtcdSnapshot && a.ClusterAPI != nil && a.ClusterAPI.EtcdSnapshot == "":
		return r.manualGate(ctx, "KubeadmControlPlane takes no etcd backup (its API has no such field: kubernetes-sigs/cluster-api api module v1.14.0, controlplane/kubeadm/v1beta2): take one from a control-plane machine of the workload cluster and copy it off the machines Cluster API replaces (commands.sh of this attempt's evidence has the runbook's commands), or set spec.upgrade.actions[].clusterAPI.etcdSnapshot")
	case s.Kind == StepEtcdSnapshot && a.ClusterAPI != nil:
		return r.runTemplate(ctx, a.ClusterAPI.EtcdSnapshot, "")
	}
	var released string
	if s.Kind == StepPoolUpgrade {
		// The pool's hold goes once its drain is done, before anything
		// else, so that a pool already moved is released too.
		var err error
		switch {
		case a.ClusterAPI != nil:
			released, err = r.capiRelease(ctx, a.ClusterAPI)
		case a.Command != nil && a.Command.ReleaseRollouts != "" && slices.Contains(r.state.Holds, s.Pool):
			out := r.runTemplate(ctx, a.Command.ReleaseRollouts, s.Pool)
			if out.code != 0 {
				return out
			}
			r.mu.Lock()
			r.state.Holds = slices.DeleteFunc(r.state.Holds, func(p string) bool { return p == s.Pool })
			r.mu.Unlock()
			released = "hold released: " + out.message
		}
		if err != nil {
			return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
		}
	}
	if s.Kind == StepControlPlane || s.Kind == StepPoolUpgrade {
		chk, ok, err := r.check(ctx)
		if ee := (*errEmptyPool)(nil); errors.As(err, &ee) {
			return stepOutcome{code: cli.ExitFindings, message: ee.Error()}
		}
		if err != nil {
			return stepOutcome{code: cli.ExitUnavailable, message: "checking before issuing anything: " + err.Error()}
		}
		if ok && a.ClusterAPI != nil && s.Kind == StepControlPlane {
			// Cluster API's desired state is the Cluster's version too:
			// the holds and the version patch are what the step issues.
			_, u, err := r.capiCluster(ctx, a.ClusterAPI)
			if err != nil {
				return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
			}
			v, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "version")
			if got, err := pkgskew.ParseVersion(v); err != nil || pkgskew.MustParseVersion(s.Minor).MinorsAfter(got.MinorOnly()) > 0 {
				ok = false
			}
		}
		healthy, hmsg, err := r.health(ctx)
		if err != nil {
			return stepOutcome{code: cli.ExitUnavailable, message: "checking health before issuing anything: " + err.Error()}
		}
		if !healthy {
			out := r.unhealthy(ok, chk, hmsg, false)
			out.message = strings.TrimPrefix(released+"; "+out.message, "; ")
			return out
		}
		if ok {
			return stepOutcome{message: strings.TrimPrefix(released+"; already done, nothing issued: "+chk+"; "+quadrantNote(true, hmsg), "; ")}
		}
		if iss := r.ss.Issued; iss != nil {
			d := r.p.expected(s)
			if until := iss.Add(d); r.p.now().Before(until) {
				return stepOutcome{code: cli.ExitIncomplete, message: fmt.Sprintf("in flight: attempt %d issued the upgrade at %s and it may take until %s (expected %s); not issuing it again: %s",
					r.ss.IssuedAttempt, iss.Format(time.RFC3339), until.Format(time.RFC3339), d, chk)}
			}
		}
	}
	var out stepOutcome
	switch {
	case a.Manual != nil:
		ds, err := ReadDecisions(ctx, r.p.Store, r.p.Plan.Run)
		if err != nil {
			return stepOutcome{code: cli.ExitUnavailable, message: err.Error()}
		}
		d, ok := StepApproved(ds, r.cp.Name, s.Name)
		if !ok {
			msg := fmt.Sprintf("manual step: %s; when done, `kubectl skew fleet approve --run %s --cluster %s --step %s --reason ...`",
				s.Action, r.p.Plan.Run, r.cp.Name, s.Name)
			if a.Manual.Instructions != "" {
				msg = a.Manual.Instructions + " (" + msg + ")"
			}
			return stepOutcome{code: cli.ExitIncomplete, message: msg}
		}
		out.message = fmt.Sprintf("done by %s at %s", d.By, d.At.Format("2006-01-02T15:04:05Z"))
	case a.Command != nil:
		tmpl := map[string]string{StepEtcdSnapshot: a.Command.EtcdSnapshot, StepControlPlane: a.Command.ControlPlane, StepPoolUpgrade: a.Command.Pool}[s.Kind]
		if tmpl == "" {
			if s.Kind == StepEtcdSnapshot {
				return stepOutcome{code: cli.ExitFindings, message: "the upgrade action has no etcdSnapshot command, and the cluster's etcd is its own: add spec.upgrade.actions[].command.etcdSnapshot"}
			}
			return stepOutcome{code: cli.ExitFindings, message: fmt.Sprintf("the upgrade action has no %s command", map[string]string{StepControlPlane: "controlPlane", StepPoolUpgrade: "pool"}[s.Kind])}
		}
		argv, err := fleetfile.ExpandCommand(tmpl, fleetfile.CommandVars{Run: r.p.Plan.Run, Cluster: r.cp.Name, Context: r.target.Context, Kubeconfig: r.target.Kubeconfig,
			Step: s.Name, Version: r.version(), Minor: s.Minor, Pool: s.Pool, Selector: s.Selector})
		if err != nil {
			return stepOutcome{code: cli.ExitUsage, message: "the action's command: " + err.Error()}
		}
		var env []string
		if r.target.Kubeconfig != "" {
			env = append(env, "KUBECONFIG="+r.target.Kubeconfig)
		}
		out = r.command(ctx, argv, env...)
		if out.code != 0 {
			return out
		}
		r.issued()
		if released != "" {
			out.message = released + "; " + out.message
		}
	case a.ClusterAPI != nil:
		if s.Kind == StepControlPlane {
			if r.laterPoolUpgrade() {
				// The holds before the version moves, whether or not
				// the plan had a hold-rollouts step (idempotent).
				held, err := r.capiHoldAll(ctx, a.ClusterAPI)
				if err != nil {
					return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
				}
				out.message = held + "; "
			}
			if err := r.patchTopology(ctx, a.ClusterAPI); err != nil {
				return stepOutcome{code: cli.ExitCode(err), message: out.message + err.Error()}
			}
			out.message += "Cluster.spec.topology.version set to " + r.version()
		} else {
			// The topology controller rolls the released
			// MachineDeployment; the check below follows it.
			out.message = released
		}
	default:
		return stepOutcome{code: cli.ExitUsage, message: "no upgrade action selects cluster " + r.cp.Name}
	}
	chk, ok, err := r.check(ctx)
	if ee := (*errEmptyPool)(nil); errors.As(err, &ee) {
		return stepOutcome{code: cli.ExitFindings, message: strings.TrimPrefix(out.message+"; "+ee.Error(), "; "), report: out.report, stderr: out.stderr, argv: out.argv}
	}
	if err != nil {
		return stepOutcome{code: cli.ExitUnavailable, message: out.message + "; checking: " + err.Error(), report: out.report, stderr: out.stderr, argv: out.argv}
	}
	if s.Kind == StepControlPlane || s.Kind == StepPoolUpgrade {
		healthy, hmsg, err := r.health(ctx)
		if err != nil {
			return stepOutcome{code: cli.ExitUnavailable, message: out.message + "; checking health: " + err.Error(), report: out.report, stderr: out.stderr, argv: out.argv}
		}
		if !healthy {
			u := r.unhealthy(ok, chk, hmsg, true)
			out.code, out.message = u.code, strings.TrimPrefix(out.message+"; "+u.message, "; ")
			return out
		}
		chk += "; " + quadrantNote(ok, hmsg)
	}
	out.message = strings.TrimPrefix(out.message+"; "+chk, "; ")
	if !ok {
		out.code = cli.ExitIncomplete
	}
	return out
}

// runTemplate runs one of the action's command templates for the step
// (pool names the pool of a hold or release).
func (r *stepRun) runTemplate(ctx context.Context, tmpl, pool string) stepOutcome {
	s := r.step
	if pool == "" {
		pool = s.Pool
	}
	argv, err := fleetfile.ExpandCommand(tmpl, fleetfile.CommandVars{Run: r.p.Plan.Run, Cluster: r.cp.Name, Context: r.target.Context, Kubeconfig: r.target.Kubeconfig,
		Step: s.Name, Version: r.version(), Minor: s.Minor, Pool: pool, Selector: s.Selector})
	if err != nil {
		return stepOutcome{code: cli.ExitUsage, message: "the action's command: " + err.Error()}
	}
	var env []string
	if r.target.Kubeconfig != "" {
		env = append(env, "KUBECONFIG="+r.target.Kubeconfig)
	}
	return r.command(ctx, argv, env...)
}

// hold keeps the step's pools from rolling by themselves when the control
// plane moves: Cluster API's defer-upgrade on every MachineDeployment
// topology, a holdRollouts command per pool, or else a gate that waits for
// a person to make the hold the runbook shows: a hold the programme
// cannot make is never skipped.
func (r *stepRun) hold(ctx context.Context) stepOutcome {
	a, s := r.action, r.step
	switch {
	case a.ClusterAPI != nil:
		msg, err := r.capiHoldAll(ctx, a.ClusterAPI)
		if err != nil {
			return stepOutcome{code: cli.ExitCode(err), message: err.Error()}
		}
		return stepOutcome{message: msg}
	case a.Command != nil && a.Command.HoldRollouts != "":
		var msgs []string
		for _, pool := range s.Holds {
			out := r.runTemplate(ctx, a.Command.HoldRollouts, pool)
			if out.code != 0 {
				return out
			}
			r.mu.Lock()
			if !slices.Contains(r.state.Holds, pool) {
				r.state.Holds = append(r.state.Holds, pool)
			}
			r.mu.Unlock()
			msgs = append(msgs, "pool "+pool+": "+out.message)
		}
		return stepOutcome{message: "held " + strings.Join(msgs, "; ")}
	}
	return r.manualGate(ctx, fmt.Sprintf("%s (the upgrade action has no holdRollouts command; commands.sh of this attempt's evidence has the runbook's)", s.Action))
}

// issued records that this attempt's provider command succeeded, so a
// later attempt waits for it instead of issuing it again.
func (r *stepRun) issued() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.p.now()
	r.ss.Issued, r.ss.IssuedAttempt = &now, r.ss.Attempt
}

// check says whether the step's result is there.
func (r *stepRun) check(ctx context.Context) (string, bool, error) {
	s := r.step
	switch s.Kind {
	case StepControlPlane:
		d, err := r.target.Getter.Discovery()
		if err != nil {
			return "", false, err
		}
		v, err := d.ServerVersion()
		if err != nil {
			return "", false, err
		}
		got, err := pkgskew.ParseVersion(v.GitVersion)
		if err != nil {
			return "", false, fmt.Errorf("apiserver version %q: %w", v.GitVersion, err)
		}
		want := pkgskew.MustParseVersion(s.Minor)
		if want.MinorsAfter(got.MinorOnly()) > 0 {
			return fmt.Sprintf("the apiserver reports %s, not yet %s", v.GitVersion, s.Minor), false, nil
		}
		return "the apiserver reports " + v.GitVersion, true, nil
	case StepPoolUpgrade:
		sc, err := r.scanPool(ctx)
		if err != nil {
			return "", false, err
		}
		if sc.Total == 0 {
			return "", false, r.emptyPool()
		}
		if sc.Behind > 0 {
			return fmt.Sprintf("%d of %d nodes of pool %s are not on kubelet %s yet", sc.Behind, sc.Total, s.Pool, s.Minor), false, nil
		}
		return fmt.Sprintf("%s of pool %s %s kubelet %s", allNodes(sc.Total), s.Pool, cli.Agree(sc.Total, "reports", "report"), s.Minor), true, nil
	}
	return "", true, nil
}

// poolScan counts a pool's nodes as the step's selector finds them now.
type poolScan struct {
	// Total nodes; Behind those not on the step's kubelet minor yet;
	// NotReady those whose Ready condition is not True.
	Total, Behind, NotReady int
}

// scanPool lists the nodes the step's selector matches (paged).
func (r *stepRun) scanPool(ctx context.Context) (poolScan, error) {
	var sc poolScan
	kc, err := r.target.Getter.Kube()
	if err != nil {
		return sc, err
	}
	var want pkgskew.Version
	if r.step.Minor != "" {
		want = pkgskew.MustParseVersion(r.step.Minor)
	}
	pg := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return kc.CoreV1().Nodes().List(ctx, opts)
	})
	err = pg.EachListItem(ctx, metav1.ListOptions{LabelSelector: r.step.Selector}, func(o runtime.Object) error {
		n := o.(*corev1.Node)
		sc.Total++
		v, err := pkgskew.ParseVersion(n.Status.NodeInfo.KubeletVersion)
		if r.step.Minor != "" && (err != nil || want.MinorsAfter(v.MinorOnly()) > 0) {
			sc.Behind++
		}
		if !nodeReady(n) {
			sc.NotReady++
		}
		return nil
	})
	return sc, err
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// errEmptyPool is a pool step whose selector matches no node.
type errEmptyPool struct{ msg string }

func (e *errEmptyPool) Error() string { return e.msg }

func (r *stepRun) emptyPool() error {
	s := r.step
	planned := "the plan counted its nodes"
	if s.Nodes > 0 {
		planned = fmt.Sprintf("the plan counted %d", s.Nodes)
	}
	return &errEmptyPool{fmt.Sprintf("selector %s of pool %s matches no node (%s): a step over no node is not done; check the pool's label with kubectl get nodes -l %s, then re-plan the run (plan --run %s --replace)",
		s.Selector, s.Pool, planned, s.Selector, r.p.Plan.Run)}
}

// poolNotEmpty fails the step when its selector matches no node.
func (r *stepRun) poolNotEmpty(ctx context.Context) (stepOutcome, bool) {
	sc, err := r.scanPool(ctx)
	if err != nil {
		return stepOutcome{code: cli.ExitUnavailable, message: "listing the nodes of pool " + r.step.Pool + ": " + err.Error()}, false
	}
	if sc.Total == 0 {
		return stepOutcome{code: cli.ExitFindings, message: r.emptyPool().Error()}, false
	}
	return stepOutcome{}, true
}

// patchTopology sets Cluster.spec.topology.version on the management
// cluster (Cluster API's one-touch upgrade of a managed topology).
func (r *stepRun) patchTopology(ctx context.Context, a *fleetfile.ClusterAPIAction) error {
	dyn, err := r.p.Access.managementClient(ctx, a.ManagementContext)
	if err != nil {
		return err
	}
	name := a.ClusterName
	if name == "" {
		name = r.cp.Name
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"topology": map[string]any{"version": r.version()}}})
	var last error
	// v1beta2 is Cluster API's storage version since v1.11; v1beta1 is
	// still served.
	for _, v := range []string{"v1beta2", "v1beta1"} {
		gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: v, Resource: "clusters"}
		_, err := dyn.Resource(gvr).Namespace(a.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-skew-fleet"})
		if err == nil {
			return nil
		}
		last = err
	}
	return cli.ClusterErr(fmt.Errorf("patching Cluster %s/%s in context %s: %w", a.Namespace, name, a.ManagementContext, last))
}
