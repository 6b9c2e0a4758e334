//go:build e2e

package fleete2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// The ring-by-ring run: canary, then prod after two approvals, then the
// training cell with a real gang; the store on the S3 server. Several tests
// read what this one run left.
const ringsThree = `  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}, soak: 3s, maxConcurrent: 2}
  - {name: prod, selector: {matchLabels: {gpufleet.dev/ring: prod}}, soak: 3s, approval: {approvers: 2}}
  - {name: training, selector: {matchLabels: {gpufleet.dev/ring: training}}, maxConcurrent: 1}`

type ringRun struct {
	s *scenario
	// afterOneApproval is what the run showed with one of prod's two
	// approvals: still waiting, prod not admitted.
	waitingAfterOne      bool
	prodAdmittedAfterOne bool
	status               string
	took                 time.Duration
}

var (
	ringOnce sync.Once
	ring     *ringRun
	ringOK   bool
)

func ringByRing(t *testing.T) *ringRun {
	t.Helper()
	e := env(t)
	ringOnce.Do(func() {
		r := &ringRun{}
		e.resetPools(t)
		gang := e.trainingGang(t, "ring-gang", nil)
		r.s = e.newScenario(t, "ring", e.s3Store("ring"), ringsThree, "  caps: {maxConcurrentClusters: 1, maxGPUPercentInFlight: 50}\n")
		began := time.Now()
		r.s.start(t)
		// Canary upgrades, soaks, passes its gate; prod waits for two
		// approvals.
		r.s.waitFor(t, "prod's approval suspend", 6*time.Minute, func() bool { return r.s.waiting(t, fleetrun.SuspendApproval, "prod", "") })
		t.Log(r.s.approve(t, "alice", "prod", "canary soaked clean"))
		time.Sleep(8 * time.Second) // several retry intervals: nothing may start
		r.waitingAfterOne = r.s.waiting(t, fleetrun.SuspendApproval, "prod", "")
		_, states := r.s.states(t)
		r.prodAdmittedAfterOne = states[prod].AdmittedAt != nil
		t.Log(r.s.approve(t, "bob", "prod", "second pair of eyes: CHG-1234"))
		r.s.waitPhase(t, "Succeeded", 12*time.Minute)
		r.took = time.Since(began)
		r.s.logStatusSize(t)
		r.status = e.skew(t, "fleet", "status", "--store", r.s.store, "--run", r.s.run)
		t.Logf("the run took %s; kubectl skew fleet status:\n%s", r.took.Round(time.Second), r.status)
		gang.readmitted(t)
		ring, ringOK = r, true
	})
	if !ringOK {
		t.Fatal("the ring-by-ring run failed (see the first test that ran it)")
	}
	return ring
}

