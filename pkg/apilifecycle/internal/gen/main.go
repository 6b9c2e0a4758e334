// Command gen writes the built-in API lifecycle table of package
// apilifecycle from the prerelease-lifecycle markers that
// prerelease-lifecycle-gen compiled into zz_generated.prerelease-lifecycle.go
// files (APILifecycleIntroduced, Deprecated, Removed and Replacement).
//
// It reads, newest first: k8s.io/api and k8s.io/apiextensions-apiserver at
// the versions this module requires, k8s.io/kube-aggregator at the same
// release, and older k8s.io/api releases from the module proxy for kinds
// that have since been deleted (PodSecurityPolicy, HPA v2beta1/v2beta2,
// resource.k8s.io/v1alpha2, ...). The newest release that still has a kind
// wins. The release a replacement became available in is its own
// introduced marker when it is a prerelease kind, otherwise the oldest
// scanned release whose package declares the kind, or, for kinds that
// predate the scanned releases, the GA release from the table gaSince.
//
// Usage (from package apilifecycle): go run ./internal/gen -o zz_generated.lifecycle.go
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle/internal/gen/modproxy"
)

// olderAPI are older k8s.io/api releases read for kinds deleted since,
// newest first. Pinned so the output is reproducible.
var olderAPI = []string{
	"v0.36.6", "v0.35.10", "v0.34.13", "v0.33.13", "v0.32.13", "v0.31.14", "v0.30.14",
	"v0.29.15", "v0.28.3", "v0.27.4", "v0.26.9", "v0.25.9", "v0.24.3", "v0.23.16",
	"v0.22.5", "v0.21.1", "v0.20.6",
}

// existenceOnly are releases read only to find when a GA kind first existed.
var existenceOnly = []string{"v0.17.5"}

// gaSince is the release in which GA kinds that predate every scanned
// release first became available (Kubernetes release notes). It is used only
// for replacement availability.
var gaSince = map[string]string{
	"apps/v1":                            "1.9",
	"networking.k8s.io/v1/NetworkPolicy": "1.7",
	"rbac.authorization.k8s.io/v1":       "1.8",
	"storage.k8s.io/v1/StorageClass":     "1.6",
	"storage.k8s.io/v1/VolumeAttachment": "1.13",
	"storage.k8s.io/v1/CSINode":          "1.17",
	"admissionregistration.k8s.io/v1":    "1.16",
	"apiextensions.k8s.io/v1":            "1.16",
	"apiregistration.k8s.io/v1":          "1.10",
	"scheduling.k8s.io/v1":               "1.14",
	"coordination.k8s.io/v1":             "1.14",
	"authentication.k8s.io/v1":           "1.6",
	"authorization.k8s.io/v1":            "1.6",
	"autoscaling/v1":                     "1.2",
	"batch/v1/Job":                       "1.2",
	"policy/v1/Eviction":                 "1.22",
	"v1":                                 "1.0",
}

type release struct {
	module  string
	version string
	dir     string
	// markers: read lifecycle markers (false: only type existence).
	markers bool
}

type gvk struct{ Group, Version, Kind string }

func (g gvk) apiVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

type mm struct{ major, minor int }

func (m mm) String() string {
	if m.major == 0 && m.minor == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", m.major, m.minor)
}

type entry struct {
	gvk
	introduced, deprecated, removed mm
	replacement                     gvk
	hasReplacement                  bool
	source                          string
}

var versionDir = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

