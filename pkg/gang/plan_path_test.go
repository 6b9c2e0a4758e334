package gang

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

func TestSavePath(t *testing.T) {
	pods := func(graces ...int64) *Gang {
		g := &Gang{}
		for _, s := range graces {
			g.Pods = append(g.Pods, Pod{GracePeriodSeconds: s})
		}
		return g
	}
	answered := checkpoint.Response{ObservedRequestID: "r1", Status: checkpoint.StatusReadyToStop}
	for _, tc := range []struct {
		name  string
		g     *Gang
		st    checkpoint.State
		want  SavePath
		grace int64
	}{
		{"labelled v1", pods(30, 30), checkpoint.State{Support: checkpoint.SupportYes}, PathProtocol, 30},
		{"unlabelled but answered before", pods(30), checkpoint.State{Support: checkpoint.SupportUnknown, Response: answered}, PathProtocol, 30},
		{"no responder, long grace everywhere", pods(600, 300), checkpoint.State{Support: checkpoint.SupportNo}, PathSIGTERM, 300},
		{"no responder, one pod with the default", pods(600, 30), checkpoint.State{Support: checkpoint.SupportNo}, PathNone, 30},
		{"unlabelled, never answered, default grace", pods(30), checkpoint.State{Support: checkpoint.SupportUnknown}, PathNone, 30},
		{"labelled none ignores old answers", pods(30), checkpoint.State{Support: checkpoint.SupportNo, Response: answered}, PathNone, 30},
		{"no pods", pods(), checkpoint.State{}, PathNone, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, grace := savePath(tc.g, tc.st)
			if got != tc.want || grace != tc.grace {
				t.Errorf("savePath = %s, %d; want %s, %d", got, grace, tc.want, tc.grace)
			}
		})
	}
}

// TestPlanSaysSavePath: the JobSet's pods ask for 300s to stop and it has
// no responder (SIGTERM path); the pod group does not speak the protocol
// and keeps the default grace period (work lost).
func TestPlanSaysSavePath(t *testing.T) {
	c := newCluster(t, true)
	ctx := context.Background()
	for _, name := range []string{"train-0", "train-1", "train-2"} {
		p, err := c.kube.CoreV1().Pods("ml").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		grace := int64(300)
		p.Spec.TerminationGracePeriodSeconds = &grace
		if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"pg-0", "pg-1"} {
		p, _ := c.kube.CoreV1().Pods("ml").Get(ctx, name, metav1.GetOptions{})
		p.Labels[checkpoint.DefaultKeys().Protocol()] = "none"
		if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutStop}, &events{})
	d.Kueue = c.kueue
	p, err := d.Plan(ctx, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range p.Gangs {
		got[g.Key] = PathWords(g.Path, g.GracePeriodSeconds)
	}
	want := map[string]string{
		"ml/JobSet/train": "SIGTERM to every rank at once, 300s to save",
		"ml/PodGroup/pg":  "none: work since the last checkpoint is lost",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: path %q, want %q", k, got[k], v)
		}
	}
	joined := strings.Join(p.Steps, "\n")
	for _, s := range []string{"if it does not now, save path SIGTERM to every rank at once, 300s to save", "does not speak checkpoint-and-yield: stop it anyway (work since its last checkpoint is lost) (save path: none"} {
		if !strings.Contains(joined, s) {
			t.Errorf("steps lack %q:\n%s", s, joined)
		}
	}
}
