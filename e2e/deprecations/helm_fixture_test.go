//go:build e2e

package deprecationse2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// helmFleet is a planted set of Helm 3 release Secrets: releases spread
// over namespaces, several revisions for some, each record a few KB of
// rendered manifest mixing current APIs with removed ones.
type helmFleet struct {
	Namespaces []string
	Records    int
	Releases   int
	// Bytes is the size of the stored records (the Secrets' release data).
	Bytes int
	// Deployed is the number of findings in the deployed revisions (what a
	// plain scan reports); History the number over every kept revision.
	Deployed, History int
}

// recordManifest renders release i's manifest at one revision. Release i
// uses policy/v1beta1 PodDisruptionBudget (removed in 1.25) when i%3 == 0
// and autoscaling/v2beta2 HorizontalPodAutoscaler (removed in 1.26) when
// i%5 == 0, their current versions otherwise; superseded revisions also
// carry an extensions/v1beta1 Ingress (removed in 1.22), which the chart
// dropped before the deployed revision. A ConfigMap of random hex makes
// the record a few KB even gzipped. It returns the manifest and how many
// removed APIs it uses.
func recordManifest(rng *rand.Rand, name string, i int, deployed bool, filler int) (string, int) {
	var b strings.Builder
	removed := 0
	fmt.Fprintf(&b, `---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/managed-by: Helm}
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: %[1]s}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[1]s}
    spec:
      containers:
      - name: app
        image: registry.example.com/%[1]s:1.%[2]d.0
        ports: [{containerPort: 8080, name: http}]
        resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 256Mi}}
---
# Source: app/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  selector: {app.kubernetes.io/name: %[1]s}
  ports: [{port: 80, targetPort: http}]
`, name, i%10)
	buf := make([]byte, filler/2)
	_, _ = rng.Read(buf)
	fmt.Fprintf(&b, "---\n# Source: app/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-settings\ndata:\n  seed: %q\n", name, hex.EncodeToString(buf))
	pdb := "policy/v1"
	if i%3 == 0 {
		pdb = "policy/v1beta1"
		removed++
	}
	fmt.Fprintf(&b, "---\n# Source: app/templates/pdb.yaml\napiVersion: %s\nkind: PodDisruptionBudget\nmetadata:\n  name: %s\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/name: %s}\n", pdb, name, name)
	hpa := "autoscaling/v2"
	if i%5 == 0 {
		hpa = "autoscaling/v2beta2"
		removed++
	}
	fmt.Fprintf(&b, "---\n# Source: app/templates/hpa.yaml\napiVersion: %s\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: %s\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: %s}\n  minReplicas: 2\n  maxReplicas: 10\n", hpa, name, name)
	ing := "networking.k8s.io/v1"
	if !deployed {
		ing = "extensions/v1beta1"
		removed++
	}
	fmt.Fprintf(&b, "---\n# Source: app/templates/ingress.yaml\napiVersion: %s\nkind: Ingress\nmetadata:\n  name: %s\n", ing, name)
	return b.String(), removed
}

func encodeRecord(t testing.TB, name, ns string, rev int, status, manifest string) []byte {
	t.Helper()
	return encodeRelease(t, map[string]any{
		"name": name, "namespace": ns, "version": rev,
		"info":     map[string]any{"status": status},
		"chart":    map[string]any{"metadata": map[string]any{"name": "app", "version": fmt.Sprintf("0.%d.0", rev)}},
		"config":   map[string]any{"replicaCount": 2},
		"manifest": manifest,
	})
}

