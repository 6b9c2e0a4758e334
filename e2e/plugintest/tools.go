package plugintest

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// ToolBinary returns the path e2e/tools/build.sh builds component into,
// at the version build.sh pins (its variable versionVar), building it
// first unless E2E_NO_BUILD is set.
func ToolBinary(t *testing.T, component, versionVar string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "e2e", "tools", "build.sh")
	f, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	version := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), versionVar+"="); ok {
			version = v
		}
	}
	if version == "" {
		t.Fatalf("%s pins no %s", script, versionVar)
	}
	bin := filepath.Join(harness.CacheDir(), component+"-"+version, component)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if os.Getenv("E2E_NO_BUILD") != "" {
		t.Fatalf("no %s at %s: run e2e/tools/build.sh %s", component, bin, component)
	}
	if r := RunCmd(t, script, Cmd{Args: []string{component}, Timeout: 15 * time.Minute}); r.ExitCode != 0 {
		t.Fatalf("e2e/tools/build.sh %s: %s", component, r)
	}
	return bin
}

// StartServer runs the server bin on a free loopback port, with the flags
// args builds from its address, stops it when the test ends and returns
// its base URL once GET readyPath answers 200.
func StartServer(t *testing.T, name, bin, readyPath string, args func(addr string) []string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, args(addr)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	err = harness.Eventually(context.Background(), "the "+name, 30*time.Second, func(context.Context) (bool, error) {
		resp, err := http.Get(url + readyPath)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return url
}
