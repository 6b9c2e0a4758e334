//go:build e2e

package crdmigratee2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

const binary = "kubectl-crd_migrate"

// fixture is a two-version CRD (conversion None) with objects written while
// v1 was the storage version, after which storage moved to v2.
type fixture struct {
	cp       *harness.ControlPlane
	group    string
	plural   string
	crdName  string
	ns       string
	objects  int
	dyn      dynamic.Interface
	v1, v2   schema.GroupVersionResource
	crdAtV2  *apiextv1.CustomResourceDefinition
	checkpNS string
}

// newFixture creates the CRD <plural>.<name>.crdmigrate.e2e.gpufleet.dev at
// storage v1, n objects in a fresh namespace, then moves storage to v2.
func newFixture(t testing.TB, name string, n int) *fixture {
	t.Helper()
	cp := harness.Shared(t)
	ctx := context.Background()
	f := &fixture{cp: cp, group: name + ".crdmigrate.e2e.gpufleet.dev", plural: "widgets", objects: n, checkpNS: "kube-system"}
	f.crdName = f.plural + "." + f.group
	f.v1 = schema.GroupVersionResource{Group: f.group, Version: "v1", Resource: f.plural}
	f.v2 = schema.GroupVersionResource{Group: f.group, Version: "v2", Resource: f.plural}
	if err := cp.ApplyCRDs(ctx, harness.MultiVersionCRD(f.group, "Widget", f.plural, []string{"v1", "v2"}, "v1")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), f.crdName, metav1.DeleteOptions{})
		_ = cp.Client.CoreV1().ConfigMaps(f.checkpNS).Delete(context.Background(), crdmigrate.CheckpointName(f.crdName), metav1.DeleteOptions{})
	})
	f.ns = cp.Namespace(t)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	var err error
	if f.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	f.create(t, 0, n)
	f.crdAtV2 = harness.MultiVersionCRD(f.group, "Widget", f.plural, []string{"v1", "v2"}, "v2")
	if err := f.setStorage(ctx, t, "v2"); err != nil {
		t.Fatal(err)
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
		t.Fatalf("storedVersions after moving storage to v2 = %v, want [v1 v2]", sv)
	}
	return f
}

// setStorage moves the CRD's storage version to version and returns once
// the apiserver stores new writes there: an object written now lands in
// etcd at that version.
func (f *fixture) setStorage(ctx context.Context, t testing.TB, version string) error {
	crd := harness.MultiVersionCRD(f.group, "Widget", f.plural, []string{"v1", "v2"}, version)
	if err := f.cp.ApplyCRDs(ctx, crd); err != nil {
		return err
	}
	gvr := f.v1
	gvr.Version = version
	probe := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	return harness.Eventually(ctx, "storage version "+version+" in effect", 30*time.Second, func(ctx context.Context) (bool, error) {
		obj := f.object(gvr, probe)
		_, err := f.dyn.Resource(gvr).Namespace(f.ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		kvs := f.etcdRange(t, f.keyPrefix()+f.ns+"/"+probe)
		_ = f.dyn.Resource(gvr).Namespace(f.ns).Delete(ctx, probe, metav1.DeleteOptions{})
		return len(kvs) == 1 && apiVersionOf(t, kvs[0]) == f.group+"/"+version, nil
	})
}

func (f *fixture) object(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.Group + "/" + gvr.Version,
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": f.ns},
		"spec":       map[string]any{"size": "m", "payload": strings.Repeat("x", 200)},
	}}
}

// create writes objects w-<from>..w-<to-1> at v1 with 16 writers.
func (f *fixture) create(t testing.TB, from, to int) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				obj := f.object(f.v1, fmt.Sprintf("w-%05d", i))
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if _, err = f.dyn.Resource(f.v1).Namespace(f.ns).Create(context.Background(), obj, metav1.CreateOptions{}); err == nil {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("creating widgets: %v", err)
	default:
	}
	t.Logf("created %d widgets in %s", to-from, time.Since(start).Round(time.Millisecond))
}

func (f *fixture) keyPrefix() string {
	return "/registry/" + f.group + "/" + f.plural + "/"
}

func (f *fixture) storedVersions(t testing.TB) []string {
	t.Helper()
	crd, err := f.cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), f.crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}

// etcdKV is one key of etcd's JSON gateway answer.
type etcdKV struct {
	Key         []byte `json:"key"`
	Value       []byte `json:"value"`
	ModRevision string `json:"mod_revision"`
}

