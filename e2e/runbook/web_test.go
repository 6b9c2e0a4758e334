package runbooke2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEtcdReleaseDownload fetches etcdutl through the web stand-in as the
// runbook's backup step does (curl -fsSL through HTTPS_PROXY, tar
// --strip-components=1 of the one member) and runs it: the redirect is
// followed, the archive has the release's layout, and etcdutl reports its
// version. A release the lane does not run is not found.
func TestEtcdReleaseDownload(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	dir := t.TempDir()
	ca, err := NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{}
	w, err := StartWeb(ca, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(filepath.Join(dir, "snap.db"), []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(ver string) (string, error) {
		script := `curl -fsSL "https://github.com/etcd-io/etcd/releases/download/v$V/etcd-v$V-linux-amd64.tar.gz" | tar -xzf - -C "$D" --strip-components=1 "etcd-v$V-linux-amd64/etcdutl" && "$D/etcdutl" version | grep -F "etcdutl version: $V" && "$D/etcdutl" snapshot status "$D/snap.db" -w table`
		cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "HTTPS_PROXY="+w.URL, "CURL_CA_BUNDLE="+ca.PEM, "V="+ver, "D="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(EtcdRelease)
	if err != nil || !strings.Contains(out, "TOTAL KEYS") {
		t.Fatalf("download of etcd v%s: %v\n%s", EtcdRelease, err, out)
	}
	calls := rec.Take()
	if len(calls) != 2 || calls[0].Status != 302 || calls[1].Status != 200 {
		t.Errorf("requests %+v, want a redirect and the archive", calls)
	}
	if out, err := run("3.7.1"); err != nil || !strings.Contains(out, "TOTAL KEYS") {
		t.Errorf("download of etcd v3.7.1, the k3s and RKE2 backups' etcdutl: %v\n%s", err, out)
	}
	if out, err := run("3.5.99"); err == nil {
		t.Errorf("etcd v3.5.99 downloaded: %s", out)
	}
}