// encodeRelease stores a Helm 3 release the way Helm does in a Secret's
// release key: JSON, gzip, base64.
func encodeRelease(t testing.TB, rec map[string]any) []byte {
	t.Helper()
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

// plantHelmFleet creates records Helm release Secrets over namespaces:
// release i lives in namespaces[i%len] with 1+i%4 revisions (the last
// deployed, the others superseded), so 2.5 records per release on
// average. filler is the size of each record's random ConfigMap data.
func plantHelmFleet(t testing.TB, cp *harness.ControlPlane, namespaces []string, records, filler int) helmFleet {
	t.Helper()
	f := helmFleet{Namespaces: namespaces}
	rng := rand.New(rand.NewSource(1))
	var secrets []*corev1.Secret
	for i := 0; f.Records < records; i++ {
		ns, name := namespaces[i%len(namespaces)], fmt.Sprintf("app-%04d", i)
		revs := min(1+i%4, records-f.Records)
		f.Releases++
		for rev := 1; rev <= revs; rev++ {
			deployed := rev == revs
			status := "superseded"
			if deployed {
				status = "deployed"
			}
			manifest, removed := recordManifest(rng, name, i, deployed, filler)
			f.History += removed
			if deployed {
				f.Deployed += removed
			}
			data := encodeRecord(t, name, ns, rev, status, manifest)
			f.Bytes += len(data)
			secrets = append(secrets, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, rev), Namespace: ns,
					Labels: map[string]string{"name": name, "owner": "helm", "status": status, "version": fmt.Sprint(rev)}},
				Type: "helm.sh/release.v1",
				Data: map[string][]byte{"release": data},
			})
			f.Records++
		}
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 400, 400
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	began := time.Now()
	work := make(chan *corev1.Secret)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				err := harness.Eventually(ctx, "create "+s.Name, time.Minute, func(ctx context.Context) (bool, error) {
					_, err := kc.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
					return err == nil, nil
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	for _, s := range secrets {
		select {
		case work <- s:
		case err := <-errs:
			close(work)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("planted %d Helm release records (%d releases, %.1f MiB stored, %d bytes a record) in %d namespaces in %s",
		f.Records, f.Releases, float64(f.Bytes)/(1<<20), f.Bytes/max(f.Records, 1), len(namespaces), time.Since(began).Round(time.Millisecond))
	return f
}

// helmItems keeps the items of Helm releases in the fleet's namespaces,
// as sorted "location apiVersion kind" lines.
func (f helmFleet) helmItems(items []item) []string {
	var out []string
	for _, it := range items {
		for _, ns := range f.Namespaces {
			if it.Source == "helm" && strings.HasPrefix(it.Who, "helm release "+ns+"/") {
				out = append(out, it.Location+" "+it.APIVersion+" "+it.Kind+" "+it.Status)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// lineWatcher is an io.Writer that keeps what the plugin writes and lets
// a test wait for a line.
type lineWatcher struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	match   func(line string) bool
	matched chan string
}

func newLineWatcher(match func(string) bool) *lineWatcher {
	return &lineWatcher{match: match, matched: make(chan string, 1)}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.match == nil {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if w.match != nil && w.match(line) {
			w.matched <- line
			w.match = nil
			w.partial = nil
			break
		}
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startPlugin starts the plugin; its stderr also goes to stderr, if not
// nil, as it is written.
func startPlugin(t testing.TB, stderr *lineWatcher, args ...string) *plugintest.Process {
	t.Helper()
	if stderr == nil {
		return plugintest.Start(t, binary, nil, args...)
	}
	return plugintest.Start(t, binary, stderr, args...)
}

// waitReport waits for p and reads its JSON report.
func waitReport(t testing.TB, p *plugintest.Process, timeout time.Duration) (plugintest.Result, report) {
	t.Helper()
	res := p.Wait(t, timeout)
	var rep report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v (exit %d)\n%s", err, res.ExitCode, plugintest.LastLines(res.Stderr, 40))
	}
	return res, rep
}

// auditRequests counts the plugin's requests in the apiserver audit log
// from offset on: requests by verb and resource, and the total.
type auditRequests struct {
	Total int
	// ByVerb["list secrets"] = n
	ByVerb map[string]int
}

func countAudit(t testing.TB, path string, offset int64, agentPrefix string) auditRequests {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	out := auditRequests{ByVerb: map[string]int{}}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || !strings.HasPrefix(ev.UserAgent, agentPrefix) {
			continue
		}
		out.Total++
		res := "(non-resource)"
		if ev.ObjectRef != nil {
			res = ev.ObjectRef.Resource
		}
		out.ByVerb[ev.Verb+" "+res]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
