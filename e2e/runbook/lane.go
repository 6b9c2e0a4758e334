package runbooke2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lane holds what every scenario shares: the recording endpoints, the
// proxy to the local control plane, the web stand-in, and the shell
// environment the blocks run in.
type Lane struct {
	Dir    string
	Client kubernetes.Interface
	Rec    *Recorder
	EKS    *EKS
	GKE    *GKE
	AKS    *AKS
	Proxy  *Proxy
	Web    *Web
	CA     *CA
	// Kubeadmcheck is the kubeadm command checker's binary.
	KubeadmCheck string
	Kubeconfig   string
	env          []string
	servers      []*httptest.Server
	azureReady   bool
	// sync mirrors the running scenario's world to the cluster after each
	// provider request, before the CLI has its answer: what the provider
	// changed is visible to the next command.
	sync func()
	// AzNote says why az aks nodepool upgrade is not run ("" when it is).
	AzNote string
	// Log receives progress lines.
	Log func(format string, args ...any)
	// Checks completes gpu-validate's check pods and serves their logs.
	Checks *CheckPods
	// Dynamic reaches the Cluster API objects; capiCRDs says whether
	// their CRDs are served; capi is the running scenario's (nil when
	// it is not a Cluster API one).
	Dynamic  dynamic.Interface
	capiCRDs bool
	capi     *capiMirror
	// capiProblems are what the controllers' stand-ins found during a
	// paste.
	capiMu       sync.Mutex
	capiProblems []string
}

// LaneOptions are the binaries the lane runs.
type LaneOptions struct {
	// KubectlDir holds kubectl (the control plane's release); PluginDir
	// the plugins.
	KubectlDir, PluginDir string
	KubeadmCheck          string
	// Kwok, KwokStages and ClusterKubeconfig run the GPU checks' log
	// server (CheckPods); empty: none.
	Kwok, KwokStages, ClusterKubeconfig string
	// CAPICRDs are Cluster API's CRDs, which ApplyCRDs applies (the
	// Cluster CRD pointed at the lane's conversion); none: the Cluster
	// API scenarios cannot run.
	CAPICRDs  []*apiextensionsv1.CustomResourceDefinition
	ApplyCRDs func(context.Context, ...*apiextensionsv1.CustomResourceDefinition) error
}

