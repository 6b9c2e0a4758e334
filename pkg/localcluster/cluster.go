package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultRuntimeConfig is the --runtime-config every control plane gets: the
// beta APIs the plugins are tested against (resource.k8s.io/v1beta1 is
// deprecated in 1.37 and answers with the k8s.io/deprecated audit annotation).
var DefaultRuntimeConfig = []string{
	"resource.k8s.io/v1beta1=true",
	"resource.k8s.io/v1beta2=true",
	"storagemigration.k8s.io/v1beta1=true",
}

// Component names, as used for log files and by LogPath.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
	Kueue                 = "kueue"
	JobSet                = "jobset"
)

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds certificates, data, kubeconfigs and logs.
	Dir string
	// Kubeconfig is the admin kubeconfig (system:masters client certificate).
	Kubeconfig string
	// Host is the apiserver URL, https://127.0.0.1:<port>.
	Host string
	// EtcdEndpoint is etcd's client URL, for tests that read storage directly.
	EtcdEndpoint string
	// AuditLogPath is the apiserver audit log (JSON lines, Metadata level).
	AuditLogPath string
	// CACertPath is the cluster CA certificate.
	CACertPath string
	// Config is the admin rest.Config.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Binaries are the binaries in use.
	Binaries Binaries
	// Options are the options the plane started with.
	Options Options

	pki *pki
	// mu guards ports, procs and order: components start concurrently.
	mu       sync.Mutex
	ports    map[string]int
	procs    map[string]*process
	order    []string
	stopOnce sync.Once
	stopErr  error
	tempDir  bool
}

// Start builds missing binaries and starts a control plane. The caller must
// call Stop (or Close); ctx bounds start-up only. When a component does not
// start, the error is a *ComponentError naming it and its log.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	began := time.Now()
	bins, err := EnsureBinaries(opts)
	if err != nil {
		return nil, err
	}
	cp := &Cluster{Binaries: bins, Options: opts, ports: map[string]int{}, procs: map[string]*process{}}
	if opts.Dir != "" {
		cp.Dir = opts.Dir
		if err := os.MkdirAll(cp.Dir, 0o700); err != nil {
			return nil, err
		}
	} else {
		if cp.Dir, err = os.MkdirTemp("", "gpufleet-e2e-"); err != nil {
			return nil, err
		}
		cp.tempDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.startTimeout())
	defer cancel()

	for _, d := range []string{"pki", "etcd", "logs", "kubeconfig", "certs"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if cp.pki, err = newPKI(filepath.Join(cp.Dir, "pki")); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	cp.CACertPath = cp.pki.caPath
	cp.AuditLogPath = filepath.Join(cp.Dir, "logs", "audit.log")

	logf(opts, "starting control plane in %s", cp.Dir)
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, true); err != nil {
		return nil, err
	}
	if err := cp.startControllers(ctx); err != nil {
		return nil, err
	}
	if opts.JobSet {
		if err := cp.startJobSet(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Kueue {
		if err := cp.startKueue(ctx); err != nil {
			return nil, err
		}
	}
	logf(opts, "control plane ready at %s in %s (kubeconfig %s)", cp.Host, time.Since(began).Round(100*time.Millisecond), cp.Kubeconfig)
	return cp, nil
}

// Attach returns a Cluster for a control plane another process runs (the
// demo's, through its admin kubeconfig): Config, Client, Kubeconfig and
// Host are set, and it starts and stops nothing.
func Attach(kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Kubeconfig: kubeconfig, Host: cfg.Host, Config: cfg, Client: client, Binaries: BinariesIn(CacheDir()),
		ports: map[string]int{}, procs: map[string]*process{}}, nil
}

// setAPIServerPort points Host, the admin kubeconfig, Config and Client at
// the apiserver's port.
func (cp *Cluster) setAPIServerPort(port int) error {
	cp.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	var err error
	if cp.Kubeconfig, err = cp.writeKubeconfig("admin", "gpufleet-e2e-admin"); err != nil {
		return err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return err
	}
	cp.Config.QPS, cp.Config.Burst = 100, 200
	cp.Client, err = kubernetes.NewForConfig(cp.Config)
	return err
}

// writeKubeconfig writes a kubeconfig with a client certificate for user
// (group system:masters) and returns its path.
func (cp *Cluster) writeKubeconfig(name, user string) (string, error) {
	return cp.writeUserKubeconfig(name, user, []string{"system:masters"})
}

// UserKubeconfig writes a kubeconfig that authenticates as user in groups
// (a client certificate the cluster's CA signs: its common name is the
// user, its organizations the groups) and returns its path. The user has
// what RBAC grants it and nothing else.
func (cp *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	if cp.pki == nil {
		return "", fmt.Errorf("control plane at %s was attached, not started: no CA to sign for %s", cp.Host, user)
	}
	return cp.writeUserKubeconfig("user-"+user, user, groups)
}