// TestFleetRingByRing: the whole fleet upgraded ring by ring with evidence
// for every step.
func TestFleetRingByRing(t *testing.T) {
	r := ringByRing(t)
	e := r.s.e
	p, states := r.s.states(t)
	st := r.s.openStore(t)
	for _, c := range p.Clusters {
		s := states[c.Name]
		if s.FinishedAt == nil {
			t.Errorf("%s did not finish", c.Name)
			continue
		}
		for _, step := range c.Steps {
			ss := s.Step(step.Name)
			if ss.Phase != fleetrun.PhaseCompleted || ss.InputsDigest == "" {
				t.Errorf("%s/%s: %s", c.Name, step.Name, ss.Phase)
			}
			var meta, report bool
			for _, k := range ss.Evidence {
				meta = meta || strings.HasSuffix(k, "/meta.json")
				report = report || strings.HasSuffix(k, "/report.json") || strings.HasSuffix(k, "/stdout.log")
				if _, err := st.Read(context.Background(), k); err != nil {
					t.Errorf("%s/%s: evidence %s: %v", c.Name, step.Name, k, err)
				}
			}
			if !meta || !report {
				t.Errorf("%s/%s: evidence %v lacks meta.json or the command's output", c.Name, step.Name, ss.Evidence)
			}
		}
		e.nodesUpgraded(t, c.Name)
		if _, err := st.Read(context.Background(), fleetrun.LatestPreflightKey(c.Name)); err != nil {
			t.Errorf("latest pre-flight of %s: %v", c.Name, err)
		}
	}
	// Rings in order: each ring's clusters finished before the next began.
	order := []string{canary, prod, training}
	for i := 1; i < len(order); i++ {
		a, b := states[order[i-1]], states[order[i]]
		if !b.AdmittedAt.After(*a.FinishedAt) {
			t.Errorf("%s admitted at %s, before %s finished at %s", order[i], b.AdmittedAt, order[i-1], a.FinishedAt)
		}
	}
	if !strings.Contains(r.status, "completed") {
		t.Errorf("status:\n%s", r.status)
	}
	// Every step process was told its own pod by the downward API, as
	// rendered (POD_NAME, POD_NAMESPACE: what the drain checks read).
	steps := 0
	for _, x := range e.node.Ran() {
		if !strings.HasPrefix(x.Pod, r.s.workflowName()+"-") {
			continue
		}
		steps++
		if want := []string{"POD_NAME=" + x.Pod, "POD_NAMESPACE=" + x.Namespace}; !slices.Contains(x.Env, want[0]) || !slices.Contains(x.Env, want[1]) {
			t.Errorf("pod %s ran with env %v, want %v", x.Pod, x.Env, want)
		}
	}
	if steps < len(p.Clusters) {
		t.Errorf("the exec node ran %d pods of %s", steps, r.s.workflowName())
	}
}

// TestFleetProdNeedsTwoApprovals: with one of two approvals prod did not
// start; the second released it.
func TestFleetProdNeedsTwoApprovals(t *testing.T) {
	r := ringByRing(t)
	if !r.waitingAfterOne || r.prodAdmittedAfterOne {
		t.Errorf("after one approval: workflow waiting %v, prod admitted %v; want waiting and not admitted", r.waitingAfterOne, r.prodAdmittedAfterOne)
	}
	ds, err := fleetrun.ReadDecisions(context.Background(), r.s.openStore(t), r.s.run)
	if err != nil {
		t.Fatal(err)
	}
	if who := fleetrun.Approvers(ds, "prod"); strings.Join(who, ",") != "alice,bob" {
		t.Errorf("prod approvers %v", who)
	}
	_, states := r.s.states(t)
	last := ds[len(ds)-1]
	if !states[prod].AdmittedAt.After(last.At) {
		t.Errorf("prod admitted at %s, before the second approval at %s", states[prod].AdmittedAt, last.At)
	}
}

// TestFleetCapsFromStoreTimestamps: at no instant were more clusters (or
// GPUs) in flight than the caps, from the store's admission and finish
// times alone.
func TestFleetCapsFromStoreTimestamps(t *testing.T) {
	r := ringByRing(t)
	p, states := r.s.states(t)
	type edge struct {
		at         time.Time
		delta, gpu int
	}
	var edges []edge
	for _, c := range p.Clusters {
		s := states[c.Name]
		if s.AdmittedAt == nil || s.FinishedAt == nil {
			t.Fatalf("%s: admitted %v finished %v", c.Name, s.AdmittedAt, s.FinishedAt)
		}
		edges = append(edges, edge{*s.AdmittedAt, 1, s.GPUs}, edge{*s.FinishedAt, -1, -s.GPUs})
	}
	// Leaving first at equal times.
	for i := range edges {
		for j := i + 1; j < len(edges); j++ {
			if edges[j].at.Before(edges[i].at) || (edges[j].at.Equal(edges[i].at) && edges[j].delta < edges[i].delta) {
				edges[i], edges[j] = edges[j], edges[i]
			}
		}
	}
	n, g, maxN, maxG := 0, 0, 0, 0
	for _, e := range edges {
		n += e.delta
		g += e.gpu
		maxN, maxG = max(maxN, n), max(maxG, g)
	}
	if maxN > p.MaxClustersInFlight || maxG > p.MaxGPUsInFlight {
		t.Errorf("at most %d clusters and %d GPUs were in flight; caps %d and %d", maxN, maxG, p.MaxClustersInFlight, p.MaxGPUsInFlight)
	}
	t.Logf("most in flight at once: %d clusters (cap %d), %d GPUs (cap %d)", maxN, p.MaxClustersInFlight, maxG, p.MaxGPUsInFlight)
}