// StartLane starts the endpoints and writes the shell environment.
func StartLane(dir string, cfg *rest.Config, client kubernetes.Interface, o LaneOptions) (*Lane, error) {
	l := &Lane{Dir: dir, Client: client, Rec: &Recorder{}, KubeadmCheck: o.KubeadmCheck, Log: func(string, ...any) {}}
	var err error
	if l.CA, err = NewCA(dir); err != nil {
		return nil, err
	}
	l.EKS = &EKS{Rec: l.Rec}
	l.GKE = &GKE{Rec: l.Rec}
	l.AKS = &AKS{Rec: l.Rec}
	eks := httptest.NewServer(l.mirrored(l.EKS))
	gke := httptest.NewServer(l.mirrored(l.GKE))
	aks := httptest.NewUnstartedServer(l.mirrored(l.AKS))
	cert, err := l.CA.Issue("127.0.0.1")
	if err != nil {
		return nil, err
	}
	aks.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	aks.StartTLS()
	l.AKS.Base = aks.URL
	l.servers = []*httptest.Server{eks, gke, aks}
	if l.Web, err = StartWeb(l.CA, l.Rec); err != nil {
		return nil, err
	}
	if l.Proxy, err = StartProxy(cfg); err != nil {
		return nil, err
	}
	if l.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if len(o.CAPICRDs) > 0 {
		if err := l.startCAPI(context.Background(), o.CAPICRDs, o.ApplyCRDs); err != nil {
			return nil, err
		}
		l.capiCRDs = true
	}
	if o.Kwok != "" {
		if l.Checks, err = StartCheckPods(dir, filepath.Join(dir, "nodes"), o.Kwok, o.KwokStages, o.ClusterKubeconfig, client); err != nil {
			return nil, err
		}
	}
	if l.Kubeconfig, err = l.Proxy.WriteKubeconfig(filepath.Join(dir, "kube"), "runbook", "mgmt"); err != nil {
		return nil, err
	}
	shims := filepath.Join(dir, "shims")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		return nil, err
	}
	for _, p := range hostPrograms {
		s := fmt.Sprintf("#!/bin/sh\necho \"runbook lane: %s is a host command: pasted on the workstation it would run there\" >&2\nexit 127\n", p)
		if err := os.WriteFile(filepath.Join(shims, p), []byte(s), 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeNodeSSH(shims, filepath.Join(dir, "nodes")); err != nil {
		return nil, err
	}
	if err := writeClusterctlShim(shims, filepath.Join(dir, clusterctlNotExecuted)); err != nil {
		return nil, err
	}
	if v := azVersion(context.Background()); azCrashes(v) {
		real, err := exec.LookPath("az")
		if err != nil {
			return nil, err
		}
		if err := writeAzWrapper(shims, real, v, filepath.Join(dir, azNotExecuted)); err != nil {
			return nil, err
		}
		l.AzNote = azWrapperNote(v)
	}
	token := filepath.Join(dir, "gcloud-token")
	if err := os.WriteFile(token, []byte("local-gke-access-token\n"), 0o600); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "gcloud"), filepath.Join(dir, "azure")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	l.env = []string{
		"PATH=" + strings.Join([]string{shims, o.KubectlDir, o.PluginDir, os.Getenv("PATH")}, string(os.PathListSeparator)),
		"HOME=" + home, "LANG=C.UTF-8", "TERM=dumb",
		"KUBECONFIG=" + l.Kubeconfig,
		// The web stand-in for the public hosts; the local endpoints are
		// reached directly.
		"HTTPS_PROXY=" + l.Web.URL, "https_proxy=" + l.Web.URL, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"CURL_CA_BUNDLE=" + l.CA.PEM, "SSL_CERT_FILE=" + l.CA.PEM, "REQUESTS_CA_BUNDLE=" + l.CA.PEM,
		// AWS CLI: the service endpoint override
		// (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html),
		// keys of the AWS documentation's example, no retries.
		"AWS_ENDPOINT_URL=" + eks.URL, "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials"),
		// Google Cloud CLI: the API endpoint override and an access
		// token file (gcloud topic configurations: api_endpoint_overrides,
		// auth/access_token_file); prompts stay on.
		"CLOUDSDK_CONFIG=" + filepath.Join(dir, "gcloud"), "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER=" + gke.URL + "/",
		"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE=" + token, "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true", "CLOUDSDK_CORE_CHECK_GCE_METADATA=false",
		// Azure CLI: its own configuration directory, telemetry off.
		"AZURE_CONFIG_DIR=" + filepath.Join(dir, "azure"), "AZURE_CORE_COLLECT_TELEMETRY=false", "AZURE_CORE_SURVEY_MESSAGE=false",
	}
	return l, nil
}

// mirrored syncs the world after each request of h.
func (l *Lane) mirrored(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if l.sync != nil {
			l.sync()
		}
	})
}

// Close stops the endpoints.
func (l *Lane) Close() {
	for _, s := range l.servers {
		s.Close()
	}
	l.Web.Close()
	l.Proxy.Close()
	l.Checks.Close()
}

// Env is the blocks' environment, with the scenario's gcloud project.
func (l *Lane) Env(w *World) []string {
	env := append([]string(nil), l.env...)
	if w.Project != "" {
		env = append(env, "CLOUDSDK_CORE_PROJECT="+w.Project)
	}
	return env
}

// azureLogin registers the local cloud and logs the Azure CLI in once,
// as the reader of an AKS runbook is: az cloud register with the local
// Resource Manager and an ADFS authority (azure-cli's Azure Stack Hub
// set-up), az login with a service principal.
func (l *Lane) azureLogin(ctx context.Context, w *World) error {
	if l.azureReady {
		return nil
	}
	base := l.AKS.Base
	steps := [][]string{
		{"cloud", "register", "--name", "GpufleetLocal", "--endpoint-resource-manager", base + "/",
			"--endpoint-active-directory", base + "/adfs", "--endpoint-active-directory-resource-id", base + "/",
			"--endpoint-active-directory-graph-resource-id", base + "/graph/", "--endpoint-management", base + "/"},
		{"cloud", "set", "--name", "GpufleetLocal", "--profile", "latest"},
		{"login", "--service-principal", "--username", AKSClientID, "--password", AKSClientSecret, "--tenant", AKSTenant, "--output", "none"},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, "az", s...)
		cmd.Env = l.Env(w)
		cmd.Dir = l.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("az %s: %v\n%s", strings.Join(s[:2], " "), err, out)
		}
	}
	l.azureReady = true
	return nil
}

