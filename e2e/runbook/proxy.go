package runbooke2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy stands in front of the local apiserver for kubectl and the
// plugins: it answers /version with the version the scenario's provider
// reports (the control plane the recording endpoints and host commands
// moved), and passes everything else through with the admin's
// credentials.
type Proxy struct {
	URL string
	srv *http.Server
	mu  sync.Mutex
	// version returns the gitVersion to report.
	version func() string
	// written, when set, runs after a write to one of the API groups
	// writeGroups names succeeded, before its client has the answer: the
	// lane's controller stand-ins act on it as soon as a real controller
	// would start to.
	written     func()
	writeGroups []string
}

// OnWrite runs f after each successful write to the API groups named
// (nil: none).
func (p *Proxy) OnWrite(f func(), groups ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written, p.writeGroups = f, groups
}

// hookFor returns the write hook for r, or nil.
func (p *Proxy) hookFor(r *http.Request) func() {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.writeGroups {
		if strings.HasPrefix(r.URL.Path, "/apis/"+g+"/") {
			return p.written
		}
	}
	return nil
}

// SetVersion points /version at a scenario's world.
func (p *Proxy) SetVersion(f func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.version = f
}

// StartProxy serves on a free loopback port.
func StartProxy(cfg *rest.Config) (*Proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1
	p := &Proxy{}
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		f := p.version
		p.mu.Unlock()
		if f == nil {
			rp.ServeHTTP(w, r)
			return
		}
		v := f()
		m := Minor(v)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"major": "1", "minor": m[2:], "gitVersion": v, "gitCommit": "0000000000000000000000000000000000000000",
			"gitTreeState": "clean", "buildDate": "2026-11-20T00:00:00Z", "goVersion": "go1.26.0", "compiler": "gc", "platform": "linux/amd64",
		})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		hook := p.hookFor(r)
		if hook == nil {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if rec.Code < 300 {
			hook()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.URL = "http://" + l.Addr().String()
	p.srv = &http.Server{Handler: mux}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() { _ = p.srv.Close() }

// WriteKubeconfig writes a kubeconfig whose contexts reach the proxy: the
// workload cluster's (current) and, for Cluster API, the management
// cluster's (the same plane).
func (p *Proxy) WriteKubeconfig(dir string, contexts ...string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: p.URL}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	for _, c := range contexts {
		cfg.Contexts[c] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	}
	cfg.CurrentContext = contexts[0]
	path := filepath.Join(dir, "kubeconfig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}
