package runbooke2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

// CA issues the certificates of the lane's HTTPS endpoints (Azure
// Resource Manager, and the web proxy's stand-ins for public hosts); the
// CLIs trust it through REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
// SSL_CERT_FILE.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate file.
	PEM  string
	mu   sync.Mutex
	next int64
}

// NewCA makes a CA and writes its certificate to dir/ca.pem.
func NewCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpufleet runbook lane CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	path := dir + "/ca.pem"
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: path, next: 2}, nil
}

// Issue returns a serving certificate for a host name or IP.
func (c *CA) Issue(host string) (tls.Certificate, error) {
	c.mu.Lock()
	serial := c.next
	c.next++
	c.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// Web is an HTTPS proxy standing in for the public web the runbook
// reads from a workstation (HTTPS_PROXY): it answers the release markers
// of dl.k8s.io (release/stable-X.Y.txt, the newest patch of a minor, as
// kubeadm resolves version labels: kubernetes
// cmd/kubeadm/app/util/version.go) from the lane's catalog, records every
// request, and refuses every other host, so that a block that needs
// another download fails and names it.
type Web struct {
	URL string
	Rec *Recorder
	ca  *CA
	ln  net.Listener
}

var stableMarker = regexp.MustCompile(`^/release/stable-(1\.\d+)\.txt$`)

// StartWeb serves on a free loopback port.
func StartWeb(ca *CA, rec *Recorder) (*Web, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &Web{URL: "http://" + ln.Addr().String(), Rec: rec, ca: ca, ln: ln}
	go w.serve()
	return w, nil
}

// Close stops the proxy.
func (w *Web) Close() { _ = w.ln.Close() }

func (w *Web) serve() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		go w.conn(c)
	}
}

func (w *Web) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host := req.URL.Hostname()
	if req.Method != http.MethodConnect {
		w.Rec.Add(Call{Service: "web", Op: "GET", Method: req.Method, Path: req.URL.String(), Status: http.StatusForbidden, Error: "plain HTTP is not served"})
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if host != "dl.k8s.io" && host != "github.com" && host != releaseAssetHost && host != rawGitHub && !ecrRegistry.MatchString(host) {
		w.Rec.Add(Call{Service: "web", Op: "CONNECT", Method: "CONNECT", Path: req.Host, Status: http.StatusForbidden,
			Error: host + " is not reachable from the lane: the block needs a download the lane cannot check"})
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	cert, err := w.ca.Issue(host)
	if err != nil {
		return
	}
	tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err := tc.Handshake(); err != nil {
		return
	}
	tbr := bufio.NewReader(tc)
	for {
		r, err := http.ReadRequest(tbr)
		if err != nil {
			return
		}
		call := Call{Service: "web", Op: "GET " + host, Method: r.Method, Path: "https://" + host + r.URL.Path}
		resp := &http.Response{StatusCode: http.StatusNotFound, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}}
		body := "not found\n"
		ctype := "text/plain"
		switch host {
		case "dl.k8s.io":
			if m := stableMarker.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
				if _, ok := patches[m[1]]; ok {
					resp.StatusCode, body = http.StatusOK, "v"+Patch(m[1])
				}
			}
		case "github.com":
			if m := etcdAsset.FindStringSubmatch(r.URL.Path); m != nil && m[1] == m[2] && r.Method == http.MethodGet {
				// GitHub answers a release asset's download URL with a
				// redirect to its asset host (curl needs -L).
				resp.StatusCode, body = http.StatusFound, ""
				resp.Header.Set("Location", "https://"+releaseAssetHost+"/etcd-io/etcd/"+path.Base(r.URL.Path))
			}
			if _, ok := serverRelease(r.URL.Path); ok && r.Method == http.MethodGet {
				resp.StatusCode, body = http.StatusFound, ""
				resp.Header.Set("Location", "https://"+releaseAssetHost+r.URL.Path)
			}
		default:
			if ecrRegistry.MatchString(host) {
				var hdr http.Header
				resp.StatusCode, body, hdr = ecrManifest(r)
				for k, v := range hdr {
					resp.Header[k] = v
				}
				ctype = resp.Header.Get("Content-Type")
				if r.Method == http.MethodHead {
					body = ""
				}
			}
		case rawGitHub:
			if m := vpcCNIManifest.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
				for minor := range patches {
					if v := eksAddonVersion("vpc-cni", minor); strings.SplitN(v, "-", 2)[0] == m[1] {
						resp.StatusCode, body = http.StatusOK, fmt.Sprintf(vpcCNIDaemonSet, m[1])
					}
				}
			}
		case releaseAssetHost:
			if m := etcdAssetFile.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet && etcdReleases[m[1]] {
				if b, err := etcdArchive(m[1], m[2]); err == nil {
					resp.StatusCode, body, ctype = http.StatusOK, string(b), "application/octet-stream"
				}
			}
			if b, ok := serverRelease(r.URL.Path); ok && r.Method == http.MethodGet {
				resp.StatusCode, body, ctype = http.StatusOK, b, "application/octet-stream"
			}
		}
		call.Status = resp.StatusCode
		if resp.StatusCode >= 400 {
			call.Error = "no such download in the lane's web"
		}
		w.Rec.Add(call)
		if ctype != "" {
			resp.Header.Set("Content-Type", ctype)
		}
		resp.ContentLength = int64(len(body))
		resp.Body = readCloser{strings.NewReader(body)}
		_ = resp.Write(tc)
		if r.Close {
			return
		}
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// ecrRegistry is an ECR private registry's host
// (ACCOUNT.dkr.ecr.REGION.amazonaws.com).
var ecrRegistry = regexp.MustCompile(`^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com$`)