// BlockResult is what one paste of a block did.
type BlockResult struct {
	Scenario  string            `json:"scenario"`
	Block     string            `json:"block"`
	Iteration map[string]string `json:"iteration,omitempty"`
	Text      string            `json:"text"`
	Failures  []Failure         `json:"failures,omitempty"`
	Output    string            `json:"output,omitempty"`
	Calls     []Call            `json:"calls,omitempty"`
	Host      []HostCommand     `json:"host,omitempty"`
	// Problems are what the block did wrong: failed commands, host
	// commands refused, requests against the step's intent.
	Problems []string      `json:"problems,omitempty"`
	Took     time.Duration `json:"took"`
	// Stopped is the message of a block that deliberately stops the
	// reader (Stop); the scenario's paste ends there.
	Stopped string `json:"stopped,omitempty"`
	// NotReached marks a block after such a stop: not pasted, not failed.
	NotReached bool `json:"notReached,omitempty"`
	// Skipped says why the lane did not paste a block it cannot play
	// (capiSkip); not failed.
	Skipped string `json:"skipped,omitempty"`
}

// OK reports whether the block ran clean.
func (r *BlockResult) OK() bool { return len(r.Problems) == 0 }

// Key names a paste in reports: scenario, step and iteration.
func (r *BlockResult) Key() string {
	k := r.Scenario + " " + r.Block
	var it []string
	for v, x := range r.Iteration {
		it = append(it, v+"="+x)
	}
	sort.Strings(it)
	if len(it) > 0 {
		k += " " + strings.Join(it, " ")
	}
	return k
}

// Report prints a failing block with its commands, output and requests.
func (r *BlockResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", r.Key())
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	b.WriteString("  block:\n")
	for _, l := range strings.Split(strings.TrimRight(r.Text, "\n"), "\n") {
		b.WriteString("    | " + l + "\n")
	}
	if len(r.Calls) > 0 {
		b.WriteString("  requests:\n" + Format(r.Calls))
	}
	if out := strings.TrimSpace(r.Output); out != "" {
		if len(out) > 3000 {
			out = "..." + out[len(out)-3000:]
		}
		b.WriteString("  output:\n")
		for _, l := range strings.Split(out, "\n") {
			b.WriteString("    > " + l + "\n")
		}
	}
	return b.String()
}

// Scenario is one provider's runbook on one inventory.
type Scenario struct {
	Provider, Variant string
}

func (s Scenario) Name() string { return s.Provider + "/" + s.Variant }