func (cp *Cluster) writeUserKubeconfig(name, user string, groups []string) (string, error) {
	pair, err := newKeyPair(certSpec{commonName: user, organization: groups, usages: clientAuth}, cp.pki.ca)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gpufleet-e2e"] = &clientcmdapi.Cluster{Server: cp.Host, CertificateAuthorityData: cp.pki.ca.CertPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pair.CertPEM, ClientKeyData: pair.KeyPEM}
	cfg.Contexts["gpufleet-e2e"] = &clientcmdapi.Context{Cluster: "gpufleet-e2e", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "gpufleet-e2e"
	path := filepath.Join(cp.Dir, "kubeconfig", name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

func (cp *Cluster) logPath(name string) string {
	return filepath.Join(cp.Dir, "logs", name+".log")
}

// LogPath returns the log file of a component (Etcd, KubeAPIServer, ...).
func (cp *Cluster) LogPath(component string) string { return cp.logPath(component) }

// Pids returns the process id of every running component.
func (cp *Cluster) Pids() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := map[string]int{}
	for name, p := range cp.procs {
		if pid := p.pid(); pid > 0 {
			out[name] = pid
		}
	}
	return out
}

// run starts a component and records it for Stop and in the state file
// (Reap).
func (cp *Cluster) run(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, bin: bin, args: args, logPath: cp.logPath(name)}
	if err := p.start(); err != nil {
		return nil, err
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if _, ok := cp.procs[name]; !ok {
		cp.order = append(cp.order, name)
	}
	cp.procs[name] = p
	if err := cp.writeStateLocked(); err != nil {
		return p, err
	}
	return p, nil
}

// proc returns the component's process, if it was started.
func (cp *Cluster) proc(name string) (*process, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	p, ok := cp.procs[name]
	return p, ok
}

// waitFor polls check until it returns nil, the process exits or ctx ends;
// on failure the error carries the tail of the process log.
func (cp *Cluster) waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	var last error
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if dead, werr := p.exited(); dead {
			return fmt.Errorf("%s exited before %s (%v); log %s ends with:\n%s", p.name, what, werr, p.logPath, p.tail(4000))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: timed out waiting for %s (last error: %v); log %s ends with:\n%s", p.name, what, last, p.logPath, p.tail(4000))
		case <-tick.C:
		}
	}
}

func httpGetOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// loopbackHTTP is for the plain-HTTP health endpoints; a port held by
// something that accepts and never answers must not hang a start.
var loopbackHTTP = &http.Client{Timeout: 5 * time.Second}

var insecureLoopback = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed loopback health endpoints
}

