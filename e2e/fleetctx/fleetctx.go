// Package fleetctx builds what a fleet sweep meets: a kubeconfig of many
// contexts, some on live control planes and some dead, and the dead ones'
// endpoints: closed ports that refuse, listeners that accept the TCP
// connection and never answer the TLS handshake, and TLS servers that
// never answer the request. Each hanging endpoint counts its connections
// and times how long a client waited before giving up, so a test can
// prove a sweep let go of them within its --request-timeout. Like
// plugintest it never touches a cluster itself.
package fleetctx

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Endpoints are the dead contexts' addresses.
type Endpoints struct {
	// Refused are closed ports (refused-NN).
	Refused []string
	// Hanging are listeners that never answer (hang-tcp-NN, hang-tls-NN).
	Hanging []*HangEndpoint
}

// HangEndpoint is a listener of one hanging context. It counts the
// connections since Reset and, where it reads the request (hang-tls),
// times how long the client waited for an answer before giving up (an
// HTTP/2 stream reset or a closed connection). The connections themselves
// may outlive the request: the client's transport keeps them for reuse,
// or finishes a handshake it no longer waits for, until the process ends.
type HangEndpoint struct {
	Name, Addr string
	mu         sync.Mutex
	seen       int
	waiting    int
	held       time.Duration
}

func (h *HangEndpoint) accepted() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
}

// request waits until the client gives the request up.
func (h *HangEndpoint) request(r *http.Request) {
	began := time.Now()
	h.mu.Lock()
	h.waiting++
	h.mu.Unlock()
	<-r.Context().Done()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting--
	h.held = max(h.held, time.Since(began))
}

// NewEndpoints opens refused closed ports, hangTCP listeners that never
// answer the TLS handshake and hangTLS servers that never answer the
// request, all on 127.0.0.1; they close when the test ends.
func NewEndpoints(t testing.TB, refused, hangTCP, hangTLS int) *Endpoints {
	t.Helper()
	e := &Endpoints{}
	for range refused {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		e.Refused = append(e.Refused, l.Addr().String())
		l.Close()
	}
	for i := range hangTCP {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h := &HangEndpoint{Name: fmt.Sprintf("hang-tcp-%02d", i), Addr: l.Addr().String()}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				h.accepted()
				go func() {
					// Never answer; the client's close ends the read.
					_, _ = io.Copy(io.Discard, c)
					c.Close()
				}()
			}
		}()
		e.Hanging = append(e.Hanging, h)
	}
	for i := range hangTLS {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h := &HangEndpoint{Name: fmt.Sprintf("hang-tls-%02d", i), Addr: l.Addr().String()}
		// Never answer: wait for the client to give up.
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.request(r) }))
		srv.Listener.Close()
		srv.Listener = l
		srv.EnableHTTP2 = true
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				h.accepted()
			}
		}
		srv.StartTLS()
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		e.Hanging = append(e.Hanging, h)
	}
	return e
}

// Names are the dead contexts' names.
func (e *Endpoints) Names() []string {
	var out []string
	for i := range e.Refused {
		out = append(out, fmt.Sprintf("refused-%02d", i))
	}
	for _, h := range e.Hanging {
		out = append(out, h.Name)
	}
	return out
}

// Reset starts the endpoints' counts afresh (before a sweep).
func (e *Endpoints) Reset() {
	for _, h := range e.Hanging {
		h.mu.Lock()
		h.seen, h.held = 0, 0
		h.mu.Unlock()
	}
}

// Settled returns the longest a request to a hanging endpoint was waited
// for since Reset, and an error when an endpoint was never contacted or a
// request is still waited for after the process ended.
func (e *Endpoints) Settled() (time.Duration, error) {
	time.Sleep(50 * time.Millisecond) // the resets and closes reach the listeners
	var longest time.Duration
	var problems []string
	for _, h := range e.Hanging {
		h.mu.Lock()
		switch {
		case h.seen == 0:
			problems = append(problems, h.Name+" never contacted")
		case h.waiting > 0:
			problems = append(problems, fmt.Sprintf("%s still has %d request(s) waiting", h.Name, h.waiting))
		}
		longest = max(longest, h.held)
		h.mu.Unlock()
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return longest, fmt.Errorf("hanging endpoints: %s", strings.Join(problems, "; "))
	}
	return longest, nil
}

// Kubeconfig is a kubeconfig being assembled: contexts on live control
// planes (each a cluster entry of its own, as distinct clusters have) and
// on dead endpoints.
type Kubeconfig struct {
	cfg *clientcmdapi.Config
}

// NewKubeconfig starts an empty kubeconfig.
func NewKubeconfig() *Kubeconfig { return &Kubeconfig{cfg: clientcmdapi.NewConfig()} }

// AddLive adds context name reaching the current context of the
// kubeconfig at adminPath (a control plane's admin kubeconfig), as its
// user; impersonate, when set, makes the context act as that user
// (kubectl --as), to be refused what RBAC does not grant it.
func (k *Kubeconfig) AddLive(t testing.TB, name, adminPath, impersonate string) {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(adminPath)
	if err != nil {
		t.Fatal(err)
	}
	live := admin.Contexts[admin.CurrentContext]
	auth := *admin.AuthInfos[live.AuthInfo]
	auth.Impersonate = impersonate
	cluster := *admin.Clusters[live.Cluster]
	k.cfg.AuthInfos[name] = &auth
	k.cfg.Clusters[name] = &cluster
	k.cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	if k.cfg.CurrentContext == "" {
		k.cfg.CurrentContext = name
	}
}

// AddDead adds a context on addr, a dead endpoint.
func (k *Kubeconfig) AddDead(name, addr string) {
	k.cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + addr, InsecureSkipTLSVerify: true}
	k.cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "unused"}
	k.cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
}

// AddEndpoints adds every endpoint of e as a context named as Names does.
func (k *Kubeconfig) AddEndpoints(e *Endpoints) {
	for i, addr := range e.Refused {
		k.AddDead(fmt.Sprintf("refused-%02d", i), addr)
	}
	for _, h := range e.Hanging {
		k.AddDead(h.Name, h.Addr)
	}
}

// Write writes the kubeconfig into the test's temporary directory and
// returns its path.
func (k *Kubeconfig) Write(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*k.cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