// etcdRange reads every key under prefix (or the key itself when prefix
// names one) straight from etcd, through its gRPC gateway
// (POST /v3/kv/range, base64 keys), page by page.
func (f *fixture) etcdRange(t testing.TB, prefix string) []etcdKV {
	t.Helper()
	end := []byte(prefix)
	end[len(end)-1]++
	var out []etcdKV
	key := []byte(prefix)
	for {
		body, _ := json.Marshal(map[string]any{"key": key, "range_end": end, "limit": 1000})
		resp, err := http.Post(f.cp.EtcdEndpoint+"/v3/kv/range", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("etcd range %s: %v", prefix, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("etcd range %s: %s: %s", prefix, resp.Status, raw)
		}
		var r struct {
			KVs  []etcdKV `json:"kvs"`
			More bool     `json:"more"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("etcd range %s: %v: %s", prefix, err, raw)
		}
		out = append(out, r.KVs...)
		if !r.More || len(r.KVs) == 0 {
			return out
		}
		key = append(append([]byte{}, r.KVs[len(r.KVs)-1].Key...), 0)
	}
}

func apiVersionOf(t testing.TB, kv etcdKV) string {
	t.Helper()
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(kv.Value, &obj); err != nil {
		t.Fatalf("etcd value of %s is not JSON: %v", kv.Key, err)
	}
	return obj.APIVersion
}

// storedAt counts, straight from etcd, the fixture's objects by the
// apiVersion they are stored at.
func (f *fixture) storedAt(t testing.TB) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, kv := range f.etcdRange(t, f.keyPrefix()+f.ns+"/") {
		counts[apiVersionOf(t, kv)]++
	}
	return counts
}

// modRevisions maps each key of the fixture to its etcd mod revision.
func (f *fixture) modRevisions(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kv := range f.etcdRange(t, f.keyPrefix()+f.ns+"/") {
		out[string(kv.Key)] = kv.ModRevision
	}
	return out
}

// assertAllAtV2 proves through etcd that every object is stored at v2 and
// through the API that storedVersions is [v2].
func (f *fixture) assertAllAtV2(t testing.TB) {
	t.Helper()
	got := f.storedAt(t)
	want := map[string]int{f.group + "/v2": f.objects}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("objects in etcd by apiVersion = %v, want %v", got, want)
	}
	if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v2"}) {
		t.Errorf("status.storedVersions = %v, want [v2]", sv)
	}
}

func (f *fixture) args(extra ...string) []string {
	return append([]string{"--kubeconfig", f.cp.Kubeconfig}, extra...)
}

func (f *fixture) run(t testing.TB, extra ...string) plugintest.Result {
	t.Helper()
	return plugintest.RunCmd(t, plugintest.Binary(t, binary), plugintest.Cmd{Args: f.args(extra...), Timeout: 3 * time.Minute})
}

// runReport is the part of the run report the tests read.
type runReport struct {
	Kind  string `json:"kind"`
	Items []struct {
		CRD                 string   `json:"crd"`
		Method              string   `json:"method"`
		Resumed             bool     `json:"resumed"`
		NothingToDo         bool     `json:"nothingToDo"`
		Total               int64    `json:"total"`
		Processed           int64    `json:"processed"`
		Rewritten           int64    `json:"rewritten"`
		Unchanged           int64    `json:"unchanged"`
		Conflicts           int64    `json:"conflicts"`
		Gone                int64    `json:"gone"`
		Outcome             string   `json:"outcome"`
		Migration           string   `json:"storageVersionMigration"`
		StoredVersionsAfter []string `json:"storedVersionsAfter"`
		Seconds             float64  `json:"seconds"`
	} `json:"items"`
}

func parseRun(t testing.TB, r plugintest.Result) runReport {
	t.Helper()
	var rep runReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || len(rep.Items) != 1 {
		t.Fatalf("run report: %v (items %d)\n%s", err, len(rep.Items), r)
	}
	return rep
}

// checkpoint reads the run's checkpoint, or nil.
func (f *fixture) checkpoint(t testing.TB) *crdmigrate.Checkpoint {
	t.Helper()
	store := &crdmigrate.CheckpointStore{Client: f.cp.Client, Namespace: f.checkpNS}
	cp, err := store.Load(context.Background(), f.crdName)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// start starts the plugin with the fixture's flags and extra.
func (f *fixture) start(t testing.TB, extra ...string) *plugintest.Process {
	t.Helper()
	return plugintest.Start(t, binary, nil, f.args(extra...)...)
}

// startMeasured starts it under hack/peakrss, for its peak RSS.
func (f *fixture) startMeasured(t testing.TB, extra ...string) *plugintest.Process {
	t.Helper()
	return plugintest.StartMeasured(t, binary, f.args(extra...)...)
}

// waitForPages waits until the checkpoint records at least n finished pages.
func (f *fixture) waitForPages(t testing.TB, s *plugintest.Process, n int64) *crdmigrate.Checkpoint {
	t.Helper()
	var last *crdmigrate.Checkpoint
	err := harness.Poll(context.Background(), fmt.Sprintf("checkpoint with %d pages", n), 50*time.Millisecond, 60*time.Second, func(context.Context) (bool, error) {
		select {
		case <-s.Done():
			return false, fmt.Errorf("plugin exited early (%d): %s", s.ExitCode(), s.Stderr())
		default:
		}
		last = f.checkpoint(t)
		return last != nil && last.Pages >= n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}
