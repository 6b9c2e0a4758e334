package pdbblockers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// protoStreamServer serves nodes, pods and PDBs the way kube-apiserver
// answers a protobuf watch-list request: length-prefixed
// metav1.WatchEvent frames (ADDED for each object, then the
// initial-events-end bookmark), each object in the protobuf envelope. The
// objects carry what the API server adds to those the e2e scale test
// creates (defaults, the service account volume, managed fields), so that
// decoding costs what it costs against a real server.
type protoStreamServer struct {
	streams map[string][]byte // URL path -> encoded watch stream
}

func (s *protoStreamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/version" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
		return
	}
	body, ok := s.streams[r.URL.Path]
	if !ok || r.URL.Query().Get("watch") != "true" {
		http.Error(w, "not served: "+r.URL.String(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// watchStream encodes objs as a watch-list stream ending with the
// initial-events-end bookmark (an object of the same kind, bookmark).
func watchStream(t testing.TB, gv schema.GroupVersion, objs []runtime.Object, bookmark runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, gv)
	var out bytes.Buffer
	frame := func(typ string, obj runtime.Object) {
		raw, err := runtime.Encode(enc, obj)
		if err != nil {
			t.Fatal(err)
		}
		ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		out.Write(n[:])
		out.Write(b)
	}
	for _, o := range objs {
		frame("ADDED", o)
	}
	frame("BOOKMARK", bookmark)
	return out.Bytes()
}

// scaleObjects returns nodes, pods and PDBs laid out as in
// e2e/pdbblockers TestPDBBlockersScale: ten pods per node and per PDB, ten
// PDBs per namespace, minAvailable 9 or 8 of 10.
func scaleObjects(nodes int) (ns, ps, bs []runtime.Object) {
	const podsPerNode, podsPerPDB, pdbsPerNamespace = 10, 10, 10
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	nsOf := func(pdb int) string { return fmt.Sprintf("team-%04d", pdb/pdbsPerNamespace) }
	rv := 1000
	next := func() string { rv++; return strconv.Itoa(rv) }
	for i := range nodes {
		ns = append(ns, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%05d", i), UID: uid("node", i), ResourceVersion: next(),
			CreationTimestamp: created, Labels: map[string]string{"pdbb-scale": "scale"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "pdbblockers.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:pdbb-scale":{}}}}`)}}}}})
	}
	pdbs := nodes * podsPerNode / podsPerPDB
	for i := range pdbs {
		minAvail := int32(podsPerPDB - 1 - i%2)
		bs = append(bs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Namespace: nsOf(i), UID: uid("pdb", i),
			ResourceVersion: next(), Generation: 1, CreationTimestamp: created,
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "pdbblockers.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "policy/v1", Time: &created, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:minAvailable":{},"f:selector":{}}}`)}},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "policy/v1", Time: &created, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"DisruptionAllowed\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:currentHealthy":{},"f:desiredHealthy":{},"f:disruptionsAllowed":{},"f:expectedPods":{},"f:observedGeneration":{}}}`)}}}},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvail)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%05d", i)}}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: podsPerPDB - minAvail, CurrentHealthy: podsPerPDB, DesiredHealthy: minAvail, ExpectedPods: podsPerPDB,
				Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: created, Reason: policyv1.SufficientPodsReason}}}})
	}
	for i := range nodes * podsPerNode {
		ps = append(ps, scalePod(i, nsOf(i/podsPerPDB), fmt.Sprintf("app-%05d", i/podsPerPDB), fmt.Sprintf("scale-%05d", i%nodes), created, next()))
	}
	return ns, ps, bs
}

func uid(kind string, i int) types.UID {
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", len(kind), i))
}

// scalePod is a pod as the API server returns it after the scale test
// created it (defaults and the service account token volume added by
// admission) and wrote its Ready status.
func scalePod(i int, ns, app, node string, created metav1.Time, rv string) *corev1.Pod {
	vol := "kube-api-access-" + fmt.Sprintf("%05x", i)[:5]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%06d", i), Namespace: ns, UID: uid("pod", i), ResourceVersion: rv, CreationTimestamp: created,
			Labels: map[string]string{"app": app},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "pdbblockers.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:nodeName":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{}}}`)}},
				{Manager: "pdbblockers.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:phase":{}}}`)}}}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Volumes: []corev1.Volume{{Name: vol, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10", TerminationMessagePath: "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				VolumeMounts: []corev1.VolumeMount{{Name: vol, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](30), DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created}}},
	}
}

// newScaleServer starts protoStreamServer over scaleObjects(nodes) and
// returns a kubeconfig for it.
func newScaleServer(t testing.TB, nodes int) (kubeconfig string, pods int) {
	t.Helper()
	ns, ps, bs := scaleObjects(nodes)
	bookmark := func(obj interface {
		runtime.Object
		SetAnnotations(map[string]string)
		SetResourceVersion(string)
	}) runtime.Object {
		obj.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		obj.SetResourceVersion("999999")
		return obj
	}
	srv := &protoStreamServer{streams: map[string][]byte{
		"/api/v1/nodes":                        watchStream(t, corev1.SchemeGroupVersion, ns, bookmark(&corev1.Node{})),
		"/api/v1/pods":                         watchStream(t, corev1.SchemeGroupVersion, ps, bookmark(&corev1.Pod{})),
		"/apis/policy/v1/poddisruptionbudgets": watchStream(t, policyv1.SchemeGroupVersion, bs, bookmark(&policyv1.PodDisruptionBudget{})),
	}}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, hs.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, len(ps)
}

// BenchmarkAllNodes runs the kubectl-pdb_blockers binary, built for the
// benchmark, with --all-nodes against protoStreamServer holding the e2e
// scale test's cluster: 5,000 nodes, 50,000 pods, 5,000 PDBs
// (PDBB_BENCH_NODES changes the node count; pods and PDBs follow). It
// measures the whole process: decoding the protobuf streams, slimming,
// indexing, the simulation, and the report (42,500 items with -o json;
// -q beside it for the cost of the format), and beside it hack/watchlist
// reading the same streams, the floor. PDBB_BENCH_PROFILE=DIR writes
// each run's CPU profile there (GPUFLEET_CPUPROFILE). The server here
// costs little; the e2e scale test measures against the real one.
func BenchmarkAllNodes(b *testing.B) {
	nodes := 5000
	if v, err := strconv.Atoi(os.Getenv("PDBB_BENCH_NODES")); err == nil && v > 0 {
		nodes = v
	}
	bin := buildBinaries(b)
	kubeconfig, pods := newScaleServer(b, nodes)
	profiles := os.Getenv("PDBB_BENCH_PROFILE")
	formats := []string{"json", "quiet", "floor"}
	// PDBB_BENCH_BASE=BINARY measures another build of the plugin beside
	// this one (before and after a change).
	base := os.Getenv("PDBB_BENCH_BASE")
	if base != "" {
		formats = append(formats, "base-json", "base-quiet")
	}
	for _, format := range formats {
		b.Run(format, func(b *testing.B) {
			args := []string{filepath.Join(bin, "kubectl-pdb_blockers"), "--kubeconfig", kubeconfig, "--all-nodes", "--force", "-o", "json"}
			want := cli.ExitFindings
			if strings.HasPrefix(format, "base-") {
				args[0] = base
			}
			switch format {
			case "quiet", "base-quiet":
				args = append(args[:len(args)-2], "-q")
			case "floor":
				// The same three streams read by a bare client (see
				// hack/watchlist), for the plugin's ratio to its floor.
				args, want = []string{filepath.Join(bin, "watchlist"), "--kubeconfig", kubeconfig, "nodes", "pods", "poddisruptionbudgets"}, 0
			}
			var cpu time.Duration
			var peak, out int64
			run := 0
			for b.Loop() {
				run++
				cmd := exec.Command(filepath.Join(bin, "peakrss"), args...)
				var stdout countWriter
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				cmd.Env = os.Environ()
				if profiles != "" {
					cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s", cli.ProfileEnv, filepath.Join(profiles, fmt.Sprintf("pdbb-%s-%d.pprof", format, run))))
				}
				_ = cmd.Run()
				if code := cmd.ProcessState.ExitCode(); code != want {
					b.Fatalf("exit %d, want %d\n%s", code, want, stderr.String())
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				var kib int64
				if i := bytes.LastIndex(stderr.Bytes(), []byte("peakrss: ")); i >= 0 {
					_, _ = fmt.Sscanf(stderr.String()[i:], "peakrss: %d", &kib)
				}
				peak = max(peak, kib<<10)
				out = int64(stdout)
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(run), "cpu-ms/op")
			b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
			b.ReportMetric(float64(pods), "pods")
			b.ReportMetric(float64(out)/(1<<20), "MB-out")
		})
	}
}

// buildBinaries builds the plugin, hack/peakrss (which reads the plugin's
// own peak RSS) and hack/watchlist (the floor) into a temporary directory.
func buildBinaries(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+string(os.PathSeparator), "./cmd/kubectl-pdb_blockers", "./hack/peakrss", "./hack/watchlist")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }
