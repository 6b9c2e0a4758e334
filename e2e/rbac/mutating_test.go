//go:build e2e

package rbace2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// crdFixture is a two-version CRD whose objects were stored at v1 before
// storage moved to v2, so storedVersions lists both.
func crdFixture(t *testing.T, cp *harness.ControlPlane, group string, n int) (crdName, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crdName = "widgets." + group
	if err := cp.ApplyCRDs(ctx, harness.MultiVersionCRD(group, "Widget", "widgets", []string{"v1", "v2"}, "v1")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crdName, metav1.DeleteOptions{})
		_ = cp.Client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), crdmigrate.CheckpointName(crdName), metav1.DeleteOptions{})
	})
	ns = cp.Namespace(t)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	err := harness.Eventually(ctx, "widgets served", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i), "namespace": ns}}}
		if _, err := dyn.Resource(v1).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.ApplyCRDs(ctx, harness.MultiVersionCRD(group, "Widget", "widgets", []string{"v1", "v2"}, "v2")); err != nil {
		t.Fatal(err)
	}
	return crdName, ns
}

// resetStoredVersions puts v1 back into status.storedVersions, so that
// the next run has work to do again.
func resetStoredVersions(t *testing.T, cp *harness.ControlPlane, crdName string) {
	t.Helper()
	ctx := context.Background()
	crds := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = []string{"v1", "v2"}
	if _, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = cp.Client.CoreV1().ConfigMaps("kube-system").Delete(ctx, crdmigrate.CheckpointName(crdName), metav1.DeleteOptions{})
}

func TestCRDMigrateRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	group := "rbac.crdmigrate.e2e.gpufleet.dev"
	crdName, ns := crdFixture(t, cp, group, 3)
	rs := loadRoles(t, "crd-migrate")
	// The shipped file names a placeholder group for the migrated
	// resources, to be replaced by the user: do what the README says.
	placeholder := false
	for i, r := range rs.cluster.Rules {
		if len(r.APIGroups) == 1 && r.APIGroups[0] == "crd-group.example.com" {
			rs.cluster.Rules[i].APIGroups = []string{group}
			placeholder = true
		}
	}
	if !placeholder {
		t.Fatal("crd-migrate.yaml: no rule for crd-group.example.com")
	}
	const bin = "kubectl-crd_migrate"
	reset := func(t *testing.T) { resetStoredVersions(t, cp, crdName) }
	flows := map[string]flow{
		"status":     {args: []string{"status", crdName, "-o", "wide"}, code: 1},
		"run-client": {args: []string{"run", crdName, "--method", "client"}, code: 0, after: reset},
		"run-intree": {args: []string{"run", crdName, "--method", "in-tree", "--in-tree-timeout", "60s"}, code: 0, after: reset},
	}
	user := grant(t, cp, "crd-migrate", "full", rs, ns, nil)
	checkFlows(t, cp, bin, user, []string{"status", "run-client", "run-intree"}, flows)
	checkRemovals(t, cp, "crd-migrate", bin, ns, rs, flows, []removal{
		{flow: "status", code: 3, line: denied("get", "customresourcedefinitions")},
		{flow: "run-client", code: 3, line: denied("update", "customresourcedefinitions/status")},
		{flow: "run-client", code: 3, line: denied("list", "validatingwebhookconfigurations")},
		{unused: "services are read only for webhooks that have a service clientConfig; the fixture CRD has none", check: func(t *testing.T) {
			crd, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crdName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if crd.Spec.Conversion != nil && crd.Spec.Conversion.Webhook != nil {
				t.Fatal("the fixture CRD has a conversion webhook now: cover the services rule with a flow")
			}
		}},
		{unused: "EndpointSlices are read only for webhooks that have a service clientConfig", check: func(t *testing.T) {}},
		{flow: "run-intree", code: 3, line: denied("list", "storageversionmigrations")},
		// Documented per CRD: the object count is "?" and the reason names the refusal.
		{flow: "status", code: 1, also: []string{denied("list", "widgets")}},
		{flow: "run-client", code: 3, line: denied("get", "configmaps")},
	})
}

var jobsetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

func TestGangDrainRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const poolName = "rbac-gd"
	nodes := pool(t, cp, poolName, 1, "")
	node := nodes[0]
	ns := cp.Namespace(t)
	cleanup, err := cp.CreateQueues(ctx, ns, poolName, map[string]string{harness.PoolLabel: poolName}, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	// A Kueue-admitted JobSet gang of one rank, a bare pod group and a
	// Deployment pod guarded by a PDB that allows one disruption. The pod
	// group speaks checkpoint-and-yield (its request is an annotation on
	// its first pod: get and patch on pods) but nobody answers, so each run
	// stops it after --ack-timeout.
	js := harness.TrainingJobSet(ns, "trainer", poolName, 1, 2)
	js.Labels[checkpoint.DefaultKeys().Protocol()] = "none"
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: poolName}
	if _, err := cp.JobSetClient().JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.Deployment(ns, "web", 1, 0)
	d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: poolName}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "web", "web", 0), 1); err != nil {
		t.Fatal(err)
	}
	podGroup := func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-0", Labels: map[string]string{
			gang.LabelSchedulerPodGrp: "pg", "app": "pg"}},
			Spec: harness.PodSpec(1)}
		p.Spec.NodeName = node
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	podGroup(t)
	// A one-rank Indexed Job that an external controller manages
	// (spec.managedBy, GA since Kubernetes 1.35: the Job controller leaves
	// such a Job alone, managedByExternalController in
	// k8s.io/kubernetes@v1.37.2 pkg/controller/job/job_controller.go), its
	// pod created here as that controller would, with the Job's tracking
	// finalizer. When the run suspends the Job nothing but gang-drain
	// deletes that pod, so each run does under the role what it does for a
	// stopped gang's pods once their Job is suspended: list and watch the
	// Jobs, record the pods on the Job, patch away the finalizer, delete.
	extJob := harness.Job(ns, "ext", 1, 0, false)
	extJob.Labels[checkpoint.DefaultKeys().Protocol()] = "none"
	extJob.Spec.ManagedBy = ptr.To("gpufleet.dev/e2e-external")
	extJob, err = cp.Client.BatchV1().Jobs(ns).Create(ctx, extJob, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extPod := func(t *testing.T) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext-0", Labels: map[string]string{"app": "ext"},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "0"},
			Finalizers:  []string{batchv1.JobTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: extJob.Name, UID: extJob.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: harness.PodSpec(0)}
		p.Spec.NodeName = node
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	extPod(t)
	ready := func(t *testing.T) {
		t.Helper()
		for _, sel := range []string{"app=trainer", "app=web", "app=pg", "app=ext"} {
			if err := cp.WaitPodsReady(ctx, ns, sel, 1, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	ready(t)
	rs := loadRoles(t, "gang-drain")
	const bin = "kubectl-gang_drain"
	admin := ""
	// Every mutating flow is undone by the admin: restore, the pod group
	// recreated, and the pods Ready again.
	undo := func(t *testing.T) {
		t.Helper()
		// The external controller's part: the pod again, before the Job is
		// resumed and restore waits for it.
		extPod(t)
		r := run(t, cp, bin, admin, "restore", node, "--poll-interval=250ms", "--restore-timeout=2m")
		if r.ExitCode != 0 {
			t.Fatalf("restore as admin: %s", r)
		}
		podGroup(t)
		ready(t)
	}
	runArgs := []string{"run", node, "--on-timeout=stop", "--ack-timeout=2s", "--poll-interval=250ms"}
	flows := map[string]flow{
		"plan":     {args: []string{"plan", node, "-o", "wide"}, code: 0},
		"run":      {args: runArgs, code: 0, after: extPod},
		"status":   {args: []string{"status"}, code: 0},
		"restore":  {args: []string{"restore", node, "--poll-interval=250ms", "--restore-timeout=2m"}, code: 0},
		"run+undo": {args: runArgs, code: 0, after: undo},
		// Without a verb it needs to delete them, gang-drain leaves the
		// pods to their Job's controller, which for "ext" is nobody: the
		// stop ends at --stop-timeout.
		"run+undo, ext kept": {args: append(runArgs[:len(runArgs):len(runArgs)], "--stop-timeout=5s"), code: 0, after: undo},
		// The pool holds a gang, so the inference plan is refused (exit
		// 1) after reading the model Deployments.
		"plan-inference": {args: []string{"plan", node, "--inference", "--hydrate-bandwidth", "object-store=1G/s"}, code: 1},
		// A run on the node (the admin's), a surge of web recorded for it
		// as run --inference records one, then restore --inference.
		"restore-surge": {args: []string{"restore", node, "--inference", "--poll-interval=250ms", "--restore-timeout=2m"}, code: 0,
			before: func(t *testing.T) {
				t.Helper()
				if r := run(t, cp, bin, admin, runArgs...); r.ExitCode != 0 {
					t.Fatalf("run as admin: %s", r)
				}
				extPod(t)
				n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := inference.ApplySurge(ctx, cp.Client, dep, n.Annotations[gang.AnnRunID], 1, time.Now()); err != nil {
					t.Fatal(err)
				}
			},
			after: func(t *testing.T) {
				t.Helper()
				if r := run(t, cp, bin, admin, "restore", node, "--inference", "--poll-interval=250ms", "--restore-timeout=2m"); r.ExitCode != 0 {
					t.Fatalf("restore as admin: %s", r)
				}
				dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil || *dep.Spec.Replicas != 1 || dep.Labels[inference.LabelSurgedByRun] != "" {
					t.Fatalf("web after restore --inference: %v %v", dep, err)
				}
				podGroup(t)
				ready(t)
			}},
	}
	user := grant(t, cp, "gang-drain", "full", rs, ns, nil)
	checkFlows(t, cp, bin, user, []string{"plan", "run", "status", "restore", "plan-inference", "restore-surge"}, flows)
	podGroup(t)
	ready(t)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	if u, err := dyn.Resource(jobsetGVR).Namespace(ns).Get(ctx, "trainer", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); s {
		t.Error("the JobSet is still suspended after restore")
	}
	// The run deleted ext's pod itself, as the record on the Job says.
	if j, err := cp.Client.BatchV1().Jobs(ns).Get(ctx, "ext", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if rec, err := gang.ParseDeletedPods(j.Annotations[gang.AnnDeletedPods]); err != nil || rec == nil || rec.Count != 1 || !rec.Deleted.Has("ext", "ext-0") || rec.Unfinalized != 1 || ptr.Deref(j.Spec.Suspend, false) {
		t.Errorf("job ext after run and restore: suspend %v, deleted-pods record %+v (%v)", ptr.Deref(j.Spec.Suspend, false), rec, err)
	}
	checkRemovals(t, cp, "gang-drain", bin, ns, rs, flows, []removal{
		{flow: "plan", code: 3, line: denied("get", "nodes")},
		{flow: "run+undo", code: 3, line: denied("patch", "nodes")},
		{flow: "plan", code: 3, line: denied("list", "pods")},
		// The pod group's checkpoint request needs get; ext's finalizer patch is refused too (a warning).
		{flow: "run+undo, ext kept", code: 3, line: denied("get", "pods"), also: []string{"not deleting its pods itself", denied("patch", "pods")}},
		// Degrades: the checkpoint answer and the stopping gang's pods are read every interval instead.
		{flow: "run+undo", code: 0, also: []string{"cannot watch pods in namespace", denied("watch", "pods")}},
		// The pod group's stop needs delete; ext's pod is left to its controller (a warning).
		{flow: "run+undo, ext kept", code: 3, line: denied("delete", "pods"), also: []string{"not deleting its pods itself"}},
		{flow: "run+undo", code: 3, line: denied("create", "pods/eviction")},
		// Degrades: the pods of that namespace get the verdict UNKNOWN naming the refusal.
		{flow: "plan", code: 1, also: []string{"UNKNOWN", denied("list", "poddisruptionbudgets")}},
		{flow: "plan", code: 3, line: denied("list", "workloads")},
		{flow: "plan", code: 3, line: denied("get", "jobsets")},
		{flow: "plan", code: 3, line: denied("get", "jobs")},
		{unused: "LeaderWorkerSet, PyTorchJob, MPIJob, TrainJob and Volcano Job are not served by the test control plane", check: func(t *testing.T) {
			for _, gv := range []string{"leaderworkerset.x-k8s.io/v1", "kubeflow.org/v1", "trainer.kubeflow.org/v1alpha1", "batch.volcano.sh/v1alpha1"} {
				if _, err := cp.Client.Discovery().ServerResourcesForGroupVersion(gv); err == nil {
					t.Errorf("%s is served now: cover the rule with a flow", gv)
				}
			}
		}},
		{flow: "plan-inference", code: 3, line: denied("list", "replicasets")},
		{flow: "restore-surge", code: 3, line: denied("patch", "deployments")},
		// Degrades: the plan notes that it cannot tell which models an autoscaler scales.
		{flow: "plan-inference", code: 1, also: []string{"note: cannot list horizontalpodautoscalers", denied("list", "horizontalpodautoscalers")}},
	})
	_ = rbacv1.GroupName
}
