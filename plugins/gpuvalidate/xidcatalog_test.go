package gpuvalidate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

func TestXidCatalogCmd(t *testing.T) {
	kube := fake.NewClientset()
	out, errOut, code := run(t, kube, "xid-catalog", "-o", "json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Kind      string
		Source    string
		SheetDate string
		Entries   []struct {
			Xid             int
			ImmediateAction string
			Class           string
			SourceURL       string
		}
		NVLink5Decode []struct{ Xid int } `json:"nvlink5Decode"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "XidCatalog" || len(rep.Entries) != 172 || rep.SheetDate == "" || rep.Entries[108].Xid != 109 ||
		rep.Entries[108].ImmediateAction != "RESET_GPU" || rep.Entries[108].Class != "fatal" || rep.Entries[108].SourceURL == "" || len(rep.NVLink5Decode) != 95 {
		t.Errorf("%+v", rep)
	}
	out, _, code = run(t, kube, "xid-catalog")
	if code != cli.ExitOK || !regexp.MustCompile(`109 +fatal +RESET_GPU`).MatchString(out) || !regexp.MustCompile(`145 +per line, decoded +WORKFLOW_NVLINK5_ERR`).MatchString(out) || !strings.Contains(out, "172 Xids from https://docs.nvidia.com/") {
		t.Errorf("exit %d\n%s", code, out)
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "cat.csv")
	_ = os.WriteFile(good, []byte("# source: https://example.test/xid\nxid,mnemonic,description,immediate_action,investigatory_action,source_url\n109,X,Y,IGNORE,,\n"), 0o644)
	bad := filepath.Join(dir, "bad.csv")
	_ = os.WriteFile(bad, []byte("xid\n1\n"), 0o644)
	if out, _, code := run(t, kube, "xid-catalog", "--xid-catalog", good); code != cli.ExitOK || !regexp.MustCompile(`109 +info`).MatchString(out) {
		t.Errorf("override: exit %d\n%s", code, out)
	}
	// A catalog that cannot be read is refused as an input file (3); the
	// flag without --xid is a usage error (2).
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"xid-catalog", "--xid-catalog", bad}, cli.ExitUnavailable},
		{[]string{"xid-catalog", "--xid-catalog", filepath.Join(dir, "missing.csv")}, cli.ExitUnavailable},
		{[]string{"nodes", "a", "--xid-catalog", good}, cli.ExitUsage},
		{[]string{"nodes", "a", "--xid", "--xid-catalog", bad}, cli.ExitUnavailable},
	} {
		if _, errOut, code := run(t, kube, tc.args...); code != tc.code || !strings.Contains(errOut, "--xid-catalog") {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut)
		}
	}
}