func main() {
	out := flag.String("o", "zz_generated.lifecycle.go", "Output file.")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	apiVer, apiDir, err := required("k8s.io/api")
	if err != nil {
		return err
	}
	extVer, extDir, err := required("k8s.io/apiextensions-apiserver")
	if err != nil {
		return err
	}
	aggDir, err := modproxy.Download("k8s.io/kube-aggregator", apiVer)
	if err != nil {
		return err
	}
	releases := []release{
		{"k8s.io/api", apiVer, apiDir, true},
		{"k8s.io/apiextensions-apiserver", extVer, filepath.Join(extDir, "pkg", "apis"), true},
		{"k8s.io/kube-aggregator", apiVer, filepath.Join(aggDir, "pkg", "apis"), true},
	}
	for _, v := range append(append([]string{}, olderAPI...), existenceOnly...) {
		d, err := modproxy.Download("k8s.io/api", v)
		if err != nil {
			return err
		}
		releases = append(releases, release{"k8s.io/api", v, d, !contains(existenceOnly, v)})
	}

	entries := map[gvk]*entry{}
	var order []gvk
	// kinds[release index][group/version] = set of kinds declared there
	kinds := make([]map[string]map[string]bool, len(releases))
	for i, r := range releases {
		pkgs, err := packages(r.dir)
		if err != nil {
			return fmt.Errorf("%s@%s: %w", r.module, r.version, err)
		}
		kinds[i] = map[string]map[string]bool{}
		for _, p := range pkgs {
			gv := gvk{Group: p.group, Version: p.version}.apiVersion()
			if kinds[i][gv] == nil {
				kinds[i][gv] = map[string]bool{}
			}
			for k := range p.types {
				kinds[i][gv][k] = true
			}
			if !r.markers {
				continue
			}
			for _, e := range p.entries {
				if _, ok := entries[e.gvk]; ok {
					continue // a newer release already has it
				}
				e := e
				e.source = r.module + "@" + r.version
				entries[e.gvk] = &e
				order = append(order, e.gvk)
			}
		}
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})

	var buf bytes.Buffer
	fmt.Fprintf(&buf, "// Code generated by internal/gen from the prerelease-lifecycle markers of %s, %s and k8s.io/kube-aggregator@%s,\n",
		"k8s.io/api@"+apiVer, "k8s.io/apiextensions-apiserver@"+extVer, apiVer)
	fmt.Fprintf(&buf, "// and of k8s.io/api %s for kinds deleted since. DO NOT EDIT.\n\n", strings.Join(olderAPI, ", "))
	buf.WriteString("package apilifecycle\n\n")
	fmt.Fprintf(&buf, "// builtinSource is the pinned release the built-in table follows.\nconst builtinSource = %q\n\n", "k8s.io/api@"+apiVer)
	buf.WriteString("var builtin = []Entry{\n")
	for _, k := range order {
		e := entries[k]
		fmt.Fprintf(&buf, "\t{Group: %q, Version: %q, Kind: %q, Resource: %q", e.Group, e.Version, e.Kind, resourceFor(e.Kind))
		writeRelease(&buf, "Introduced", e.introduced)
		writeRelease(&buf, "Deprecated", e.deprecated)
		writeRelease(&buf, "Removed", e.removed)
		if e.hasReplacement && e.replacement.Kind != "" {
			fmt.Fprintf(&buf, ", Replacement: GVK{Group: %q, Version: %q, Kind: %q}", e.replacement.Group, e.replacement.Version, e.replacement.Kind)
			if av := available(e.replacement, entries, releases, kinds); av != (mm{}) {
				writeRelease(&buf, "ReplacementAvailable", av)
			}
		}
		fmt.Fprintf(&buf, ", Source: %q},\n", e.source)
	}
	buf.WriteString("}\n")
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return fmt.Errorf("formatting output: %w", err)
	}
	return os.WriteFile(out, src, 0o644)
}

func writeRelease(buf *bytes.Buffer, field string, r mm) {
	if r == (mm{}) {
		return
	}
	fmt.Fprintf(buf, ", %s: R(%d, %d)", field, r.major, r.minor)
}

// available returns the first release serving the replacement kind.
func available(r gvk, entries map[gvk]*entry, releases []release, kinds []map[string]map[string]bool) mm {
	if e, ok := entries[r]; ok && e.introduced != (mm{}) {
		return e.introduced
	}
	// Oldest k8s.io/api release declaring the kind (releases are newest
	// first after the three current modules).
	oldest := -1
	for i := len(releases) - 1; i >= 0; i-- {
		if kinds[i][r.apiVersion()][r.Kind] {
			oldest = i
			break
		}
	}
	if oldest >= 0 && oldest != len(releases)-1 {
		if v, err := minorOf(releases[oldest].version); err == nil {
			return v
		}
	}
	for _, key := range []string{r.apiVersion() + "/" + r.Kind, r.apiVersion()} {
		if s, ok := gaSince[key]; ok {
			parts := strings.SplitN(s, ".", 2)
			maj, _ := strconv.Atoi(parts[0])
			mi, _ := strconv.Atoi(parts[1])
			return mm{maj, mi}
		}
	}
	if oldest >= 0 {
		v, _ := minorOf(releases[oldest].version)
		return v
	}
	return mm{}
}

// minorOf maps a k8s.io module version v0.N.x to Kubernetes release 1.N.
func minorOf(v string) (mm, error) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return mm{}, fmt.Errorf("bad version %q", v)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return mm{}, err
	}
	return mm{1, n}, nil
}

type pkg struct {
	group, version string
	types          map[string]bool
	entries        []entry
}

