//go:build e2e

package gangdraine2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// TestGangDrainStopsNonKueueGangsAsUnits drains 2 of 3 nodes under a
// JobSet without Kueue and a bare pod group, both with a rank on the third
// node and labelled as not speaking the protocol: with --on-timeout=stop the
// JobSet is suspended and the pod group deleted together, ranks on the
// third node included. restore unsuspends the JobSet.
func TestGangDrainStopsNonKueueGangsAsUnits(t *testing.T) {
	e := newEnv(t, 3, 5*time.Minute)
	e.jobSet("trainer", "", 3, 6, "none") // 6 GPUs per rank: one rank per node
	jsSel := selJobSet("trainer")
	e.waitReady(jsSel, 3)
	for i, n := range e.nodes {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("pg-%d", i), Labels: map[string]string{
				gang.LabelSchedulerPodGrp: "pg", checkpoint.DefaultKeys().Protocol(): "none", "app": "pg"}},
			Spec: harness.PodSpec(2),
		}
		p.Spec.NodeName = n
		if _, err := e.cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitReady("app=pg", 3)
	drained := e.nodes[:2]

	r := e.run(append([]string{"run", "--dry-run", "--on-timeout=stop"}, drained...)...)
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "Dry run") || e.node(drained[0]).Spec.Unschedulable {
		t.Fatalf("dry run: %s", r)
	}
	wantIn(t, r.Stdout, "spec.suspend=true", "delete its 3 pods together (1 on other nodes)")

	r = e.run(append([]string{"run", "-o", "json", "--on-timeout=stop", "--poll-interval=250ms"}, drained...)...)
	if r.ExitCode != 0 {
		t.Fatalf("run: %s", r)
	}
	rep := decode[gangdrain.RunReport](t, r)
	methods := map[string]gang.StopMethod{}
	for _, g := range rep.Gangs {
		if g.Action != gang.ActionStopped {
			t.Errorf("gang %s: %s %s", g.Key, g.Action, g.Message)
		}
		methods[g.Key] = g.Method
	}
	if methods[e.ns+"/JobSet/trainer"] != gang.StopSuspend || methods[e.ns+"/PodGroup/pg"] != gang.StopDeletePods {
		t.Errorf("methods %v", methods)
	}
	wantIn(t, r.Stderr, "does not speak the checkpoint-and-yield protocol", "stopping as a unit (suspend, 3 ranks, 18 GPUs)", "stopping as a unit (delete-pods, 3 ranks, 6 GPUs)")
	if !ptrTrue(e.jobSetObj("trainer").Spec.Suspend) {
		t.Error("JobSet not suspended")
	}
	e.waitGone(jsSel) // the rank on the third node too
	e.waitGone("app=pg")
	if e.node(e.nodes[2]).Spec.Unschedulable {
		t.Error("the third node was cordoned")
	}

	r = e.run(append([]string{"restore", "-o", "json", "--poll-interval=250ms", "--restore-timeout=2m"}, drained...)...)
	if r.ExitCode != 0 {
		e.dumpJobSet("trainer")
		t.Fatalf("restore: %s", r)
	}
	rr := decode[gangdrain.RestoreReport](t, r)
	actions := map[string]string{}
	for _, g := range rr.Gangs {
		actions[g.Key] = g.Action
	}
	if actions[e.ns+"/JobSet/trainer"] != gang.RestoreUnsuspended || actions[e.ns+"/PodGroup/pg"] != gang.RestoreNotPossible {
		t.Errorf("restore actions %v", actions)
	}
	e.waitReady(jsSel, 3)
}
