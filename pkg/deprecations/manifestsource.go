package deprecations

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ManifestSource is the manifests source of a run: files and directories
// (-f), a kustomization (-k) and stdin.
type ManifestSource struct {
	Scanner   *ManifestScanner
	Filenames []string
	Kustomize string
	Stdin     io.Reader
}

// ManifestSourceResult is what the manifests source read.
type ManifestSourceResult struct {
	Findings []Finding
	Skipped  []Skipped
	Files    int
	Objects  int
}

// Scanned says what was read, for the report's source status.
func (r ManifestSourceResult) Scanned() string {
	return fmt.Sprintf("%d files, %d objects", r.Files, r.Objects)
}

// ErrBadInput marks an error of the user's input (a path that does not
// exist, a kustomization that does not build): the caller reports it as a
// usage error.
type ErrBadInput struct{ Err error }

func (e *ErrBadInput) Error() string { return e.Err.Error() }
func (e *ErrBadInput) Unwrap() error { return e.Err }

// Read scans the files, then builds and scans the kustomization. What was
// read before an error is returned with it.
func (m *ManifestSource) Read(ctx context.Context) (ManifestSourceResult, error) {
	var out ManifestSourceResult
	if len(m.Filenames) > 0 {
		res, err := m.Scanner.ScanPaths(ctx, m.Filenames, m.Stdin)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			return out, &ErrBadInput{fmt.Errorf("reading manifests: %w", err)}
		}
		out = ManifestSourceResult{Findings: res.Findings, Skipped: res.Skipped, Files: res.Files, Objects: res.Objects}
	}
	if m.Kustomize != "" {
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		rm, err := k.Run(filesys.MakeFsOnDisk(), m.Kustomize)
		if err != nil {
			return out, &ErrBadInput{fmt.Errorf("building kustomization %s: %w", m.Kustomize, err)}
		}
		y, err := rm.AsYaml()
		if err != nil {
			return out, &ErrBadInput{fmt.Errorf("building kustomization %s: %w", m.Kustomize, err)}
		}
		res := m.Scanner.Scan("kustomize "+m.Kustomize, y)
		out.Findings = append(out.Findings, res.Findings...)
		out.Skipped = append(out.Skipped, res.Skipped...)
		out.Files++
		out.Objects += res.Objects
	}
	return out, nil
}

// DisplayBase returns the directory that the paths of files found under
// args are best shown relative to in a table: the argument itself for one
// directory, the folder holding it for one file, the deepest folder
// common to several. It is "" when there is none (stdin alone, or
// arguments with no folder in common), and paths are then shown as found.
func DisplayBase(args []string) string {
	var base []string
	first := true
	for _, a := range args {
		if a == "-" {
			continue
		}
		dir := filepath.Clean(a)
		if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
		parts := splitPath(dir)
		if first {
			base, first = parts, false
			continue
		}
		n := 0
		for n < len(base) && n < len(parts) && base[n] == parts[n] {
			n++
		}
		base = base[:n]
		if n == 0 {
			return ""
		}
	}
	if len(base) == 0 {
		return ""
	}
	return filepath.Join(base...)
}

// splitPath splits a cleaned path into its elements; an absolute path
// keeps its root as the first element.
func splitPath(p string) []string {
	if p == "." {
		return []string{"."}
	}
	var out []string
	vol := filepath.VolumeName(p)
	rest := p[len(vol):]
	if strings.HasPrefix(rest, string(filepath.Separator)) {
		out = append(out, vol+string(filepath.Separator))
		rest = rest[1:]
	}
	for _, e := range strings.Split(rest, string(filepath.Separator)) {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// RelativePath returns file relative to base, or file as it is when base
// is "" or file is not under base.
func RelativePath(base, file string) string {
	if base == "" || base == "." {
		return file
	}
	r, err := filepath.Rel(base, file)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return file
	}
	return r
}

// DisplayLocation is the finding's Location with its file shown relative
// to base (see DisplayBase).
func (f Finding) DisplayLocation(base string) string {
	if f.File == "" || !strings.HasPrefix(f.Location, f.File) {
		return f.Location
	}
	return RelativePath(base, f.File) + f.Location[len(f.File):]
}

// ObjectName is namespace/name of the object the finding is about, name
// alone for a cluster-scoped (or unnamespaced) object, "" when unnamed.
func (f Finding) ObjectName() string {
	if f.Name == "" {
		return ""
	}
	if f.Namespace == "" {
		return f.Name
	}
	return f.Namespace + "/" + f.Name
}