// ecrManifestPath is the registry HTTP API's manifest by tag
// (GET or HEAD /v2/NAME/manifests/REFERENCE, OCI distribution spec v1.1).
var ecrManifestPath = regexp.MustCompile(`^/v2/(.+)/manifests/([^/]+)$`)

// ecrManifest answers a manifest request to an EKS add-on image
// repository: basic authentication as user AWS with the password of
// aws ecr get-login-password (ECR's registry_auth.html), the tags of the
// lane's add-on catalog (eks/kube-proxy, eks/coredns, amazon-k8s-cni of
// every minor the lane plans), a Docker manifest list with its digest;
// an unknown tag is MANIFEST_UNKNOWN (the distribution spec's error code)
// with 404, and without the credentials 401.
func ecrManifest(r *http.Request) (int, string, http.Header) {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	errBody := func(code, msg string) string {
		return fmt.Sprintf(`{"errors":[{"code":%q,"message":%q}]}`, code, msg)
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != "AWS" || pass != ECRPassword {
		h.Set("Www-Authenticate", fmt.Sprintf(`Basic realm="https://%s/",service="ecr.amazonaws.com"`, r.Host))
		return http.StatusUnauthorized, errBody("DENIED", "Not Authorized"), h
	}
	m := ecrManifestPath.FindStringSubmatch(r.URL.Path)
	if m == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return http.StatusNotFound, errBody("NAME_UNKNOWN", "The repository does not exist"), h
	}
	addon := map[string]string{"eks/kube-proxy": "kube-proxy", "eks/coredns": "coredns", "amazon-k8s-cni": "vpc-cni"}[m[1]]
	if addon == "" {
		return http.StatusNotFound, errBody("NAME_UNKNOWN", "The repository with name '"+m[1]+"' does not exist in the registry"), h
	}
	for minor := range patches {
		if eksAddonVersion(addon, minor) == m[2] {
			const list = "application/vnd.docker.distribution.manifest.list.v2+json"
			body := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"manifests":[]}`, list)
			h.Set("Content-Type", list)
			h.Set("Docker-Content-Digest", fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(m[1]+":"+m[2]))))
			return http.StatusOK, body, h
		}
	}
	return http.StatusNotFound, errBody("MANIFEST_UNKNOWN", "Requested image not found"), h
}

// rawGitHub serves a repository's files at a git ref.
const rawGitHub = "raw.githubusercontent.com"

// vpcCNIManifest is the Amazon VPC CNI's manifest at a release tag of
// aws/amazon-vpc-cni-k8s. Its tags are vMAJOR.MINOR.PATCH: "The build
// versions listed in the table aren't specified in the self-managed
// versions listed on GitHub" (Update the Amazon VPC CNI (self-managed
// add-on), docs.aws.amazon.com/eks/latest/userguide/vpc-add-on-self-managed-update.html,
// read 2026-12-07), so a tag with the table's -eksbuild.N is not found.
var vpcCNIManifest = regexp.MustCompile(`^/aws/amazon-vpc-cni-k8s/(v\d+\.\d+\.\d+)/config/master/aws-k8s-cni\.yaml$`)

// vpcCNIDaemonSet stands in for config/master/aws-k8s-cni.yaml: its
// DaemonSet aws-node (kube-system, container aws-node, the release's
// image in 602401143452's us-west-2 registry), not its RBAC, CRD and
// ConfigMap, which the lane's cluster does not use.
const vpcCNIDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: aws-node
  namespace: kube-system
  labels:
    k8s-app: aws-node
spec:
  selector:
    matchLabels:
      k8s-app: aws-node
  template:
    metadata:
      labels:
        k8s-app: aws-node
    spec:
      containers:
      - name: aws-node
        image: 602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:%s
`