// packages reads every API package (a directory named like a version with a
// register.go declaring GroupName) below root.
func packages(root string) ([]pkg, error) {
	var out []pkg
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" || d.Name() == "internal" {
			return filepath.SkipDir
		}
		if !versionDir.MatchString(d.Name()) {
			return nil
		}
		group, ok, err := groupName(filepath.Join(path, "register.go"))
		if err != nil || !ok {
			return err
		}
		p := pkg{group: group, version: d.Name(), types: map[string]bool{}}
		type source struct {
			path string
			src  []byte
		}
		var srcs []source
		lc := &collector{byKind: map[string]*entry{}}
		files, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, f := range files {
			n := f.Name()
			if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(path, n))
			if err != nil {
				return err
			}
			for _, m := range typeDecl.FindAllSubmatch(b, -1) {
				p.types[string(m[1])] = true
			}
			// Methods come from prerelease-lifecycle-gen and, for a few
			// GA kinds (core/v1 ComponentStatus, Endpoints), from a
			// hand-written lifecycle.go.
			if bytes.Contains(b, []byte("APILifecycle")) {
				if err := markers(filepath.Join(path, n), b, group, d.Name(), lc); err != nil {
					return err
				}
			} else if bytes.Contains(b, []byte(tagPrefix)) {
				srcs = append(srcs, source{filepath.Join(path, n), b})
			}
		}
		p.entries = lc.list()
		if p.entries == nil {
			// Packages that were never run through prerelease-lifecycle-gen
			// (resource.k8s.io/v1alpha2, for one) still carry the tags.
			for _, s := range srcs {
				es, err := tags(s.path, s.src, group, d.Name())
				if err != nil {
					return err
				}
				p.entries = append(p.entries, es...)
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

var typeDecl = regexp.MustCompile(`(?m)^type ([A-Z][A-Za-z0-9]*) struct`)

// groupName reads `const GroupName = "..."` from a register.go.
func groupName(path string) (string, bool, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.SkipObjectResolution)
	if err != nil {
		return "", false, err
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name == "GroupName" && i < len(vs.Values) {
					if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						v, err := strconv.Unquote(bl.Value)
						return v, err == nil, err
					}
				}
			}
		}
	}
	return "", false, nil
}

// collector merges the APILifecycle* methods of one package's files by kind.
type collector struct {
	byKind map[string]*entry
	kinds  []string
}

func (c *collector) get(group, version, kind string) *entry {
	e := c.byKind[kind]
	if e == nil {
		e = &entry{gvk: gvk{Group: group, Version: version, Kind: kind}}
		c.byKind[kind] = e
		c.kinds = append(c.kinds, kind)
	}
	return e
}

func (c *collector) list() []entry {
	if len(c.kinds) == 0 {
		return nil
	}
	sort.Strings(c.kinds)
	out := make([]entry, 0, len(c.kinds))
	for _, k := range c.kinds {
		out = append(out, *c.byKind[k])
	}
	return out
}

// markers reads the APILifecycle* methods of one source file.
func markers(path string, src []byte, group, version string, c *collector) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || fd.Body == nil || len(fd.Body.List) != 1 {
			continue
		}
		if !strings.HasPrefix(fd.Name.Name, "APILifecycle") {
			continue
		}
		kind := recvName(fd.Recv.List[0].Type)
		if kind == "" || strings.HasSuffix(kind, "List") {
			continue
		}
		ret, ok := fd.Body.List[0].(*ast.ReturnStmt)
		if !ok {
			continue
		}
		e := c.get(group, version, kind)
		switch fd.Name.Name {
		case "APILifecycleIntroduced":
			e.introduced, err = pair(ret)
		case "APILifecycleDeprecated":
			e.deprecated, err = pair(ret)
		case "APILifecycleRemoved":
			e.removed, err = pair(ret)
		case "APILifecycleReplacement":
			e.replacement, err = gvkLit(ret)
			e.hasReplacement = err == nil
			// networking.k8s.io/v1beta1 IngressClass names IngressClassList
			// as its replacement; the kind meant is IngressClass.
			e.replacement.Kind = strings.TrimSuffix(e.replacement.Kind, "List")
		}
		if err != nil {
			return fmt.Errorf("%s: %s.%s: %w", path, kind, fd.Name.Name, err)
		}
	}
	return nil
}

const tagPrefix = "+k8s:prerelease-lifecycle-gen:"

