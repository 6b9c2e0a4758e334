package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// semverPattern is the Semantic Versioning 2.0 grammar with krew's leading v.
var semverPattern = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func checkVersion(v string) error {
	if !semverPattern.MatchString(v) {
		return fmt.Errorf("version %q is not semver with a leading v (for example v0.1.0)", v)
	}
	return nil
}

// PlatformData fills one platform entry of a manifest template.
// Completion is "" where the platform ships no completion script.
type PlatformData struct {
	OS, Arch, URI, SHA256, Bin, Binary, Completion string
}

// ManifestData fills a manifest template.
type ManifestData struct {
	Version   string
	Platforms []PlatformData
	// RBAC is the RBAC part of the caveats, from README (see Caveats).
	RBAC string
}

// Render renders the manifest template of pl with the archives found in
// dist (their sha256) and URIs under baseURI.
func Render(tmpl []byte, pl Plugin, version, dist, baseURI string, plats []Platform, rbac []rbacRow) ([]byte, error) {
	data := ManifestData{Version: version}
	var err error
	if data.RBAC, err = Caveats(rbac, pl); err != nil {
		return nil, err
	}
	for _, p := range plats {
		name := ArchiveName(pl, version, p)
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			return nil, fmt.Errorf("archive for %s %s/%s: %w (run make dist first)", pl.Name, p.OS, p.Arch, err)
		}
		sum := sha256.Sum256(b)
		data.Platforms = append(data.Platforms, PlatformData{
			OS: p.OS, Arch: p.Arch,
			URI:        strings.TrimRight(baseURI, "/") + "/" + version + "/" + name,
			SHA256:     hex.EncodeToString(sum[:]),
			Bin:        pl.Binary() + p.Exe(),
			Binary:     pl.Binary() + p.Exe(),
			Completion: p.Completion(pl),
		})
	}
	t, err := template.New(pl.Name).Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func runKrew(args []string) error {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	version := fs.String("version", "", "release version")
	dist := fs.String("dist", "dist", "directory with the archives")
	out := fs.String("out", "dist/krew", "output directory for rendered manifests")
	src := fs.String("manifests", "krew-manifests", "directory with the manifest templates")
	readme := fs.String("readme", "README.md", "README whose RBAC table the caveats list")
	baseURI := fs.String("base-uri", "https://github.com/gpufleet/upgrade-plugins/releases/download", "URI prefix of the archives; the version and archive name are appended")
	platforms := fs.String("platforms", "", "comma-separated os/arch list (default: every release platform)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	plats, err := selectPlatforms(*platforms)
	if err != nil {
		return err
	}
	if err := checkVersion(*version); err != nil {
		return err
	}
	rbac, err := readRBAC(*readme)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, pl := range Plugins {
		tmpl, err := os.ReadFile(filepath.Join(*src, pl.Name+".yaml"))
		if err != nil {
			return err
		}
		m, err := Render(tmpl, pl, *version, *dist, *baseURI, plats, rbac)
		if err != nil {
			return err
		}
		if err := Validate(pl.Name, m); err != nil {
			return fmt.Errorf("rendered manifest %s: %w", pl.Name, err)
		}
		path := filepath.Join(*out, pl.Name+".yaml")
		if err := os.WriteFile(path, m, 0o644); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}

func runValidate(args []string) error {
	for _, path := range args {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		if err := Validate(name, b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// manifest is the part of krew's Plugin type that validation reads.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector *struct {
				MatchLabels      map[string]string `json:"matchLabels"`
				MatchExpressions []struct {
					Key string `json:"key"`
				} `json:"matchExpressions"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

var (
	safeName = regexp.MustCompile(`^[\w-]+$`)
	sha256Re = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// Validate applies krew's manifest rules (those of krew's own index
// validation) and ours: a name that is also the file name, a short
// description that reads well cut at 50 characters, RBAC caveats, and every
// platform installing the binary, LICENSE and the completion script where
// the platform can run it (none on Windows, see Platform.Completion).
func Validate(name string, data []byte) error {
	var m manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return fmt.Errorf("not a krew manifest: %w", err)
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" {
		add("apiVersion %q is not krew.googlecontainertools.github.com/v1alpha2", m.APIVersion)
	}
	if m.Kind != "Plugin" {
		add("kind %q is not Plugin", m.Kind)
	}
	if !safeName.MatchString(m.Metadata.Name) {
		add("name %q does not match %s", m.Metadata.Name, safeName)
	}
	if m.Metadata.Name != name {
		add("metadata.name %q differs from the file name %q", m.Metadata.Name, name)
	}
	if err := checkVersion(m.Spec.Version); err != nil {
		add("%v", err)
	}
	sd := m.Spec.ShortDescription
	switch {
	case sd == "":
		add("shortDescription is empty")
	case strings.ContainsAny(sd, "\r\n"):
		add("shortDescription has a line break")
	case len(sd) > 50 && !strings.Contains(sd[:50], " "):
		add("shortDescription does not read well cut at 50 characters")
	}
	if len(sd) > 80 {
		add("shortDescription is %d characters; keep it under 80", len(sd))
	}
	if !strings.HasPrefix(m.Spec.Homepage, "https://") {
		add("homepage %q is not an https URL", m.Spec.Homepage)
	}
	if m.Spec.Description == "" {
		add("description is empty")
	}
	if !strings.Contains(m.Spec.Caveats, "RBAC") {
		add("caveats must name the RBAC the plugin needs")
	}
	// krew install prints the caveats once the plugin is installed
	// (kubernetes-sigs/krew cmd/krew/cmd/install.go at commit 00becab:
	// prepCaveats(plugin.Spec.Caveats) to stderr before "Installed plugin"),
	// so their first line says how to start.
	if first, _, _ := strings.Cut(strings.TrimSpace(m.Spec.Caveats), "\n"); !strings.HasPrefix(first, "Usage: kubectl "+m.Metadata.Name) {
		add("caveats must open with how to use the plugin (\"Usage: kubectl %s ...\"), got %q", m.Metadata.Name, first)
	}
	if len(m.Spec.Platforms) == 0 {
		add("no platforms")
	}
	for i, p := range m.Spec.Platforms {
		where := fmt.Sprintf("platform %d", i)
		if p.URI == "" {
			add("%s: uri is empty", where)
		}
		if !sha256Re.MatchString(p.SHA256) {
			add("%s: sha256 %q is not 64 lower-case hex digits", where, p.SHA256)
		}
		if p.Bin == "" {
			add("%s: bin is empty", where)
		}
		if p.Selector == nil || len(p.Selector.MatchLabels) == 0 && len(p.Selector.MatchExpressions) == 0 {
			add("%s: selector is empty", where)
		} else {
			for k := range p.Selector.MatchLabels {
				if k != "os" && k != "arch" {
					add("%s: selector key %q is not os or arch", where, k)
				}
			}
			for _, e := range p.Selector.MatchExpressions {
				if e.Key != "os" && e.Key != "arch" {
					add("%s: selector key %q is not os or arch", where, e.Key)
				}
			}
		}
		if p.Files != nil && len(p.Files) == 0 {
			add("%s: files is empty", where)
		}
		from := map[string]bool{}
		for _, f := range p.Files {
			if f.From == "" || f.To == "" {
				add("%s: a files entry lacks from or to", where)
			}
			from[f.From] = true
		}
		if !from[p.Bin] {
			add("%s: files do not install bin %q", where, p.Bin)
		}
		if !from["LICENSE"] {
			add("%s: files do not install LICENSE", where)
		}
		comp := "kubectl_complete-" + strings.ReplaceAll(m.Metadata.Name, "-", "_")
		windows := p.Selector != nil && p.Selector.MatchLabels["os"] == "windows"
		switch {
		case windows && from[comp]:
			add("%s: installs the sh completion script %s on Windows, which cannot run it", where, comp)
		case !windows && !from[comp]:
			add("%s: files do not install the completion script %s", where, comp)
		}
	}
	return errors.Join(errs...)
}