// TestFleetDRHalvesNeverOverlap: canary and prod are the two halves of DR
// pair "east"; their times in flight never overlap.
func TestFleetDRHalvesNeverOverlap(t *testing.T) {
	r := ringByRing(t)
	_, states := r.s.states(t)
	a, b := states[canary], states[prod]
	if a.AdmittedAt.Before(*b.FinishedAt) && b.AdmittedAt.Before(*a.FinishedAt) {
		t.Errorf("DR halves overlap: canary %s-%s, prod %s-%s", a.AdmittedAt, a.FinishedAt, b.AdmittedAt, b.FinishedAt)
	}
}

// gang is a training JobSet on the training cell's GPU pool, admitted by
// the real Kueue.
type gang struct {
	e    *fleetEnv
	ns   string
	name string
}

// trainingGang creates a queued JobSet that fills the training pool.
func (e *fleetEnv) trainingGang(t *testing.T, name string, _ any) *gang {
	t.Helper()
	ctx := context.Background()
	cp := e.planes[training]
	ns := cp.Namespace(t)
	cleanup, err := cp.CreateQueues(ctx, ns, name, map[string]string{harness.PoolLabel: pools[training]}, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	js := harness.TrainingJobSet(ns, name, name, 2, 8)
	if _, err := cp.JobSetClient().JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.WaitPodsReady(ctx, ns, "jobset.sigs.k8s.io/jobset-name="+name, 2, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return &gang{e: e, ns: ns, name: name}
}

// readmitted waits for the gang's pods to run again after the restore.
func (g *gang) readmitted(t *testing.T) {
	t.Helper()
	if err := g.e.planes[training].WaitPodsReady(context.Background(), g.ns, "jobset.sigs.k8s.io/jobset-name="+g.name, 2, 3*time.Minute); err != nil {
		t.Errorf("gang %s/%s after the run: %v", g.ns, g.name, err)
	}
}

// logStatusSize logs the size of the run's Workflow at its end as the
// workflow-controller's packer measures it (workflow/packer/packer.go at
// argo-workflows v3.7.15): getSize is the length of the whole Workflow's
// JSON, and compressWorkflow replaces status.nodes with
// status.compressedNodes, the nodes' JSON gzipped and base64-encoded
// (util/file/fileutil.go CompressEncodeString; the controller's default
// gzip is pgzip at its default level, this one compress/gzip's, so the
// compressed figure is close, not byte-exact). The figures per node are
// what README's end-of-run sizes for larger fleets are computed from.
func (s *scenario) logStatusSize(t *testing.T) {
	t.Helper()
	w, err := s.e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS).Get(context.Background(), s.workflowName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := json.Marshal(w.Object)
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedMap(w.Object, "status", "nodes")
	nodesJSON, err := json.Marshal(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(nodesJSON)
	_ = zw.Close()
	packed := w.DeepCopy()
	unstructured.RemoveNestedField(packed.Object, "status", "nodes")
	if err := unstructured.SetNestedField(packed.Object, base64.StdEncoding.EncodeToString(gz.Bytes()), "status", "compressedNodes"); err != nil {
		t.Fatal(err)
	}
	packedJSON, err := json.Marshal(packed.Object)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, v := range nodes {
		n, _ := v.(map[string]any)
		typ, _ := n["type"].(string)
		kinds[typ]++
	}
	t.Logf("end-of-run size of Workflow %s: %d bytes of JSON, %d nodes (%v) of %d bytes; packed as the controller packs it, %d bytes (nodes %d bytes gzipped, %d in base64)",
		s.workflowName(), len(whole), len(nodes), kinds, len(nodesJSON), len(packedJSON), gz.Len(), base64.StdEncoding.EncodedLen(gz.Len()))
}