// planStep is a step of the plan's -o json.
type planStep struct {
	Number int    `json:"number"`
	Phase  string `json:"phase"`
	Pool   string `json:"pool"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// Run runs one scenario's runbook, block by block, and returns each
// paste's result.
func (l *Lane) Run(ctx context.Context, sc Scenario) ([]*BlockResult, error) {
	w := NewWorld(sc.Provider, sc.Variant)
	l.EKS.W, l.GKE.W, l.AKS.W = w, w, w
	l.Proxy.SetVersion(func() string { w.Lock(); defer w.Unlock(); return w.GitVersion() })
	defer l.Proxy.SetVersion(nil)
	name := strings.ReplaceAll(sc.Name(), "/", "-")
	if err := writeNodeFiles(filepath.Join(l.Dir, "nodes"), w); err != nil {
		return nil, err
	}
	m := &Mirror{Client: l.Client, World: w, Name: name}
	if l.Checks != nil {
		m.KubeletPort = l.Checks.Port
	}
	if err := m.Create(ctx); err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = m.Delete(dctx)
	}()
	l.sync = func() { _ = m.Sync(ctx) }
	defer func() { l.sync = nil }()
	if sc.Provider == "aks" {
		if err := l.azureLogin(ctx, w); err != nil {
			return nil, err
		}
	}
	if sc.Provider == "capi" {
		if !l.capiCRDs {
			return nil, fmt.Errorf("Cluster API's CRDs are not served: LaneOptions.CAPICRDs is empty")
		}
		cm := &capiMirror{dyn: l.Dynamic, w: w, label: name}
		if err := cm.Create(ctx, func(ctx context.Context, ns *corev1.Namespace) error {
			_, err := l.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}); err != nil {
			return nil, err
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = cm.Delete(dctx)
		}()
		l.capi = cm
		// The topology and KubeadmControlPlane controllers act on a
		// write to the Cluster API objects before kubectl has its
		// answer, as the recording endpoints apply a provider's update.
		l.Proxy.OnWrite(func() {
			ps := cm.Reconcile(ctx)
			_ = m.Sync(ctx)
			l.capiMu.Lock()
			l.capiProblems = append(l.capiProblems, ps...)
			l.capiMu.Unlock()
		}, "cluster.x-k8s.io", "controlplane.cluster.x-k8s.io")
		defer func() { l.capi = nil; l.Proxy.OnWrite(nil) }()
	}
	work := filepath.Join(l.Dir, "scenarios", name)
	if err := os.MkdirAll(filepath.Join(work, "backup"), 0o755); err != nil {
		return nil, err
	}
	steps, err := l.render(ctx, sc, w, work)
	if err != nil {
		return nil, err
	}
	sh := &Shell{Dir: work, Env: l.Env(w), Timeout: 3 * time.Minute, Session: filepath.Join(work, ".session")}
	hosts := &Hosts{W: w, KubeadmCheck: l.KubeadmCheck, NodeFiles: filepath.Join(l.Dir, "nodes")}
	var out []*BlockResult
	l.Rec.Take()
	// stopped: a block deliberately stopped the reader; every block after
	// it is listed as not reached.
	stopped := false
	for _, st := range steps {
		if stopped {
			for _, b := range st.Blocks {
				if !b.Rollback {
					out = append(out, &BlockResult{Scenario: sc.Name(), Block: b.ID(), Text: b.Text(), NotReached: true})
				}
			}
			continue
		}
		var prev []*BlockResult // the paste of the block before an alternative
		// failed: a paste of the step's own blocks failed, which is when
		// the reader goes on to its rollback blocks; after a clean
		// step they are not pasted (an undo with nothing to undo, a
		// restore over a good upgrade).
		failed := false
		for i := 0; i < len(st.Blocks); i++ {
			b := st.Blocks[i]
			loops := b.Loops()
			// The blocks after a loop's assignment that go on with it
			// are pasted with it, once per value, in order.
			group := []*Block{b}
			for len(loops) > 0 && i+1 < len(st.Blocks) && usesLoop(st.Blocks[i+1], loops) {
				i++
				group = append(group, st.Blocks[i])
			}
			if b.Rollback && !failed {
				continue
			}
			if why := capiSkip(sc, st.Blocks, i); why != "" {
				out = append(out, &BlockResult{Scenario: sc.Name(), Block: b.ID(), Text: b.Text(), Skipped: why})
				continue
			}
			its, err := iterations(w, st, loops)
			if err != nil {
				out = append(out, &BlockResult{Scenario: sc.Name(), Block: b.ID(), Text: b.Text(), Problems: []string{err.Error()}})
				continue
			}
			for _, it := range its {
				for gi, g := range group {
					if cond := g.Condition(); cond != "" {
						w.Lock()
						run, err := chooses(cond, prev, hosts, st, g, it)
						w.Unlock()
						if err != nil {
							out = append(out, &BlockResult{Scenario: sc.Name(), Block: g.ID(), Iteration: it, Text: g.Text(), Problems: []string{err.Error()}})
							continue
						}
						if !run {
							continue
						}
					}
					ls := loops
					if gi > 0 {
						ls = nil // the assignment is in the group's first block
					}
					r := l.paste(ctx, sc, w, m, sh, hosts, st, g, ls, it)
					out = append(out, r)
					if stop, msgs := Stop(g.Lines); stop {
						stopAt(r, g, msgs)
						stopped = true
						for _, rest := range st.Blocks[i+1:] {
							if !rest.Rollback {
								out = append(out, &BlockResult{Scenario: sc.Name(), Block: rest.ID(), Text: rest.Text(), NotReached: true})
							}
						}
						break
					}
					if !r.OK() && !g.Rollback {
						failed = true
					}
					if g.Condition() == "" {
						prev = []*BlockResult{r}
					}
				}
				if stopped {
					break
				}
			}
			if stopped {
				break
			}
		}
	}
	return out, nil
}

// stopAt records a block's deliberate stop: its message, and its own
// failure (the false or exit it ends in, on the workstation or a node)
// taken out of its problems; anything else it did wrong stays.
func stopAt(r *BlockResult, b *Block, msgs []string) {
	r.Stopped = strings.Join(msgs, "; ")
	last := ""
	for i := len(b.Lines) - 1; i >= 0 && last == ""; i-- {
		if t := strings.TrimSpace(b.Lines[i]); t != "" && !strings.HasPrefix(t, "#") {
			last = t
		}
	}
	if len(last) > 40 {
		last = last[:40]
	}
	var keep []string
	for _, p := range r.Problems {
		if last != "" && (strings.HasPrefix(p, "exit ") || strings.HasPrefix(p, "host ")) && strings.Contains(p, last) {
			continue
		}
		keep = append(keep, p)
	}
	r.Problems = keep
}

// usesLoop says whether b goes on a loop of the block before it: it uses
// the loop's variable without setting it and has no condition of its own.
func usesLoop(b *Block, loops []Loop) bool {
	if len(b.Loops()) > 0 {
		return false
	}
	if h := b.StartHost; h == "the node" || strings.Contains(h, "$") {
		return true
	}
	for _, lp := range loops {
		for _, l := range b.Lines {
			if strings.Contains(l, "$"+lp.Var) || strings.Contains(l, "${"+lp.Var) {
				return true
			}
		}
	}
	return false
}

var failedWith = regexp.MustCompile(`failed with (\S+)`)

// chooses says whether the reader runs an alternative, from the outcome
// of the block before the alternatives, as the reader reads it: "Only if
// describe-addon printed a version" runs after a clean probe, "Only if
// describe-addon failed with ResourceNotFoundException" after a probe that
// failed with that error, which is then the probe's expected answer and
// no problem of it.
func chooses(cond string, probe []*BlockResult, hosts *Hosts, st *Step, b *Block, it map[string]string) (bool, error) {
	if strings.HasPrefix(cond, "the node runs ") {
		return osChoice(cond, hosts, st, b, it)
	}
	if len(probe) != 1 {
		return false, fmt.Errorf("alternative %q: no single block before it to read its condition from", cond)
	}
	p := probe[0]
	if m := failedWith.FindStringSubmatch(cond); m != nil {
		if len(p.Failures) == 0 || !strings.Contains(p.Output, m[1]) {
			return false, nil
		}
		var keep []string
		for _, pr := range p.Problems {
			if !strings.HasPrefix(pr, "exit ") && !strings.Contains(pr, m[1]) {
				keep = append(keep, pr)
			}
		}
		p.Problems = keep
		return true, nil
	}
	if strings.Contains(cond, "printed") || strings.Contains(cond, "succeeded") {
		return len(p.Failures) == 0, nil
	}
	return false, fmt.Errorf("alternative %q: the lane cannot tell when this condition holds", cond)
}

// osChoice says whether the node a block is pasted on runs the OS family
// of an alternative's condition, read from the node's OS image as the
// condition's grep of /etc/os-release would: Debian and Ubuntu take the
// apt alternative, the RHEL family the dnf one, any other OS the one for
// another OS family, which stops.
func osChoice(cond string, hosts *Hosts, st *Step, b *Block, it map[string]string) (bool, error) {
	if b.StartHost == "" {
		return false, fmt.Errorf("alternative %q: the block names no node it is pasted on", cond)
	}
	nodes, err := hosts.Nodes(b.StartHost, st.Name, it)
	if err != nil {
		return false, fmt.Errorf("alternative %q: %v", cond, err)
	}
	want := ""
	switch {
	case strings.Contains(cond, "Debian"):
		want = "apt"
	case strings.Contains(cond, "RHEL"):
		want = "dnf"
	case strings.Contains(cond, "another OS family"):
		want = "" // neither: the block that stops
	default:
		return false, fmt.Errorf("alternative %q: the lane cannot tell when this condition holds", cond)
	}
	for _, n := range nodes {
		if _, p := hosts.W.Node(n.Name); packageManagerOf(p.OS) != want {
			return false, nil
		}
	}
	return true, nil
}

// render writes the scenario's runbook and reads its steps.
func (l *Lane) render(ctx context.Context, sc Scenario, w *World, work string) ([]*Step, error) {
	args := []string{"skew", "plan", "--target", "v" + Target, "--provider", sc.Provider, "--calendar", calendarFile()}
	if sc.Provider == "kubeadm" || sc.Provider == "k3s" || sc.Provider == "rke2" {
		args = append(args, "--pool-label", "gpufleet.dev/pool")
	}
	run := func(extra ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kubectl", append(args, extra...)...)
		cmd.Env, cmd.Dir = l.Env(w), work
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			err = nil // steps at or above --fail-on: still a plan
		}
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(append(args, extra...), " "), err, errOut(err))
		}
		return string(out), nil
	}
	md, err := run("--runbook")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "runbook.md"), []byte(md), 0o644); err != nil {
		return nil, err
	}
	js, err := run("-o", "json")
	if err != nil {
		return nil, err
	}
	var plan struct {
		Steps []planStep `json:"steps"`
	}
	if err := json.Unmarshal([]byte(js), &plan); err != nil {
		return nil, err
	}
	steps, err := ParseRunbook(md)
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		for _, ps := range plan.Steps {
			if ps.Number == st.Number {
				st.From, st.To = ps.From, ps.To
				if st.To == "" && strings.HasPrefix(st.Name, "1.") {
					st.To = st.Name
				}
			}
		}
	}
	return steps, nil
}

func errOut(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// calendarFile is the release calendar the runbooks are planned with.
func calendarFile() string {
	root, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "runbook", "calendar.yaml"))
	return root
}

// paste runs one block once, as pasted with one loop value.
func (l *Lane) paste(ctx context.Context, sc Scenario, w *World, m *Mirror, sh *Shell, hosts *Hosts, st *Step, b *Block, loops []Loop, it map[string]string) *BlockResult {
	start := time.Now()
	w.Lock()
	lines := make([]string, len(b.Lines))
	for i, ln := range b.Lines {
		lines[i] = fill(w, st, sh.Dir, ln)
	}
	w.Unlock()
	lines = assign(lines, loops, it)
	r := &BlockResult{Scenario: sc.Name(), Block: b.ID(), Iteration: it, Text: strings.Join(lines, "\n") + "\n"}
	before := w.Clone()
	out, fails, err := sh.Run(ctx, b, lines, func(seg Segment, env map[string]string) {
		w.Lock()
		nodes, err := hosts.Nodes(seg.Host, st.Name, env)
		var hcs []HostCommand
		if err != nil {
			hcs = []HostCommand{{Line: seg.Marker, Err: err.Error()}}
		} else {
			hcs = hosts.Run(seg.Lines, nodes, env)
		}
		w.Unlock()
		r.Host = append(r.Host, hcs...)
		_ = m.Sync(ctx)
	})
	if err != nil {
		r.Problems = append(r.Problems, "running the block: "+err.Error())
	}
	r.Host = append(r.Host, takeAzNotExecuted(l.Dir)...)
	r.Host = append(r.Host, takeClusterctlNotExecuted(l.Dir)...)
	r.Output = out
	if l.capi != nil {
		l.capiMu.Lock()
		r.Problems = append(r.Problems, l.capiProblems...)
		l.capiProblems = nil
		l.capiMu.Unlock()
		r.Problems = append(r.Problems, l.capi.Reconcile(ctx)...)
	}
	l.EKS.Settle()
	if err := m.Sync(ctx); err != nil {
		r.Problems = append(r.Problems, "mirroring the world: "+err.Error())
	}
	r.Calls = l.Rec.Take()
	r.Failures = fails
	for _, f := range fails {
		r.Problems = append(r.Problems, fmt.Sprintf("exit %d: %s", f.Code, f.Command))
	}
	for _, h := range r.Host {
		if h.Err != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("host %s: %s: %s", h.Node, strings.TrimSpace(h.Line), h.Err))
		}
	}
	w.Lock()
	r.Problems = append(r.Problems, intent(w, before, st, r.Calls)...)
	w.Unlock()
	r.Took = time.Since(start)
	return r
}
