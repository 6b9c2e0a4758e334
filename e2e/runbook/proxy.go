package runbooke2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
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
	mux.Handle("/", rp)
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
