//go:build e2e

package faultse2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// FaultKind is what the proxy does with a matching request.
type FaultKind int

const (
	// Pass forwards the request to kube-apiserver.
	Pass FaultKind = iota
	// Status answers with Fault.Code (429, 500, 503 ...) and, when
	// Fault.RetryAfter is set, a Retry-After header.
	Status
	// Hang never answers: the request is held until the client gives up.
	Hang
)

// Fault is one answer the proxy can give instead of the apiserver's.
type Fault struct {
	Kind       FaultKind
	Code       int
	RetryAfter int // seconds; 0 means no Retry-After header
}

// TooMany is 429 with Retry-After: seconds.
func TooMany(seconds int) Fault {
	return Fault{Kind: Status, Code: http.StatusTooManyRequests, RetryAfter: seconds}
}

// Unavailable is 503, with Retry-After when seconds > 0.
func Unavailable(seconds int) Fault {
	return Fault{Kind: Status, Code: http.StatusServiceUnavailable, RetryAfter: seconds}
}

// Match selects requests by verb and path.
type Match func(r *http.Request) bool

// Rule applies a fault to the first Times matching requests (0: all of them).
type Rule struct {
	Name  string
	Match Match
	Fault Fault
	Times int

	hits int
}

// Entry is one request the proxy saw.
type Entry struct {
	Start, End time.Time
	Method     string
	Path       string // path and query
	Status     int    // what the proxy answered; 0 for a hang the client dropped
	Rule       string // the rule that faulted it, "" for pass-through

	gen int
}

// Proxy is a TLS proxy on 127.0.0.1 in front of kube-apiserver that
// injects faults per request and logs every request with timestamps.
type Proxy struct {
	srv  *httptest.Server
	stop chan struct{}

	mu    sync.Mutex
	rules []*Rule
	log   []Entry
	gen   int // counts Set calls
}

// NewProxy starts a proxy forwarding to cp's apiserver with the admin
// client credentials; it is closed when the test ends.
func NewProxy(t *testing.T, cp *harness.ControlPlane) *Proxy {
	t.Helper()
	target, err := url.Parse(cp.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1 // watches stream
	p := &Proxy{stop: make(chan struct{})}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rule, idx := p.begin(r)
		status := 0
		sw := &statusWriter{ResponseWriter: w}
		switch {
		case rule == nil:
			rp.ServeHTTP(sw, r)
			status = sw.code
		case rule.Fault.Kind == Hang:
			select {
			case <-r.Context().Done():
			case <-p.stop:
			}
		default:
			if rule.Fault.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(rule.Fault.RetryAfter))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rule.Fault.Code)
			_, _ = w.Write([]byte(statusBody(rule.Fault.Code, rule.Fault.RetryAfter)))
			status = rule.Fault.Code
		}
		p.finish(idx, status)
	}))
	p.srv.StartTLS()
	t.Cleanup(p.Close)
	return p
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// statusBody is the Status the apiserver sends with such an answer;
// like apierrors.NewTooManyRequests it repeats Retry-After in the details.
func statusBody(code, retryAfter int) string {
	reason := map[int]string{429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}[code]
	details := ""
	if retryAfter > 0 {
		details = `,"details":{"retryAfterSeconds":` + strconv.Itoa(retryAfter) + `}`
	}
	return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected by the fault proxy","reason":"` +
		reason + `","code":` + strconv.Itoa(code) + details + `}`
}

// begin logs a request and picks the first rule that matches it and has
// hits left; it returns the rule (nil: pass through) and the log index.
func (p *Proxy) begin(r *http.Request) (*Rule, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := Entry{Start: time.Now(), Method: r.Method, Path: r.URL.RequestURI(), gen: p.gen}
	var picked *Rule
	for _, rule := range p.rules {
		if rule.Times > 0 && rule.hits >= rule.Times {
			continue
		}
		if rule.Match(r) {
			rule.hits++
			picked = rule
			e.Rule = rule.Name
			break
		}
	}
	p.log = append(p.log, e)
	return picked, len(p.log) - 1
}

// finish records when and how a request ended; requests logged before the
// last Set are ignored.
func (p *Proxy) finish(idx, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idx < len(p.log) && p.log[idx].gen == p.gen {
		p.log[idx].End = time.Now()
		p.log[idx].Status = status
	}
}

// Close stops the proxy, releasing hanging requests first.
func (p *Proxy) Close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// Set replaces the rules and clears the log.
func (p *Proxy) Set(rules ...*Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = rules
	p.log = nil
	p.gen++
}

// Hits returns how many requests each rule faulted so far.
func (p *Proxy) Hits(r *Rule) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.hits
}

// Log returns a copy of the requests seen since the last Set.
func (p *Proxy) Log() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.log...)
}

// URL is the proxy's https URL.
func (p *Proxy) URL() string { return p.srv.URL }

// Kubeconfig writes a kubeconfig that points at the proxy (skipping TLS
// verification of the test certificate; the proxy adds the credentials).
func (p *Proxy) Kubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["faults"] = &clientcmdapi.Cluster{Server: p.URL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["faults"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["faults"] = &clientcmdapi.Context{Cluster: "faults", AuthInfo: "faults", Namespace: "default"}
	cfg.CurrentContext = "faults"
	path := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Any matches every request.
func Any(*http.Request) bool { return true }

// Verb matches requests with one of the HTTP methods.
func Verb(methods ...string) Match {
	return func(r *http.Request) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		return false
	}
}

// IsList matches GETs of a resource collection (not discovery, /version or
// a single object): /api/v1/<res>, /api/v1/namespaces/<ns>/<res>,
// /apis/<g>/<v>/<res>, /apis/<g>/<v>/namespaces/<ns>/<res>. Watches are
// excluded, except watch-list streams (sendInitialEvents=true), which read
// the collection as a list does.
func IsList(r *http.Request) bool {
	q := r.URL.Query()
	if r.Method != http.MethodGet || q.Get("watch") == "true" && q.Get("sendInitialEvents") != "true" {
		return false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return false
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
		if len(rest) == 0 {
			return false // GET of a namespace object
		}
	}
	return len(rest) == 1
}

// PathSuffix matches requests whose path ends with s, with any of methods
// (none: any method).
func PathSuffix(s string, methods ...string) Match {
	return func(r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, s) {
			return false
		}
		return len(methods) == 0 || Verb(methods...)(r)
	}
}
