package gang

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// count counts the recorded actions of one verb on one resource.
func count(actions []clienttesting.Action, verb, resource string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// A trainer that answers after 300 ms is heard through a watch of the
// JobSet: at a 5 ms poll interval, reading it each interval would take
// about 60 GETs.
func TestCheckpointAnswerArrivesByWatch(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := checkpoint.DefaultKeys()
	// The trainer reads and writes through the tracker, which records no
	// actions: every counted action is the drain's.
	go func() {
		tr := c.dyn.Tracker()
		for ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			o, err := tr.Get(jobsetGVR, "ml", "train")
			if err != nil {
				continue
			}
			u := o.(*unstructured.Unstructured)
			req, ok := keys.ParseRequest(u.GetAnnotations())
			if !ok || !req.Active() {
				continue
			}
			time.Sleep(300 * time.Millisecond)
			ann := u.GetAnnotations()
			for k, v := range keys.ResponsePatch(checkpoint.Response{ObservedRequestID: req.ID, Status: checkpoint.StatusReadyToStop,
				Step: "7", CompletedAt: time.Now()}) {
				if v == nil {
					delete(ann, k)
				} else {
					ann[k] = v.(string)
				}
			}
			u.SetAnnotations(ann)
			if err := tr.Update(jobsetGVR, u, "ml"); err != nil {
				t.Errorf("answering: %v", err)
			}
			return
		}
	}()
	pg, _ := c.kube.CoreV1().Pods("ml").Get(ctx, "pg-0", metav1.GetOptions{})
	pg.Labels[keys.Protocol()] = "none"
	if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Timeouts: checkpoint.Timeouts{Ack: 10 * time.Second}}, ev)
	res, err := d.Run(ctx, []string{"n1"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %+v %v\nevents: %v", res, err, ev.lines)
	}
	if !ev.has("checkpoint ready-to-stop (step 7)") {
		t.Errorf("the answer was not seen: %v", ev.lines)
	}
	acts := c.dyn.Actions()
	if count(acts, "watch", "jobsets") == 0 {
		t.Error("the JobSet was never watched")
	}
	// The request, the first read, a resync every 30 intervals (150 ms)
	// and the stop's own reads.
	if n := count(acts, "get", "jobsets"); n > 12 {
		t.Errorf("%d GETs of the JobSet while waiting 300 ms for the answer: it was polled, not watched", n)
	}
}

func podGroupGang(c *cluster, t *testing.T) *Gang {
	t.Helper()
	g := &Gang{Key: "ml/PodGroup/pg", Kind: "PodGroup", Namespace: "ml", Name: "pg", Method: StopDeletePods}
	for _, n := range []string{"pg-0", "pg-1"} {
		p, err := c.kube.CoreV1().Pods("ml").Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g.Pods = append(g.Pods, Pod{Name: p.Name, UID: p.UID})
	}
	return g
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// A stopping gang whose pods go after 300 ms is followed by a watch of its
// namespace, not by a list of the namespace each interval; where the role
// cannot watch, the drain reads each interval and says so once.
func TestWaitGoneWatchesPods(t *testing.T) {
	for _, forbid := range []bool{false, true} {
		c := newCluster(t, false)
		if forbid {
			c.kube.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
				return true, nil, apierrors.NewForbidden(podsGVR.GroupResource(), "", errors.New("no watch in the role"))
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ev := &events{}
		d := newDrainer(c, Options{StopTimeout: 5 * time.Second}, ev)
		g := podGroupGang(c, t)
		go func() {
			// The pods go after 300 ms; where the drain cannot watch, only
			// once it has listed 20 times, so that a loaded machine's
			// slower polls still show a list each interval.
			time.Sleep(300 * time.Millisecond)
			for deadline := time.Now().Add(4 * time.Second); forbid && count(c.kube.Actions(), "list", "pods") < 20 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			for _, p := range g.Pods {
				_ = c.kube.Tracker().Delete(podsGVR, "ml", p.Name)
			}
		}()
		if _, _, err := d.waitGone(ctx, g); err != nil {
			t.Fatalf("forbid=%v: %v", forbid, err)
		}
		cancel()
		lists := count(c.kube.Actions(), "list", "pods")
		warned := ev.has("cannot watch pods in namespace ml")
		if forbid {
			if !warned || lists < 20 {
				t.Errorf("without watch: %d lists, warned %v: want a list each interval and a warning", lists, warned)
			}
			continue
		}
		if warned || count(c.kube.Actions(), "watch", "pods") == 0 {
			t.Errorf("the pods were not watched: %v", ev.lines)
		}
		if lists > 5 {
			t.Errorf("%d lists of the namespace while its pods took 300 ms to go: polled, not watched", lists)
		}
	}
}

// A provider replaced the drained node, and with it the run's record of its
// gangs: restore of the run finds the JobSet by the stop record on it.
func TestRestoreFindsGangsOfReplacedNodes(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	c.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "jobset.x-k8s.io/v1alpha2", APIResources: []metav1.APIResource{{Name: "jobsets", Namespaced: true, Kind: "JobSet"}}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{{Name: "jobs", Namespaced: true, Kind: "Job"}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := checkpoint.DefaultKeys()
	pg, _ := c.kube.CoreV1().Pods("ml").Get(ctx, "pg-0", metav1.GetOptions{})
	pg.Labels[keys.Protocol()] = "none"
	if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Timeouts: checkpoint.Timeouts{Ack: 20 * time.Millisecond}}, ev).Run(ctx, []string{"n1"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %+v %v\n%v", res, err, ev.lines)
	}
	if err := c.kube.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rd := newDrainer(c, Options{RunID: res.RunID, RestoreTimeout: 50 * time.Millisecond}, ev)
	rres, err := rd.Restore(ctx, nil)
	if err != nil && !errors.Is(err, ErrIncomplete) {
		t.Fatalf("restore: %v", err)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); s {
		t.Errorf("the JobSet of the replaced node is still suspended: %+v\n%v", rres, ev.lines)
	}
	if a := js.GetAnnotations(); a[AnnGangRecord] != "" || a[AnnRestoredBy] != res.RunID {
		t.Errorf("stop record left behind: %v", a)
	}
	// Without a run, there is nothing to restore.
	if _, err := newDrainer(c, Options{}, ev).Restore(ctx, nil); err == nil {
		t.Error("restore of nothing: want an error")
	}
}
