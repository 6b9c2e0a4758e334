package fleetrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// The version x health quadrant of a control-plane or pool-upgrade step,
// read before anything is issued and again after: at the target and
// healthy, the step is done; on the old version and healthy, it runs
// (again); unhealthy on either version, it stops for a person, unless an
// upgrade this step issued may still be rolling (within the step kind's
// expected duration of its first attempt), when it is not yet. Health is
// the pool's nodes all Ready for a pool, and the fleet file's
// nodes-not-ready halt check for a control plane (the apiserver answering
// the version read when the file has none).
const (
	QuadrantDone      = "at target, healthy: proceed"
	QuadrantRunAgain  = "old version, healthy: run again"
	quadrantUnhealthy = "unhealthy"
)

// health says whether the step's part of the cluster is healthy, and why.
func (r *stepRun) health(ctx context.Context) (bool, string, error) {
	switch r.step.Kind {
	case StepPoolUpgrade:
		sc, err := r.scanPool(ctx)
		if err != nil {
			return false, "", err
		}
		if sc.NotReady > 0 {
			return false, fmt.Sprintf("%d of %d nodes of pool %s are not Ready", sc.NotReady, sc.Total, r.step.Pool), nil
		}
		return true, fmt.Sprintf("%s of pool %s %s Ready", allNodes(sc.Total), r.step.Pool, cli.Agree(sc.Total, "is", "are")), nil
	case StepControlPlane:
		kc, err := r.target.Getter.Kube()
		if err != nil {
			return false, "", err
		}
		cs := haltChecks(ctx, kc, r.p.Plan.Spec.HaltOn, r.cp.Name, 0, r.p.rateWindow(), map[string]bool{"nodes-not-ready": true}, nil)
		if len(cs) == 0 {
			return true, "the apiserver answers (spec.haltOn has no nodes-not-ready check)", nil
		}
		c := cs[0]
		switch c.Result {
		case CheckFail:
			return false, "nodes-not-ready: " + c.Message, nil
		case CheckUnknown:
			return false, "", fmt.Errorf("nodes-not-ready: %s", c.Message)
		}
		return true, "nodes-not-ready: " + c.Message, nil
	}
	return true, "", nil
}

// unhealthy is the outcome of an unhealthy step: not yet while an upgrade
// it issued may still be rolling, else a stop for a person. at says
// whether the version is the target's; acting whether this attempt has
// issued the upgrade.
func (r *stepRun) unhealthy(at bool, version, health string, acting bool) stepOutcome {
	q := "old version, " + quadrantUnhealthy
	if at {
		q = "at target, " + quadrantUnhealthy
	}
	first := r.p.now()
	if len(r.ss.History) > 0 {
		first = r.ss.History[0].StartedAt
	} else if r.ss.StartedAt != nil {
		first = *r.ss.StartedAt
	}
	acting = acting || r.ss.Issued != nil || len(r.ss.History) > 0
	d := r.p.expected(r.step)
	if until := first.Add(d); acting && r.p.now().Before(until) {
		return stepOutcome{code: cli.ExitIncomplete, message: fmt.Sprintf("%s; %s (quadrant %s: the upgrade may still be rolling until %s, %s after the step's first attempt; not yet)",
			version, health, q, until.UTC().Format(time.RFC3339), d)}
	}
	why := fmt.Sprintf("still unhealthy %s after the step's first attempt at %s", d, first.UTC().Format(time.RFC3339))
	if !acting {
		why = "nothing issued: no upgrade goes onto an unhealthy cluster"
	}
	return stepOutcome{code: cli.ExitFindings, message: fmt.Sprintf("%s; %s (quadrant %s: stop for a person, %s)", version, health, q, why)}
}

// quadrantNote is the quadrant of a healthy step, for its message.
func quadrantNote(at bool, health string) string {
	q := QuadrantRunAgain
	if at {
		q = QuadrantDone
	}
	return strings.TrimPrefix(health+" (quadrant "+q+")", " ")
}

// allNodes is "all 3 nodes", or "the 1 node" for one.
func allNodes(n int) string {
	if n == 1 {
		return "the 1 node"
	}
	return "all " + cli.Plural(n, "node")
}
