package gang

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// connRefused is what client-go returns while kube-apiserver is down.
func connRefused() error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/train",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// failGets makes the first n gets of the JobSet fail with err once the
// checkpoint request is on it (the run is waiting for the answer). With
// answer set, the gang answers ready-to-stop after the failures, as a
// responder that kept working while the run could not read does.
func failGets(c *cluster, n int32, err error, answer bool) *atomic.Int32 {
	var failed atomic.Int32
	keys := checkpoint.DefaultKeys()
	c.dyn.PrependReactor("get", "jobsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		// The tracker, not the client: the fake holds its lock while
		// reactors run.
		o, gerr := c.dyn.Tracker().Get(jobsetGVR, a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		if gerr != nil {
			return false, nil, nil
		}
		u := o.(*unstructured.Unstructured)
		ann := u.GetAnnotations()
		req, ok := keys.ParseRequest(ann)
		switch {
		case !ok || !req.Active():
			return false, nil, nil
		case failed.Load() < n:
			failed.Add(1)
			return true, nil, err
		case answer && ann[keys.Status()] == "":
			now := time.Now()
			for k, v := range keys.ResponsePatch(checkpoint.Response{ObservedRequestID: req.ID, Status: checkpoint.StatusReadyToStop,
				Step: "7", HeartbeatAt: now, CompletedAt: now}) {
				if v != nil {
					ann[k] = v.(string)
				}
			}
			u.SetAnnotations(ann)
			if uerr := c.dyn.Tracker().Update(jobsetGVR, u, a.GetNamespace()); uerr != nil {
				return true, nil, uerr
			}
		}
		return false, nil, nil
	})
	return &failed
}

func TestRunRetriesTransientErrorsWhileWaiting(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	failed := failGets(c, 4, connRefused(), true)
	// The node's pod list fails once too.
	var listFailed atomic.Bool
	c.kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if listFailed.CompareAndSwap(false, true) {
			return true, nil, apierrors.NewServiceUnavailable("the apiserver is shutting down")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := &events{}
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutAbort}, ev).Run(ctx, []string{"n2"})
	if err != nil {
		t.Fatalf("run: %v\nevents: %v", err, ev.lines)
	}
	if !res.Complete || len(res.Gangs) != 1 || res.Gangs[0].Action != ActionStopped || res.Gangs[0].Verdict.Phase != checkpoint.PhaseReady {
		t.Fatalf("result %+v", res)
	}
	if failed.Load() != 4 || !listFailed.Load() {
		t.Fatalf("injected %d get failures, list failed %v", failed.Load(), listFailed.Load())
	}
	if !ev.has("connection refused; retrying in") || !ev.has("shutting down; retrying in") {
		t.Errorf("no retry reported: %v", ev.lines)
	}
	if ann, _ := nodeAnn(t, c, "n2"); ann[AnnState] != string(NodeDrained) {
		t.Errorf("node n2: %v", ann)
	}
}

func TestRunKeepsRefusalsFinal(t *testing.T) {
	c := newCluster(t, false)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "train", errors.New("RBAC"))
	failed := failGets(c, 1000, forbidden, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := &events{}
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutAbort}, ev).Run(ctx, []string{"n2"})
	if !errors.Is(err, ErrIncomplete) || !apierrors.IsForbidden(err) {
		t.Fatalf("want an incomplete run that unwraps to Forbidden, got %v", err)
	}
	if failed.Load() != 1 || ev.has("retrying") || res.Gangs[0].Action != ActionFailed {
		t.Errorf("a refusal was retried: %d tries, gangs %+v, events %v", failed.Load(), res.Gangs, ev.lines)
	}
}

func TestRetryEndsWithTheRun(t *testing.T) {
	c := newCluster(t, false)
	failGets(c, 1<<30, connRefused(), false)
	// The run ends when its context does, once it is retrying: the
	// context is cancelled when the first retry is reported (or after 30 s,
	// which fails the test), not at a fixed time a loaded machine may not
	// reach the retry by.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &events{}
	var cancelled atomic.Int64
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for !ev.has("retrying") && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		cancelled.Store(time.Now().UnixNano())
		cancel()
	}()
	_, err := newDrainer(c, Options{OnTimeout: OnTimeoutAbort}, ev).Run(ctx, []string{"n2"})
	after := time.Since(time.Unix(0, cancelled.Load()))
	if !errors.Is(err, ErrIncomplete) || cancelled.Load() == 0 || after > 10*time.Second {
		t.Fatalf("want an incomplete run when its context ends, got %v %s after the cancel", err, after)
	}
	if !ev.has("retrying") {
		t.Errorf("events %v", ev.lines)
	}
}

// failFirst makes the first call of each verb on each resource fail with
// err, and counts the failures.
func failFirst(f interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
}, err error, failed *atomic.Int32) {
	var mu sync.Mutex
	seen := map[string]bool{}
	f.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		k := a.GetVerb() + " " + a.GetResource().Resource
		mu.Lock()
		defer mu.Unlock()
		if seen[k] {
			return false, nil, nil
		}
		seen[k] = true
		failed.Add(1)
		return true, nil, err
	})
}

// TestRestoreRetriesTransientErrors: every read and write of a restore
// that got no answer is tried again, so an apiserver restart in the middle
// of a restore does not stop it.
func TestRestoreRetriesTransientErrors(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	failGets(c, 0, nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := newDrainer(c, Options{OnTimeout: OnTimeoutAbort}, &events{}).Run(ctx, []string{"n2"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %v %+v", err, res)
	}
	var failed atomic.Int32
	failFirst(c.kube, connRefused(), &failed)
	failFirst(c.dyn, connRefused(), &failed)
	ev := &events{}
	_, err = newDrainer(c, Options{RestoreTimeout: 50 * time.Millisecond}, ev).Restore(ctx, []string{"n2"})
	// No scheduler runs, so the gang's pods never become Ready: the
	// restore ends waiting for readmission, after every change was made.
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "not readmitted") {
		t.Fatalf("restore: want it to end waiting for readmission, got %v\nevents %v", err, ev.lines)
	}
	if ann, cordoned := nodeAnn(t, c, "n2"); cordoned || ann[AnnState] != string(NodeRestoring) {
		t.Errorf("node n2 after restore: cordoned %v, annotations %v", cordoned, ann)
	}
	js, err := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); s || js.GetAnnotations()[AnnRestoredBy] != res.RunID {
		t.Errorf("jobset after restore: suspend %v, annotations %v", s, js.GetAnnotations())
	}
	// Node get and patch, node and pod lists, JobSet get and patch.
	if failed.Load() < 6 || !ev.has("connection refused; retrying in") {
		t.Errorf("%d failures injected; events %v", failed.Load(), ev.lines)
	}
}
