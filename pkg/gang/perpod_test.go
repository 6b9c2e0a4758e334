package gang

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// podCalls counts the requests for single pods among the fake's actions,
// by verb (evictions apart).
func podCalls(c *cluster) map[string][]string {
	out := map[string][]string{}
	for _, a := range c.kube.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		verb := a.GetVerb()
		if a.GetSubresource() != "" {
			verb += " " + a.GetSubresource()
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.GetAction:
			name = a.GetName()
		case clienttesting.PatchAction:
			name = a.GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		case clienttesting.CreateAction:
			if o, ok := a.GetObject().(metav1.Object); ok {
				name = o.GetName()
			}
		}
		out[verb] = append(out[verb], name)
	}
	return out
}

func respondReady(ctx context.Context, c *cluster) {
	rs := &checkpoint.Responder{Client: c.dyn, Target: checkpoint.Target{Resource: jobsetGVR, Namespace: "ml", Name: "train"}, Keys: checkpoint.DefaultKeys(),
		PollInterval: 5 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
		Checkpoint: func(context.Context, checkpoint.Request) (checkpoint.Result, error) {
			return checkpoint.Result{Step: "100"}, nil
		}}
	go func() { _ = rs.Run(ctx) }()
}

func setJobSetAnnotation(t *testing.T, c *cluster, k, v string) {
	t.Helper()
	ctx := context.Background()
	u, err := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{k: v})
	if _, err := c.dyn.Resource(jobsetGVR).Namespace("ml").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A drain sends no request for a single pod beyond the evictions: the
// request lives on the gang's root object (not mirrored onto its ranks),
// and the wait for evicted pods lists the node instead of reading each pod.
func TestRunSendsNoRequestPerPod(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	respondReady(ctx, c)
	// The pod group does not speak the protocol: --on-timeout=stop stops it.
	pg, _ := c.kube.CoreV1().Pods("ml").Get(ctx, "pg-0", metav1.GetOptions{})
	pg.Labels[checkpoint.DefaultKeys().Protocol()] = "none"
	if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kube.ClearActions()
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Timeouts: checkpoint.Timeouts{Ack: 5 * time.Second}}, &events{}).Run(ctx, []string{"n1"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %v %+v", err, res)
	}
	calls := podCalls(c)
	if len(calls["get"])+len(calls["patch"])+len(calls["update"]) != 0 {
		t.Errorf("requests for single pods: %v", calls)
	}
	if got := calls["create eviction"]; len(got) != 1 || got[0] != "api-abc" {
		t.Errorf("evictions %v, want api-abc once", got)
	}
}

// A gang that asks with the mirror key gets the request on every rank.
func TestRequestMirroredOntoPodsWhenAsked(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	keys := checkpoint.DefaultKeys()
	setJobSetAnnotation(t, c, keys.MirrorToPods(), "true")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	respondReady(ctx, c)
	c.kube.ClearActions()
	var mirrored []string
	c.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if strings.Contains(string(pa.GetPatch()), keys.Request) {
			mirrored = append(mirrored, pa.GetName())
		}
		return false, nil, nil
	})
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Timeouts: checkpoint.Timeouts{Ack: 5 * time.Second}}, &events{}).Run(ctx, []string{"n2"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %v %+v", err, res)
	}
	if strings.Join(mirrored, ",") != "train-0,train-1,train-2" {
		t.Errorf("request mirrored onto %v, want every rank", mirrored)
	}
}

// An evicted pod that does not go away: the wait lists the node each poll
// and gives up at --eviction-timeout.
func TestWaitEvictedListsTheNodeUntilTheTimeout(t *testing.T) {
	c := newCluster(t, false)
	c.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, nil // accepted, but the pod stays
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.kube.ClearActions()
	// Every pod of n1 but the DaemonSet's is evicted (no gangs found).
	d := newDrainer(c, Options{EvictionTimeout: 50 * time.Millisecond, Force: true}, &events{})
	d.records = map[string]*NodeRecord{"n1": {Node: "n1"}}
	err := d.drainNode(ctx, "n1", &Discovery{})
	if err == nil || !errors.Is(err, eviction.ErrDeadline) || !strings.Contains(err.Error(), "web/api-abc") {
		t.Fatalf("want a deadline error naming web/api-abc, got %v", err)
	}
	calls := podCalls(c)
	if len(calls["get"]) != 0 || len(calls["list"]) < 2 {
		t.Errorf("pod requests %v: want lists of the node, no get", calls)
	}
}
