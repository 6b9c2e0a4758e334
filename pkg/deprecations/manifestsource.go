package deprecations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
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
	return cli.Plural(r.Files, "file") + ", " + cli.Plural(r.Objects, "object")
}

// ErrBadInput is a local input named on the command line that could not
// be read or held nothing to read: a path that does not exist, a file
// with no Kubernetes object in it, a directory with no manifest, an audit
// log with no event, a kustomization that does not build. The run is
// refused rather than reported: without that input a clean answer would
// be a false one.
type ErrBadInput struct {
	// Flag is the flag that named the input (-f, -k, --audit-log).
	Flag string
	// Path is the input as given ("-" for stdin).
	Path string
	Err  error
}

func (e *ErrBadInput) Error() string {
	p := e.Path
	if p == "-" {
		p = "- (stdin)"
	}
	return fmt.Sprintf("%s %s: %v", e.Flag, p, e.Err)
}
func (e *ErrBadInput) Unwrap() error { return e.Err }

// badPath is the ErrBadInput of a path that flag named and that could not
// be opened or listed; the path is the one in err (a file under a
// directory given, say).
func badPath(flag, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path, err = pe.Path, pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && strings.ContainsAny(path, "*?["):
		// The shell passes a pattern that matched nothing as it is.
		err = errors.New("does not exist (a pattern that matched no file)")
	case errors.Is(err, fs.ErrNotExist):
		err = errors.New("does not exist")
	case errors.Is(err, fs.ErrPermission):
		err = errors.New("cannot be read: permission denied")
	default:
		err = fmt.Errorf("cannot be read: %w", err)
	}
	return &ErrBadInput{Flag: flag, Path: path, Err: err}
}

// CheckInputs checks that every local input exists, before anything is
// read from a file or a cluster: -f paths, the -k directory and the audit
// logs ("-" is stdin and always exists).
func CheckInputs(filenames []string, kustomize string, auditLogs []string) error {
	for _, in := range []struct {
		flag  string
		paths []string
	}{{"-f", filenames}, {"-k", []string{kustomize}}, {"--audit-log", auditLogs}} {
		for _, p := range in.paths {
			if p == "" || p == "-" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				return badPath(in.flag, p, err)
			}
		}
	}
	return nil
}

// emptyPath is the ErrBadInput of a -f path from which no object was
// read: an empty file or stream, a file of comments or plain YAML, a
// directory with no manifest in it, or one whose every document does not
// parse (the first of skipped under the path is named).
func emptyPath(pc PathCount, skipped []Skipped) error {
	var err error
	switch {
	case pc.Skipped > 0:
		first := ""
		for _, sk := range skipped {
			// Files under a directory are named relative to it.
			if sk.File == pc.Path || pc.Dir && !filepath.IsAbs(sk.File) || strings.HasPrefix(sk.File, strings.TrimSuffix(pc.Path, "/")+"/") || pc.Path == "-" {
				first = fmt.Sprintf(", the first: %s:%d: %s", sk.File, sk.Line, sk.Reason)
				break
			}
		}
		err = fmt.Errorf("holds no Kubernetes object that could be read (0 objects read, %s not scanned%s)", cli.Plural(pc.Skipped, "document"), first)
	case pc.Dir && pc.Files == 0:
		err = errors.New("holds no .yaml, .yml or .json file (0 files read)")
	case pc.Dir:
		err = fmt.Errorf("holds no Kubernetes object (%s read, 0 objects; an object has apiVersion and kind)", cli.Plural(pc.Files, "file"))
	default:
		err = errors.New("holds no Kubernetes object (0 objects read; an object has apiVersion and kind)")
	}
	return &ErrBadInput{Flag: "-f", Path: pc.Path, Err: err}
}

// Read scans the files, then builds and scans the kustomization. What was
// read before an error is returned with it. A path that does not exist,
// a -f path with no object in it and a kustomization that builds none
// are an *ErrBadInput.
func (m *ManifestSource) Read(ctx context.Context) (ManifestSourceResult, error) {
	var out ManifestSourceResult
	if len(m.Filenames) > 0 {
		res, err := m.Scanner.ScanPaths(ctx, m.Filenames, m.Stdin)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			return out, badPath("-f", "", err)
		}
		out = ManifestSourceResult{Findings: res.Findings, Skipped: res.Skipped, Files: res.Files, Objects: res.Objects}
		for _, pc := range res.PerPath {
			if pc.Objects == 0 {
				return out, emptyPath(pc, res.Skipped)
			}
		}
	}
	if m.Kustomize != "" {
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		rm, err := k.Run(filesys.MakeFsOnDisk(), m.Kustomize)
		if err != nil {
			return out, &ErrBadInput{Flag: "-k", Path: m.Kustomize, Err: fmt.Errorf("the kustomization does not build: %w", err)}
		}
		y, err := rm.AsYaml()
		if err != nil {
			return out, &ErrBadInput{Flag: "-k", Path: m.Kustomize, Err: fmt.Errorf("the kustomization does not build: %w", err)}
		}
		res := m.Scanner.Scan("kustomize "+m.Kustomize, y)
		out.Findings = append(out.Findings, res.Findings...)
		out.Skipped = append(out.Skipped, res.Skipped...)
		out.Files++
		out.Objects += res.Objects
		if res.Objects == 0 && len(res.Skipped) == 0 {
			return out, &ErrBadInput{Flag: "-k", Path: m.Kustomize, Err: errors.New("the kustomization builds no object (0 objects read)")}
		}
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
