package runbooke2e

import (
	"net/http/httptest"
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

// TestECRTagCheck runs the self-managed add-on's tag check as pasted: the
// real aws ecr get-login-password against the recording endpoint, then
// curl -I of the manifest through the web stand-in with that password.
// A tag of the catalog is found, another is not, and without the
// password the registry answers 401.
func TestECRTagCheck(t *testing.T) {
	for _, bin := range []string{"aws", "curl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip("no " + bin)
		}
	}
	dir := t.TempDir()
	ca, err := NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{}
	web, err := StartWeb(ca, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	eks := httptest.NewServer(&EKS{W: NewWorld("eks", "mixed-pools"), Rec: rec})
	defer eks.Close()
	check := func(tag, user string) (string, error) {
		script := `REGISTRY=602401143452.dkr.ecr.us-west-2.amazonaws.com
PASS=$(aws ecr get-login-password --region "$(echo "$REGISTRY" | cut -d. -f4)") && \
curl -fsSI -o /dev/null -u "$U:$PASS" -H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' "https://$REGISTRY/v2/eks/kube-proxy/manifests/$TAG"`
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "HTTPS_PROXY="+web.URL, "CURL_CA_BUNDLE="+ca.PEM, "TAG="+tag, "U="+user,
			"AWS_ENDPOINT_URL="+eks.URL, "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_CONFIG_FILE="+filepath.Join(dir, "c"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "k"),
			"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check(eksAddonVersion("kube-proxy", "1.38"), "AWS"); err != nil {
		t.Fatalf("tag of the catalog: %v\n%s", err, out)
	}
	calls := rec.Take()
	if len(calls) < 2 || calls[0].Service != "ecr" || calls[0].Op != "GetAuthorizationToken" || calls[0].Target != "us-west-2" {
		t.Errorf("requests %+v, want ECR GetAuthorizationToken in us-west-2 first", calls)
	}
	if out, err := check("v1.38.1-eksbuild.99", "AWS"); err == nil {
		t.Errorf("a tag the registry lacks was found: %s", out)
	}
	if out, err := check(eksAddonVersion("kube-proxy", "1.38"), "nobody"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("without the ECR password: %v %s; want 401", err, out)
	}
}

// TestVPCCNIManifest fetches the VPC CNI manifest as the self-managed
// update applies it: a release tag of the catalog is found and names its
// image; the versions table's -eksbuild.N form of it is no GitHub tag.
func TestVPCCNIManifest(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	dir := t.TempDir()
	ca, err := NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	web, err := StartWeb(ca, &Recorder{})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	get := func(tag string) (string, error) {
		cmd := exec.Command("curl", "-fsS", "https://raw.githubusercontent.com/aws/amazon-vpc-cni-k8s/"+tag+"/config/master/aws-k8s-cni.yaml")
		cmd.Env = append(os.Environ(), "HTTPS_PROXY="+web.URL, "CURL_CA_BUNDLE="+ca.PEM)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	table := eksAddonVersion("vpc-cni", "1.38")
	release := strings.SplitN(table, "-", 2)[0]
	if out, err := get(release); err != nil || !strings.Contains(out, "amazon-k8s-cni:"+release) {
		t.Fatalf("%s: %v\n%s", release, err, out)
	}
	if out, err := get(table); err == nil {
		t.Errorf("%s, the table's build, found on GitHub: %s", table, out)
	}
}
