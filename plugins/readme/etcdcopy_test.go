package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEEtcdCertCopy runs README's etcd-certificate block in bash with
// stand-ins for sudo and kubectl and the kubeadm files in a scratch
// directory: preflight and verify each get the three --etcd-* flags naming
// readable copies under $XDG_RUNTIME_DIR, and no copy of the key is left
// anywhere once the block is done, though kubectl failed each time.
func TestREADMEEtcdCertCopy(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(data), "```") {
		if strings.Contains(part, "/etc/kubernetes/pki/etcd/healthcheck-client.key") && strings.HasPrefix(part, "sh\n") {
			block = strings.TrimPrefix(part, "sh\n")
			break
		}
	}
	if block == "" {
		t.Fatal("README has no sh block copying /etc/kubernetes/pki/etcd/healthcheck-client.key")
	}
	dir := t.TempDir()
	src, bin, run, home := filepath.Join(dir, "pki"), filepath.Join(dir, "bin"), filepath.Join(dir, "run"), filepath.Join(dir, "home")
	for _, d := range []string{src, bin, run, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ca.crt", "healthcheck-client.crt", "healthcheck-client.key"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte("PEM "+f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "kubectl.log")
	stubs := map[string]string{
		// sudo runs the command as the caller: install -o/-g name the
		// caller's own ids.
		"sudo": "#!/bin/bash\nexec \"$@\"\n",
		// kubectl logs its subcommand and each --etcd-* file it could
		// read, then fails, as a refused plan would.
		"kubectl": `#!/bin/bash
sub="$2"
while [ $# -gt 0 ]; do
  case "$1" in --etcd-cacert|--etcd-cert|--etcd-key)
    if [ -r "$2" ] && [ "${2#$XDG_RUNTIME_DIR/}" != "$2" ]; then echo "$sub $1 read" >> "` + log + `"; else echo "$sub $1 unreadable $2" >> "` + log + `"; fi;;
  esac
  shift
done
exit 1
`,
	}
	for n, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", strings.ReplaceAll(block, "/etc/kubernetes/pki/etcd/", src+"/"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XDG_RUNTIME_DIR="+run, "HOME="+home)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	got, _ := os.ReadFile(log)
	want := "preflight --etcd-cacert read\npreflight --etcd-cert read\npreflight --etcd-key read\n" +
		"verify --etcd-cacert read\nverify --etcd-cert read\nverify --etcd-key read\n"
	if string(got) != want {
		t.Errorf("kubectl saw\n%swant\n%s(bash: %s)", got, want, out)
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) == "healthcheck-client.key" && filepath.Dir(p) != src {
			t.Errorf("a copy of the key is left at %s", p)
		}
		return nil
	})
}
