//go:build e2e

package skewe2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// etcdTLS writes a CA, a serving certificate for 127.0.0.1 and a client
// certificate into dir, as kubeadm lays out etcd's (ca.crt, server.*,
// healthcheck-client.*).
func etcdTLS(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name string, der []byte, key *ecdsa.PrivateKey) {
		if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if key != nil {
			kb, _ := x509.MarshalECPrivateKey(key)
			if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("ca", caDER, nil)
	for i, c := range []struct {
		name string
		eku  x509.ExtKeyUsage
	}{{"server", x509.ExtKeyUsageServerAuth}, {"healthcheck-client", x509.ExtKeyUsageClientAuth}} {
		// etcd's gRPC gateway dials its own client port with the serving
		// certificate: it is a client certificate too.
		ekus := []x509.ExtKeyUsage{c.eku}
		if c.name == "server" {
			ekus = append(ekus, x509.ExtKeyUsageClientAuth)
		}
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: c.name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: ekus,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		write(c.name, der, key)
	}
}

// freePort returns a port free on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// peerLink stands in front of every member's peer port, as a network
// between the members: etcd's raft transport (rafthttp) sends each request
// with the sender's member ID in X-Server-From, so cutting one member off
// means refusing the requests to it and the requests from it, and ending
// the streams already open. The member's client port stays reachable: it
// answers its status while it falls behind.
type peerLink struct {
	mu      sync.Mutex
	cut     string // the member ID (hex) cut off, "" for none
	cancels map[*http.Request]linkReq
}

// linkReq is one request in flight: between which members, and how to end it.
type linkReq struct {
	to, from string
	cancel   context.CancelFunc
}

func (l *peerLink) isCut(to, from string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut != "" && (to == l.cut || from == l.cut)
}

func (l *peerLink) setCut(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = id
	for r, c := range l.cancels {
		if id != "" && (c.to == id || c.from == id) {
			c.cancel()
			delete(l.cancels, r)
		}
	}
}

// serve proxies listener ln to the member's peer URL target; id returns the
// member's ID once known.
func (l *peerLink) serve(t *testing.T, ln net.Listener, target string, id func() string) {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ErrorLog = nil
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to, from := id(), r.Header.Get("X-Server-From")
		if l.isCut(to, from) {
			http.Error(w, "cut off by the test", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		l.mu.Lock()
		if l.cancels == nil {
			l.cancels = map[*http.Request]linkReq{}
		}
		l.cancels[r] = linkReq{to: to, from: from, cancel: cancel}
		l.mu.Unlock()
		defer func() { l.mu.Lock(); delete(l.cancels, r); l.mu.Unlock() }()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

type etcdNode struct {
	name, client, peer, advertised string
	cmd                            *exec.Cmd
	id                             string
}

// The etcd-quorum gate against a real three-member etcd (the binary the
// local control plane runs) over TLS with client certificates: clean it
// passes; with one member stopped it fails naming it; with one member cut
// off from the others' raft traffic while writes go on it fails on that
// member's lag behind the leader; with a NOSPACE alarm raised it fails on
// the alarm. `kubectl skew verify` against the clean baseline reports the
// same as regressions.
func TestEtcdQuorumGate(t *testing.T) {
	cp := scenario(t)
	dir := t.TempDir()
	etcdTLS(t, dir)
	link := &peerLink{}
	nodes := make([]*etcdNode, 3)
	var initial []string
	for i := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := &etcdNode{name: fmt.Sprintf("m%d", i+1), client: fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
			peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), advertised: "http://" + ln.Addr().String()}
		nodes[i] = n
		link.serve(t, ln, n.peer, func() string { return n.id })
		initial = append(initial, n.name+"="+n.advertised)
	}
	tls := []string{"--cert-file=" + filepath.Join(dir, "server.crt"), "--key-file=" + filepath.Join(dir, "server.key"),
		"--client-cert-auth", "--trusted-ca-file=" + filepath.Join(dir, "ca.crt")}
	for _, n := range nodes {
		args := append([]string{"--name=" + n.name, "--data-dir=" + filepath.Join(dir, n.name),
			"--listen-client-urls=" + n.client, "--advertise-client-urls=" + n.client,
			"--listen-peer-urls=" + n.peer, "--initial-advertise-peer-urls=" + n.advertised,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new", "--initial-cluster-token=quorum-e2e",
			"--unsafe-no-fsync=true", "--log-level=warn", "--heartbeat-interval=50", "--election-timeout=500"}, tls...)
		n.cmd = exec.Command(cp.Binaries.Etcd, args...)
		logf, err := os.Create(filepath.Join(dir, n.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("etcd member %s (%s) log:\n%s", n.name, n.id, b)
			}
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Kill()
			_, _ = n.cmd.Process.Wait()
			logf.Close()
		})
	}
	tlsInfo := transport.TLSInfo{TrustedCAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "healthcheck-client.crt"), KeyFile: filepath.Join(dir, "healthcheck-client.key")}
	tlsCfg, err := tlsInfo.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.client)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxT(t)
	if err := harness.Eventually(ctx, "three etcd members with a leader", time.Minute, func(ctx context.Context) (bool, error) {
		ml, err := cli.MemberList(ctx)
		if err != nil || len(ml.Members) != 3 {
			return false, nil
		}
		for _, m := range ml.Members {
			for _, n := range nodes {
				if n.name == m.Name {
					n.id = fmt.Sprintf("%x", m.ID)
				}
			}
			if len(m.ClientURLs) == 0 {
				return false, nil
			}
		}
		for _, n := range nodes {
			st, err := cli.Status(ctx, n.client)
			if err != nil || st.Leader == 0 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--target", "v1.37", "--etcd-endpoints", nodes[0].client, "--etcd-cacert", tlsInfo.TrustedCAFile,
		"--etcd-cert", tlsInfo.CertFile, "--etcd-key", tlsInfo.KeyFile}
	baseline := filepath.Join(dir, "baseline.yaml")
	g, _, r := preflight(t, cp, "etcd-quorum", append(flags, "--save", baseline)...)
	if g.Status != "ok" || !strings.Contains(g.Message, "3 etcd members started and reachable") || len(g.Evidence) != 3 {
		t.Fatalf("clean three-member etcd: %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}

	// One member held behind: cut off from raft traffic while the others
	// commit more than the threshold.
	leader := func() *etcdNode {
		st, err := cli.Status(ctx, nodes[0].client)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.id == fmt.Sprintf("%x", st.Leader) {
				return n
			}
		}
		t.Fatal("no leader")
		return nil
	}
	// The member held behind is a follower other than nodes[0], the
	// endpoint the gate and leader() ask: cut off, it would know no
	// leader and forward nothing.
	lead := leader()
	var behind *etcdNode
	for _, n := range nodes[1:] {
		if n != lead {
			behind = n
			break
		}
	}
	// Writes go through the two members still in touch: a proposal sent
	// to the member cut off cannot reach the leader.
	var rest []string
	for _, n := range nodes {
		if n != behind {
			rest = append(rest, n.client)
		}
	}
	writer, err := clientv3.New(clientv3.Config{Endpoints: rest, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	link.setCut(behind.id)
	for i := 0; i < 1200; i++ {
		if _, err := writer.Put(ctx, fmt.Sprintf("/quorum-e2e/%d", i), "x"); err != nil {
			t.Fatalf("put %d with one member cut off: %v", i, err)
		}
	}
	g, _, r = preflight(t, cp, "etcd-quorum", flags...)
	if g.Status != "fail" || !evidenceHas(g, "member "+behind.name, "raft entries behind the leader", "more than 1000") {
		t.Fatalf("member %s cut off for 1200 writes: %s %q %q\n%s", behind.name, g.Status, g.Message, g.Evidence, r)
	}
	// The threshold is a flag.
	if g, _, r = preflight(t, cp, "etcd-quorum", append(flags, "--etcd-max-lag", "100000")...); evidenceHas(g, "raft entries behind") {
		t.Fatalf("--etcd-max-lag 100000 still reports the lag: %q\n%s", g.Evidence, r)
	}
	link.setCut("")
	if err := harness.Eventually(ctx, "the member to catch up", time.Minute, func(ctx context.Context) (bool, error) {
		a, err1 := cli.Status(ctx, behind.client)
		b, err2 := cli.Status(ctx, lead.client)
		return err1 == nil && err2 == nil && a.Leader != 0 && a.RaftIndex+10 > b.RaftIndex, nil
	}); err != nil {
		t.Fatal(err)
	}

	// A NOSPACE alarm, raised as etcd raises it when the quota is reached.
	if _, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatalf("raise NOSPACE: %v", err)
	}
	g, _, r = preflight(t, cp, "etcd-quorum", flags...)
	if g.Status != "fail" || !strings.Contains(g.Message+strings.Join(g.Evidence, "\n"), "alarm NOSPACE raised") {
		t.Fatalf("NOSPACE alarm: %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatalf("disarm: %v", err)
	}

	// One member stopped: verify against the clean baseline names it.
	stopped := nodes[2]
	_ = stopped.cmd.Process.Signal(syscall.SIGSTOP)
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	if v.ExitCode != 1 || !strings.Contains(v.Stdout, `"etcd-quorum"`) || !strings.Contains(v.Stdout, "member "+stopped.name+" ("+stopped.id+") is not reachable") {
		t.Fatalf("verify with member %s stopped: want exit 1 and an etcd-quorum regression naming it\n%s", stopped.name, v)
	}
	_ = stopped.cmd.Process.Signal(syscall.SIGCONT)
}
