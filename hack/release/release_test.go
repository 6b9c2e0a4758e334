package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fakeBuild writes a stand-in binary per plugin and platform, as the
// Makefile's cross-compile step would.
func fakeBuild(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range Platforms {
		d := filepath.Join(dir, p.OS+"_"+p.Arch)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, pl := range Plugins {
			if err := os.WriteFile(filepath.Join(d, pl.Binary()+p.Exe()), []byte(pl.Name+p.OS+p.Arch), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func distAndRender(t *testing.T, version string) (dist, krewDir string) {
	t.Helper()
	root := repoRoot(t)
	build := fakeBuild(t)
	dist = t.TempDir()
	krewDir = filepath.Join(dist, "krew")
	if err := runDist([]string{"-version", version, "-build", build, "-out", dist,
		"-license", filepath.Join(root, "LICENSE"), "-completions", filepath.Join(root, "hack/completion")}); err != nil {
		t.Fatal(err)
	}
	if err := runKrew([]string{"-version", version, "-dist", dist, "-out", krewDir,
		"-manifests", filepath.Join(root, "krew-manifests"), "-readme", filepath.Join(root, "README.md")}); err != nil {
		t.Fatal(err)
	}
	return dist, krewDir
}

func TestRenderedManifestsValidate(t *testing.T) {
	dist, krewDir := distAndRender(t, "v0.1.0")
	for _, pl := range Plugins {
		m, err := os.ReadFile(filepath.Join(krewDir, pl.Name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(pl.Name, m); err != nil {
			t.Errorf("%s: %v", pl.Name, err)
		}
		for _, want := range []string{"name: " + pl.Name, "version: v0.1.0", "bin: " + pl.Binary() + ".exe", "os: windows", "arch: arm64",
			"/v0.1.0/" + pl.Binary() + "_v0.1.0_linux_amd64.tar.gz"} {
			if !strings.Contains(string(m), want) {
				t.Errorf("%s manifest lacks %q", pl.Name, want)
			}
		}
	}
	// krew's own validator, when e2e/tools/build.sh krew-validate has built it.
	vkm := filepath.Join(cacheDir(), "krew-v0.4.3", "validate-krew-manifest")
	if _, err := os.Stat(vkm); err != nil {
		t.Logf("krew's validate-krew-manifest not built (%v); run e2e/tools/build.sh krew-validate", err)
		return
	}
	for _, pl := range Plugins {
		out, err := exec.Command(vkm, "-manifest", filepath.Join(krewDir, pl.Name+".yaml"), "-skip-install").CombinedOutput()
		if err != nil {
			t.Errorf("validate-krew-manifest %s: %v\n%s", pl.Name, err, out)
		}
	}
	_ = dist
}

// The caveats list what README's RBAC table says of each plugin, every
// row of it, and name role files that exist.
func TestCaveatsListREADMERBAC(t *testing.T) {
	root := repoRoot(t)
	rows, err := readRBAC(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, krewDir := distAndRender(t, "v0.1.0")
	seen := map[string]bool{}
	for _, pl := range Plugins {
		b, err := os.ReadFile(filepath.Join(krewDir, pl.Name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var m manifest
		if err := yaml.UnmarshalStrict(b, &m); err != nil {
			t.Fatal(err)
		}
		caveats := strings.Join(strings.Fields(m.Spec.Caveats), " ")
		for _, r := range rows {
			if r.What != pl.Name && !strings.HasPrefix(r.What, pl.Name+" ") {
				continue
			}
			seen[r.What] = true
			if !strings.Contains(caveats, strings.Join(strings.Fields(r.Needs), " ")) {
				t.Errorf("%s caveats lack README's RBAC row %q:\n%s", pl.Name, r.What, m.Spec.Caveats)
			}
			if _, err := os.Stat(filepath.Join(root, r.File)); err != nil {
				t.Errorf("README's RBAC row %q names %s: %v", r.What, r.File, err)
			}
		}
		if !seen[pl.Name] {
			t.Errorf("README's RBAC table has no row for %s", pl.Name)
		}
	}
	for _, r := range rows {
		if !seen[r.What] && r.What != "checkpoint agent" {
			t.Errorf("README's RBAC row %q belongs to no plugin's caveats", r.What)
		}
	}
}

func cacheDir() string {
	if d := os.Getenv("E2E_BIN_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "gpufleet-e2e")
}

func TestArchivesAreReproducibleAndComplete(t *testing.T) {
	dist1, _ := distAndRender(t, "v0.2.0-rc.1")
	dist2, _ := distAndRender(t, "v0.2.0-rc.1")
	name := ArchiveName(Plugins[2], "v0.2.0-rc.1", Platform{"linux", "amd64"})
	a, _ := os.ReadFile(filepath.Join(dist1, name))
	b, _ := os.ReadFile(filepath.Join(dist2, name))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("archive %s differs between two builds of the same inputs", name)
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := "kubectl-gang_drain LICENSE kubectl_complete-gang_drain"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("archive holds %q, want %q", got, want)
	}
	// Windows gets the binary and LICENSE: the completion script is sh,
	// which kubectl on Windows neither finds nor can run.
	zr, err := zip.OpenReader(filepath.Join(dist1, ArchiveName(Plugins[0], "v0.2.0-rc.1", Platform{"windows", "amd64"})))
	if err != nil {
		t.Fatalf("no windows zip: %v", err)
	}
	defer zr.Close()
	names = nil
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, " "), "kubectl-skew.exe LICENSE"; got != want {
		t.Errorf("windows zip holds %q, want %q", got, want)
	}
}

func TestValidateRejects(t *testing.T) {
	good := `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: skew
spec:
  version: v0.1.0
  homepage: https://example.com
  shortDescription: Check version skew
  description: d
  caveats: "Usage: kubectl skew [--target 1.37]\nRBAC: list nodes"
  platforms:
  - selector:
      matchLabels:
        os: linux
    uri: https://example.com/a.tar.gz
    sha256: ` + strings.Repeat("a", 64) + `
    bin: kubectl-skew
    files:
    - from: kubectl-skew
      to: .
    - from: LICENSE
      to: .
    - from: kubectl_complete-skew
      to: .
`
	if err := Validate("skew", []byte(good)); err != nil {
		t.Fatalf("good manifest rejected: %v", err)
	}
	cases := map[string]struct{ from, to, file, want string }{
		"name differs from file":    {"name: skew", "name: skew", "other", "differs from the file name"},
		"bad semver":                {"version: v0.1.0", "version: 0.1", "skew", "not semver"},
		"upper-case sha":            {strings.Repeat("a", 64), strings.Repeat("A", 64), "skew", "64 lower-case hex"},
		"short sha":                 {strings.Repeat("a", 64), "abc", "skew", "64 lower-case hex"},
		"selector key not os/arch":  {"os: linux", "distro: debian", "skew", `selector key "distro"`},
		"no RBAC in caveats":        {`\nRBAC: list nodes"`, `\nnone"`, "skew", "RBAC"},
		"caveats without usage":     {`caveats: "Usage: kubectl skew [--target 1.37]\n`, `caveats: "`, "skew", "open with how to use"},
		"bin not installed":         {"- from: kubectl-skew", "- from: other", "skew", "do not install bin"},
		"file entry without to":     {"to: .\n    - from: LICENSE", "to: \"\"\n    - from: LICENSE", "skew", "lacks from or to"},
		"line break in short desc":  {"shortDescription: Check version skew", "shortDescription: \"a\\nb\"", "skew", "line break"},
		"unknown field is an error": {"kind: Plugin", "kind: Plugin\nextra: 1", "skew", "not a krew manifest"},
		"no completion script":      {"- from: kubectl_complete-skew", "- from: README", "skew", "do not install the completion script"},
		"sh completion on Windows":  {"os: linux", "os: windows", "skew", "which cannot run it"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(good, tc.from, tc.to, 1)
			err := Validate(tc.file, []byte(bad))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
