package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The k3s and RKE2 rollback moves a server's db directory aside; pasted a
// second time, it stops before stopping anything rather than moving db
// into the db-failed directory the first paste made.
func TestRunbookServerDBAsideTwice(t *testing.T) {
	for _, v := range []string{"k3s-etcd", "k3s-sqlite", "rke2"} {
		_, restore := restoreStep(t, v)
		text := rollbackText(restore)
		wantInOrder(t, v+" restore", text, "test ! -e /var/lib/rancher/", "systemctl stop", " mv /var/lib/rancher/")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "db", "state.db"), []byte("failed"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.Join(chain(dbAsideGuard("", data, "1.38"), dbAside("", data, "1.38"), "mkdir "+data+"/db", "echo MOVED"), "\n")
	run := func() (string, error) {
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil || !strings.Contains(out, "MOVED") {
		t.Fatalf("first paste: %v\n%s", err, out)
	}
	out, err := run()
	if err == nil || strings.Contains(out, "MOVED") || !strings.Contains(out, "move that directory elsewhere") {
		t.Errorf("second paste passed or said nothing: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(data, "db-failed-1.38", "db")); err == nil {
		t.Error("the second paste moved db into db-failed-1.38")
	}
	if b, err := os.ReadFile(filepath.Join(data, "db-failed-1.38", "state.db")); err != nil || string(b) != "failed" {
		t.Errorf("db-failed-1.38 lost the failed db: %q %v", b, err)
	}
}