// tags reads +k8s:prerelease-lifecycle-gen tags from the doc comments of
// the types in one source file and applies prerelease-lifecycle-gen's
// defaults: deprecated is introduced plus three minors, removed is
// deprecated plus three minors.
func tags(path string, src []byte, group, version string) ([]entry, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []entry
	prevEnd := token.NoPos
	for _, d := range f.Decls {
		start, end := prevEnd, d.End()
		prevEnd = end
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE || len(gd.Specs) != 1 {
			continue
		}
		// Tags may sit in their own comment group, separated from the doc
		// comment by a blank line: take every group since the last decl.
		var comments []*ast.Comment
		for _, cg := range f.Comments {
			if cg.Pos() > start && cg.End() <= gd.Pos() {
				comments = append(comments, cg.List...)
			}
		}
		ts := gd.Specs[0].(*ast.TypeSpec)
		if strings.HasSuffix(ts.Name.Name, "List") {
			continue
		}
		e := entry{gvk: gvk{Group: group, Version: version, Kind: ts.Name.Name}}
		found := false
		for _, c := range comments {
			t := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if !strings.HasPrefix(t, tagPrefix) {
				continue
			}
			k, v, _ := strings.Cut(strings.TrimPrefix(t, tagPrefix), "=")
			switch k {
			case "introduced", "deprecated", "removed":
				r, err := parseMM(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", path, ts.Name.Name, err)
				}
				found = true
				switch k {
				case "introduced":
					e.introduced = r
				case "deprecated":
					e.deprecated = r
				case "removed":
					e.removed = r
				}
			case "replacement":
				parts := strings.Split(v, ",")
				if len(parts) == 3 {
					e.replacement = gvk{Group: parts[0], Version: parts[1], Kind: parts[2]}
					e.hasReplacement = true
				}
			}
		}
		if !found {
			continue
		}
		if e.deprecated == (mm{}) && e.introduced != (mm{}) {
			e.deprecated = mm{e.introduced.major, e.introduced.minor + 3}
		}
		if e.removed == (mm{}) && e.deprecated != (mm{}) {
			e.removed = mm{e.deprecated.major, e.deprecated.minor + 3}
		}
		out = append(out, e)
	}
	return out, nil
}

func parseMM(s string) (mm, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok {
		return mm{}, fmt.Errorf("bad release %q", s)
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return mm{}, fmt.Errorf("bad release %q", s)
	}
	return mm{x, y}, nil
}

func recvName(t ast.Expr) string {
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func pair(r *ast.ReturnStmt) (mm, error) {
	if len(r.Results) != 2 {
		return mm{}, fmt.Errorf("want two results")
	}
	var v [2]int
	for i, x := range r.Results {
		bl, ok := x.(*ast.BasicLit)
		if !ok || bl.Kind != token.INT {
			return mm{}, fmt.Errorf("want integer literals")
		}
		n, err := strconv.Atoi(bl.Value)
		if err != nil {
			return mm{}, err
		}
		v[i] = n
	}
	return mm{v[0], v[1]}, nil
}

func gvkLit(r *ast.ReturnStmt) (gvk, error) {
	if len(r.Results) != 1 {
		return gvk{}, fmt.Errorf("want one result")
	}
	cl, ok := r.Results[0].(*ast.CompositeLit)
	if !ok {
		return gvk{}, fmt.Errorf("want a composite literal")
	}
	var g gvk
	for _, el := range cl.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		bl, ok := kv.Value.(*ast.BasicLit)
		if key == nil || !ok || bl.Kind != token.STRING {
			continue
		}
		s, err := strconv.Unquote(bl.Value)
		if err != nil {
			return gvk{}, err
		}
		switch key.Name {
		case "Group":
			g.Group = s
		case "Version":
			g.Version = s
		case "Kind":
			g.Kind = s
		}
	}
	return g, nil
}

// notResources are kinds that are request or response bodies of
// subresources or reviews rather than stored resources of their own name.
var notResources = map[string]string{
	"RangeAllocation":     "",
	"SerializedReference": "",
	"Scale":               "",
	"DeploymentRollback":  "",
	"Eviction":            "",
	"AdmissionReview":     "",
	"ImageReview":         "",
	"ConversionReview":    "",
	"Endpoints":           "endpoints",
	"PodStatusResult":     "",
}

// resourceFor guesses the plural resource of a kind the way the apiserver
// names them (lower-case plural).
func resourceFor(kind string) string {
	if r, ok := notResources[kind]; ok {
		return r
	}
	if strings.HasSuffix(kind, "Options") {
		return ""
	}
	l := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(l, "parameters"):
		return l
	case strings.HasSuffix(l, "s"), strings.HasSuffix(l, "x"), strings.HasSuffix(l, "ch"), strings.HasSuffix(l, "sh"):
		return l + "es"
	case strings.HasSuffix(l, "y") && len(l) > 1 && !strings.ContainsRune("aeiou", rune(l[len(l)-2])):
		return l[:len(l)-1] + "ies"
	}
	return l + "s"
}

// required returns the version and directory of a module this module requires.
func required(module string) (string, string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", module).Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", err
	}
	if m.Dir == "" {
		d, err := modproxy.Download(module, m.Version)
		return m.Version, d, err
	}
	return m.Version, m.Dir, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