func (cp *Cluster) startEtcd(ctx context.Context) error {
	data := filepath.Join(cp.Dir, "etcd")
	first := true
	args := func(context.Context) ([]string, error) {
		// A failed first try may have left a member behind with its ports.
		if !first {
			if err := os.RemoveAll(data); err != nil {
				return nil, err
			}
		}
		first = false
		cp.EtcdEndpoint = "http://127.0.0.1:" + strconv.Itoa(cp.port(Etcd))
		peer := "http://127.0.0.1:" + strconv.Itoa(cp.port(portEtcdPeer))
		return []string{
			"--name=default",
			"--data-dir=" + data,
			"--listen-client-urls=" + cp.EtcdEndpoint,
			"--advertise-client-urls=" + cp.EtcdEndpoint,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, nil
	}
	return cp.startComponent(ctx, component{name: Etcd, bin: cp.Binaries.Etcd, args: args,
		ready: func(ctx context.Context, p *process) error {
			return cp.waitFor(ctx, p, "health", func(ctx context.Context) error {
				return httpGetOK(ctx, loopbackHTTP, cp.EtcdEndpoint+"/health")
			})
		}})
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
# The control plane's own components and the health probes are noise.
- level: None
  users: ["system:kube-controller-manager", "system:kube-scheduler", "kwok", "kueue", "jobset", "system:apiserver"]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
- level: None
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
# Everything else at Metadata, so audit annotations such as
# k8s.io/deprecated and k8s.io/removed-release are recorded with the caller.
- level: Metadata
`

func (cp *Cluster) apiServerArgs() ([]string, error) {
	policy := filepath.Join(cp.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	runtimeConfig := append(append([]string{}, DefaultRuntimeConfig...), cp.Options.RuntimeConfig...)
	args := []string{
		"--etcd-servers=" + cp.EtcdEndpoint,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(cp.port(KubeAPIServer)),
		"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
		"--tls-cert-file=" + cp.pki.servingCert,
		"--tls-private-key-file=" + cp.pki.servingKey,
		"--client-ca-file=" + cp.pki.caPath,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.saPubPath,
		"--service-account-signing-key-file=" + cp.pki.saKeyPath,
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--audit-log-path=" + cp.AuditLogPath,
		"--audit-policy-file=" + policy,
		"--audit-log-maxsize=0",
		"--runtime-config=" + strings.Join(runtimeConfig, ","),
		"--profiling=false",
	}
	if fg := featureGateFlag(cp.Options.FeatureGates); fg != "" {
		args = append(args, fg)
	}
	return append(args, cp.Options.APIServerArgs...), nil
}

func featureGateFlag(gates map[string]bool) string {
	if len(gates) == 0 {
		return ""
	}
	var kv []string
	for k, v := range gates {
		kv = append(kv, k+"="+strconv.FormatBool(v))
	}
	sort.Strings(kv)
	return "--feature-gates=" + strings.Join(kv, ",")
}

// StartAPIServer starts kube-apiserver again, after StopAPIServer, on the
// port it had (the other components' kubeconfigs point there), and waits
// until /readyz answers ok.
func (cp *Cluster) StartAPIServer(ctx context.Context) error {
	return cp.startAPIServer(ctx, false)
}

// startAPIServer starts kube-apiserver. At first start (fresh) a port it
// cannot bind is replaced with a fresh one, and Host and the admin
// kubeconfig follow; later its port is kept, and taken, tried again.
func (cp *Cluster) startAPIServer(ctx context.Context, fresh bool) error {
	if p, ok := cp.proc(KubeAPIServer); ok {
		if dead, _ := p.exited(); !dead {
			return errors.New("kube-apiserver is already running")
		}
	}
	args := func(context.Context) ([]string, error) {
		if fresh {
			if err := cp.setAPIServerPort(cp.port(KubeAPIServer)); err != nil {
				return nil, err
			}
		}
		return cp.apiServerArgs()
	}
	return cp.startComponent(ctx, component{name: KubeAPIServer, bin: cp.Binaries.KubeAPIServer, args: args, keepPorts: !fresh,
		ready: func(ctx context.Context, p *process) error {
			rc := cp.Client.Discovery().RESTClient()
			return cp.waitFor(ctx, p, "/readyz", func(ctx context.Context) error {
				body, err := rc.Get().AbsPath("/readyz").Timeout(5 * time.Second).DoRaw(ctx)
				if err != nil {
					return fmt.Errorf("%v: %s", err, lastLines(string(body), 3))
				}
				return nil
			})
		}})
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a
// timeout); the other components keep running and retry.
func (cp *Cluster) StopAPIServer() {
	if p, ok := cp.proc(KubeAPIServer); ok {
		p.stop(stopTimeout)
	}
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (cp *Cluster) KillAPIServer() {
	if p, ok := cp.proc(KubeAPIServer); ok {
		p.stop(0)
	}
}

// RestartAPIServer stops and starts kube-apiserver, keeping etcd and its
// data, and waits until it is ready again.
func (cp *Cluster) RestartAPIServer(ctx context.Context) error {
	cp.StopAPIServer()
	return cp.StartAPIServer(ctx)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func (cp *Cluster) startControllers(ctx context.Context) error {
	kcmKubeconfig, err := cp.writeKubeconfig(KubeControllerManager, "system:kube-controller-manager")
	if err != nil {
		return err
	}
	schedKubeconfig, err := cp.writeKubeconfig(KubeScheduler, "system:kube-scheduler")
	if err != nil {
		return err
	}
	kwokKubeconfig, err := cp.writeKubeconfig(Kwok, "kwok")
	if err != nil {
		return err
	}
	caKeyPath := filepath.Join(cp.Dir, "pki", "ca.key")
	fg := featureGateFlag(cp.Options.FeatureGates)
	kcmArgs := func(context.Context) ([]string, error) {
		args := []string{
			"--kubeconfig=" + kcmKubeconfig,
			"--authentication-kubeconfig=" + kcmKubeconfig,
			"--authorization-kubeconfig=" + kcmKubeconfig,
			"--leader-elect=false",
			"--controllers=*",
			"--service-account-private-key-file=" + cp.pki.saKeyPath,
			"--root-ca-file=" + cp.pki.caPath,
			"--cluster-signing-cert-file=" + cp.pki.caPath,
			"--cluster-signing-key-file=" + caKeyPath,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(cp.port(KubeControllerManager)),
			"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
			"--profiling=false",
		}
		if fg != "" {
			args = append(args, fg)
		}
		return append(args, cp.Options.ControllerManagerArgs...), nil
	}
	schedArgs := func(context.Context) ([]string, error) {
		args := []string{
			"--kubeconfig=" + schedKubeconfig,
			"--authentication-kubeconfig=" + schedKubeconfig,
			"--authorization-kubeconfig=" + schedKubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(cp.port(KubeScheduler)),
			"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
			"--profiling=false",
		}
		if fg != "" {
			args = append(args, fg)
		}
		return args, nil
	}
	healthz := func(name string) func(context.Context, *process) error {
		return func(ctx context.Context, p *process) error {
			return cp.waitFor(ctx, p, "/healthz", func(ctx context.Context) error {
				return httpGetOK(ctx, insecureLoopback, "https://127.0.0.1:"+strconv.Itoa(cp.port(name))+"/healthz")
			})
		}
	}
	stages, err := cp.writeKwokStages()
	if err != nil {
		return err
	}
	kwok, err := cp.run(Kwok, cp.Binaries.Kwok,
		"--kubeconfig="+kwokKubeconfig,
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.0.0.0/16",
		"--node-ip=10.0.0.1",
		"--config="+stages,
	)
	if err != nil {
		return err
	}
	// The two start side by side, each restarted on its own when its port
	// turns out taken.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return cp.startComponent(gctx, component{name: KubeControllerManager, bin: cp.Binaries.KubeControllerManager, args: kcmArgs, ready: healthz(KubeControllerManager)})
	})
	g.Go(func() error {
		return cp.startComponent(gctx, component{name: KubeScheduler, bin: cp.Binaries.KubeScheduler, args: schedArgs, ready: healthz(KubeScheduler)})
	})
	if err := g.Wait(); err != nil {
		return err
	}
	// The service-account controller creating "default" proves the
	// controller manager is working, and pods need that account.
	kcm, _ := cp.proc(KubeControllerManager)
	if err := cp.waitFor(ctx, kcm, "the default service account", func(ctx context.Context) error {
		_, err := cp.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", getOpts)
		return err
	}); err != nil {
		return &ComponentError{Component: KubeControllerManager, Log: kcm.logPath, Err: err}
	}
	if dead, werr := kwok.exited(); dead {
		return &ComponentError{Component: Kwok, Log: kwok.logPath, Err: fmt.Errorf("kwok exited (%v); log %s ends with:\n%s", werr, kwok.logPath, kwok.tail(4000))}
	}
	return nil
}

// Stop stops every component in reverse start order, then removes the
// working directory unless Options.KeepDir is set. It is idempotent. Close
// does the same and also says whether every port was released.
func (cp *Cluster) Stop() { _ = cp.Close() }

// Close stops every component (clients first, in parallel; then the
// apiserver; etcd last), waits until each has exited and its ports can be
// bound again, then removes the working directory unless Options.KeepDir
// is set. It returns an error naming any port still taken. It is
// idempotent.
func (cp *Cluster) Close() error {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		order := append([]string(nil), cp.order...)
		procs := make(map[string]*process, len(cp.procs))
		for k, v := range cp.procs {
			procs[k] = v
		}
		var ports []int
		for _, p := range cp.ports {
			ports = append(ports, p)
		}
		cp.mu.Unlock()
		var wg sync.WaitGroup
		for _, name := range order {
			if name == KubeAPIServer || name == Etcd {
				continue
			}
			wg.Add(1)
			go func(p *process) {
				defer wg.Done()
				p.stop(5 * time.Second)
			}(procs[name])
		}
		wg.Wait()
		// Nothing needs a graceful apiserver shutdown at teardown, and
		// one takes tens of seconds.
		if p, ok := procs[KubeAPIServer]; ok {
			p.stop(2 * time.Second)
		}
		if p, ok := procs[Etcd]; ok {
			p.stop(5 * time.Second)
		}
		// Every process has been waited for; a port still taken now is held
		// by something else, and the next start would trip on it.
		cp.stopErr = WaitPortsFree(ports, 10*time.Second)
		if cp.stopErr != nil {
			logf(cp.Options, "%v", cp.stopErr)
		}
		releasePorts(ports...)
		if cp.tempDir && !cp.Options.KeepDir && cp.Dir != "" {
			_ = os.RemoveAll(cp.Dir)
		} else if cp.Dir != "" {
			_ = os.Remove(statePath(cp.Dir))
		}
	})
	return cp.stopErr
}

// Exited reports whether a component has ended, and with which error.
func (cp *Cluster) Exited(component string) (bool, error) {
	p, ok := cp.proc(component)
	if !ok {
		return true, errors.New("not started")
	}
	return p.exited()
}
