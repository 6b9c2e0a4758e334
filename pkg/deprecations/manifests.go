package deprecations

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	yaml3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// maxValidatedDoc is the largest document with a finding that is also
// parsed in full to report whether it is valid YAML.
const maxValidatedDoc = 16 << 10

// DefaultMaxFileSize bounds the size of one manifest file.
const DefaultMaxFileSize = 64 << 20

// TemplateHint is the hint for files with unrendered template syntax.
const TemplateHint = "helm template RELEASE CHART | kubectl deprecations -f -"

// ManifestScanner finds deprecated and removed APIs in manifests: multi-
// document YAML, JSON (also concatenated streams), List kinds, Helm release
// Secrets, with or without a BOM and CRLF line endings. Files with
// unrendered template syntax are scanned line by line for literal
// apiVersion and kind keys, and reported as partly scanned. Files that do
// not parse are reported, never silently dropped.
type ManifestScanner struct {
	// Table is the lifecycle table; objects whose kind has no deprecation
	// or removal in it are not reported.
	Table *apilifecycle.Table
	// MaxFileSize bounds one file (DefaultMaxFileSize when 0).
	MaxFileSize int64
	// MaxRelease bounds one decompressed Helm release record.
	MaxRelease int64
	// Workers reads files in parallel (GOMAXPROCS when 0).
	Workers int

	once  sync.Once
	kinds map[string][]string
	// observe, when set, sees every object emit sees: tests compare the
	// readers with it.
	observe func(object)
}

// ManifestResult is what a scan found.
type ManifestResult struct {
	Findings []Finding
	Skipped  []Skipped
	// Files and Objects count what was read.
	Files   int
	Objects int
	// PerPath counts what was read under each path ScanPaths was given,
	// in the order given.
	PerPath []PathCount
}

// PathCount is what was read under one path given to ScanPaths: the
// files found (one for a file or stdin), the objects in them, and the
// entries of Skipped about them.
type PathCount struct {
	Path                    string
	Dir                     bool
	Files, Objects, Skipped int
}

func (s *ManifestScanner) init() {
	s.once.Do(func() {
		if s.Table == nil {
			s.Table = apilifecycle.Builtin()
		}
		s.kinds = map[string][]string{}
		for _, e := range s.Table.Entries() {
			if interesting(e) {
				s.kinds[e.Kind] = append(s.kinds[e.Kind], e.APIVersion())
			}
		}
		for k := range s.kinds {
			sort.Strings(s.kinds[k])
		}
	})
}

// manifestExt reports whether a file found while walking a directory is a
// manifest by its name.
func manifestExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Expand lists the files named by paths: files as given, directories
// walked recursively for .yaml, .yml and .json files (hidden directories
// skipped), "-" kept as is for stdin. A path that does not exist is an error.
func Expand(paths []string) ([]string, error) {
	var out []string
	err := walkPaths(paths, func(e walkEntry) error {
		out = append(out, e.path)
		e.done()
		return nil
	})
	return out, err
}

// walkPaths calls fn for each file Expand lists, in the same order, as the
// walk finds it. Every path is checked before the first call, so a path
// that does not exist fails before anything is read. fn owns the entry it
// is given and calls its done method once it has read the file (or will
// not), also when it returns an error.
func walkPaths(paths []string, fn func(walkEntry) error) error {
	dirs := make([]bool, len(paths))
	for i, p := range paths {
		if p == "-" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		dirs[i] = fi.IsDir()
	}
	for i, p := range paths {
		if !dirs[i] {
			if err := fn(walkEntry{path: p, arg: i}); err != nil {
				return err
			}
			continue
		}
		if err := walkDir(p, func(e walkEntry) error {
			e.arg = i
			return fn(e)
		}); err != nil {
			return err
		}
	}
	return nil
}

// ScanPaths scans files and directories (see Expand); "-" reads stdin.
// Files are read while the directories are still being walked, by
// Workers goroutines that each reuse one read buffer; the result is in
// the order of Expand whatever order the files were read in.
func (s *ManifestScanner) ScanPaths(ctx context.Context, paths []string, stdin io.Reader) (ManifestResult, error) {
	s.init()
	workers := s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type job struct {
		i int
		e walkEntry
	}
	type done struct {
		i   int
		res ManifestResult
	}
	type tally struct {
		files, objects int
		perPath        []PathCount
		// Only the files with something to report: most hold nothing,
		// and an entry for each of thousands of files (and a slice of
		// results as long) was a megabyte on the heap at its peak.
		reported []done
	}
	jobs := make(chan job, 256)
	perWorker := make([]tally, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			t := &perWorker[w]
			t.perPath = make([]PathCount, len(paths))
			for j := range jobs {
				r := s.scanFile(j.e, stdin, &buf)
				j.e.done()
				t.files += r.Files
				t.objects += r.Objects
				pc := &t.perPath[j.e.arg]
				pc.Files += r.Files
				pc.Objects += r.Objects
				pc.Skipped += len(r.Skipped)
				if len(r.Findings) > 0 || len(r.Skipped) > 0 {
					t.reported = append(t.reported, done{j.i, ManifestResult{Findings: r.Findings, Skipped: r.Skipped}})
				}
			}
		}()
	}
	n := 0
	var ctxErr error
	walkErr := walkPaths(paths, func(e walkEntry) error {
		if ctxErr = ctx.Err(); ctxErr != nil {
			e.done()
			return ctxErr
		}
		jobs <- job{n, e}
		n++
		return nil
	})
	close(jobs)
	wg.Wait()
	if walkErr != nil && ctxErr == nil {
		return ManifestResult{}, walkErr
	}
	var reported []done
	var res ManifestResult
	var findings, skipped int
	res.PerPath = make([]PathCount, len(paths))
	for i, p := range paths {
		res.PerPath[i].Path = p
		if p != "-" {
			fi, err := os.Stat(p)
			res.PerPath[i].Dir = err == nil && fi.IsDir()
		}
	}
	for _, t := range perWorker {
		res.Files += t.files
		res.Objects += t.objects
		for i, pc := range t.perPath {
			res.PerPath[i].Files += pc.Files
			res.PerPath[i].Objects += pc.Objects
			res.PerPath[i].Skipped += pc.Skipped
		}
		reported = append(reported, t.reported...)
		for _, d := range t.reported {
			findings += len(d.res.Findings)
			skipped += len(d.res.Skipped)
		}
	}
	// In the order of Expand, whatever order the files were read in.
	slices.SortFunc(reported, func(a, b done) int { return cmp.Compare(a.i, b.i) })
	// Sized once: appending thousands of findings one file at a time
	// copied them over and over as the slices grew.
	res.Findings, res.Skipped = make([]Finding, 0, findings), make([]Skipped, 0, skipped)
	for _, d := range reported {
		res.Findings = append(res.Findings, d.res.Findings...)
		res.Skipped = append(res.Skipped, d.res.Skipped...)
	}
	return res, ctxErr
}

func (s *ManifestScanner) maxFile() int64 {
	if s.MaxFileSize > 0 {
		return s.MaxFileSize
	}
	return DefaultMaxFileSize
}

// scanFile reads and scans one file; buf is the worker's read buffer.
func (s *ManifestScanner) scanFile(e walkEntry, stdin io.Reader, buf *[]byte) ManifestResult {
	path := e.path
	tooLarge := func(name string) ManifestResult {
		return ManifestResult{Files: 1, Skipped: []Skipped{{Source: SourceManifests, File: name,
			Reason: fmt.Sprintf("file is larger than %d bytes", s.maxFile())}}}
	}
	cannotRead := func(name string, err error) ManifestResult {
		return ManifestResult{Files: 1, Skipped: []Skipped{{Source: SourceManifests, File: name, Reason: "cannot read: " + err.Error()}}}
	}
	if path != "-" {
		data, size, ok, err := e.read(*buf, s.maxFile())
		if ok {
			if cap(data) > cap(*buf) {
				*buf = data[:0]
			}
			switch {
			case err != nil:
				return cannotRead(path, err)
			case size > s.maxFile():
				return tooLarge(path)
			}
			res := s.Scan(path, data)
			res.Files = 1
			return res
		}
	}
	name := path
	var r io.Reader
	size := int64(0)
	if path == "-" {
		name = "<stdin>"
		if stdin == nil {
			stdin = bytes.NewReader(nil)
		}
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return cannotRead(name, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err == nil && fi.Size() > s.maxFile() {
			return tooLarge(name)
		}
		r = f
		if err == nil && fi.Mode().IsRegular() {
			// Read in one go into a buffer of the file's size (and a
			// little more, should it grow meanwhile) rather than through
			// io.ReadAll's growing buffers.
			size = fi.Size() + 512
		}
	}
	data, err := readAtMost(r, s.maxFile()+1, size)
	if err != nil {
		return cannotRead(name, err)
	}
	if int64(len(data)) > s.maxFile() {
		return tooLarge(name)
	}
	res := s.Scan(name, data)
	res.Files = 1
	return res
}

// readAtMost reads r to its end or to limit bytes, starting with a buffer
// of hint bytes when hint > 0.
func readAtMost(r io.Reader, limit, hint int64) ([]byte, error) {
	if hint <= 0 {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	buf := make([]byte, 0, min(hint, limit))
	lr := io.LimitReader(r, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Scan scans the contents of one file. name is used in locations.
func (s *ManifestScanner) Scan(name string, data []byte) ManifestResult {
	s.init()
	var res ManifestResult
	head := data
	if len(head) > 8192 {
		head = head[:8192]
	}
	if bytes.IndexByte(head, 0) >= 0 {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Reason: "binary file"})
		return res
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first := leadingSpace(data)
	if first < len(data) && (data[first] == '{' || data[first] == '[') && !bytes.HasPrefix(data[first:], []byte("{{")) {
		// JSON, or YAML in flow style: JSON first, YAML when the first
		// value is not JSON.
		if s.scanJSON(name, data, 0, &res) {
			return res
		}
		res = ManifestResult{}
	}
	s.scanYAML(name, data, 0, &res)
	return res
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// object is one apiVersion/kind pair found in a manifest.
type object struct {
	apiVersion, kind, name, namespace string
	line                              int
	detail                            string
}

func (s *ManifestScanner) emit(name string, o object, res *ManifestResult) {
	res.Objects++
	if s.observe != nil {
		s.observe(o)
	}
	// A document that is not valid UTF-8 is read line by line, and its
	// bytes would reach the table and -o yaml as they are.
	name, o.name, o.namespace = validUTF8(name), validUTF8(o.name), validUTF8(o.namespace)
	if o.kind == "" || strings.Contains(o.kind, "{{") {
		return
	}
	if o.apiVersion == "" || strings.Contains(o.apiVersion, "{{") {
		c, ok := s.kinds[o.kind]
		if !ok || o.apiVersion == "" {
			return
		}
		// A literal prefix ("scheduling.k8s.io/{{ ... }}") narrows the candidates.
		prefix := o.apiVersion[:strings.Index(o.apiVersion, "{{")]
		var cands []string
		for _, av := range c {
			if strings.HasPrefix(av, prefix) {
				cands = append(cands, av)
			}
		}
		if len(cands) == 0 {
			return
		}
		res.Findings = append(res.Findings, Finding{
			Source: SourceManifests, Location: fileLine(name, o.line), File: name, Line: o.line,
			APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, Namespace: o.namespace,
			Undeterminable: true, Candidates: cands,
			Detail: "templated apiVersion: render the chart to tell which version it uses",
		})
		return
	}
	e, ok := s.Table.Lookup(o.apiVersion, o.kind)
	if !ok || !interesting(e) {
		return
	}
	res.Findings = append(res.Findings, Finding{
		Source: SourceManifests, Location: fileLine(name, o.line), File: name, Line: o.line,
		APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, Namespace: o.namespace, Detail: o.detail,
	})
}

// yamlDoc collects what the line scanner saw in one YAML document.
type yamlDoc struct {
	startLine   int
	start, end  int
	apiVersions []lineVal
	kinds       []lineVal
	name, ns    string
	inMeta      bool
	metaIndent  int
	hasItems    bool
	templated   bool
	content     bool
	topKey      bool
	needParse   bool
	helmRecord  bool
}

type lineVal struct {
	line int
	val  string
}

// scanYAML scans YAML line by line. Documents that the line scanner cannot
// read alone (flow style, List kinds, Helm release Secrets, documents
// without top-level keys) are parsed in full.
func (s *ManifestScanner) scanYAML(name string, data []byte, lineBase int, res *ManifestResult) {
	var (
		doc       = yamlDoc{startLine: lineBase + 1}
		line      = lineBase
		off       = 0
		templated = false
		// The next template action and whether the file names a Helm
		// release record anywhere: searched for once in the whole file
		// rather than on every line (most files have neither, and the
		// per-line searches cost a tenth of a scan).
		action = bytes.Index(data, []byte("{{"))
		helm   = bytes.Contains(data, []byte(helmSecretType))
	)
	finish := func(end int) {
		doc.end = end
		if doc.templated {
			templated = true
		}
		s.finishDoc(name, data, &doc, res)
	}
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		var raw []byte
		next := len(data)
		if nl >= 0 {
			raw = data[off : off+nl]
			next = off + nl + 1
		} else {
			raw = data[off:]
		}
		line++
		l := trimCR(raw)
		if isDocSeparator(l) {
			finish(off)
			doc = yamlDoc{startLine: line + 1, start: next}
			off = next
			continue
		}
		if action >= 0 && action < off {
			// The action found last was on an earlier line.
			if action = bytes.Index(data[off:], []byte("{{")); action >= 0 {
				action += off
			}
		}
		if action >= 0 && action < off+len(l) {
			doc.templated = true
		}
		s.scanLine(&doc, l, line, helm)
		off = next
	}
	finish(len(data))
	if templated {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Partial: true,
			Reason: "unrendered template syntax: scanned line by line for literal apiVersion and kind", Hint: TemplateHint})
	}
}

// trimCR drops the carriage returns that end a line.
func trimCR(l []byte) []byte {
	for len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	return l
}

// trimIndent drops the spaces and tabs that start a line.
func trimIndent(l []byte) []byte {
	i := 0
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	return l[i:]
}

func isDocSeparator(l []byte) bool {
	if len(l) < 3 {
		return false
	}
	if (l[0] == '-' && l[1] == '-' && l[2] == '-') || (l[0] == '.' && l[1] == '.' && l[2] == '.') {
		return len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '#'
	}
	return false
}

// scanLine reads one line of a document; helm says whether the file names
// a Helm release record anywhere.
func (s *ManifestScanner) scanLine(doc *yamlDoc, l []byte, line int, helm bool) {
	t := trimIndent(l)
	if len(t) == 0 || t[0] == '#' {
		return
	}
	if len(t) > 1 && t[0] == '{' && t[1] == '{' {
		return // a template directive line
	}
	if !doc.content {
		doc.content = true
	}
	if helm && bytes.Contains(l, []byte(helmSecretType)) {
		doc.helmRecord = true
	}
	indent := len(l) - len(t)
	if indent > 0 {
		if doc.inMeta {
			if doc.metaIndent == 0 {
				doc.metaIndent = indent
			}
			if indent == doc.metaIndent {
				k, v, ok := splitKey(t)
				if ok {
					switch string(k) {
					case "name":
						if doc.name == "" {
							doc.name = cleanValue(v)
						}
					case "namespace":
						if doc.ns == "" {
							doc.ns = cleanValue(v)
						}
					}
				}
			}
		} else if !doc.topKey {
			doc.needParse = true // an indented document
		}
		return
	}
	switch t[0] {
	case '{', '[':
		doc.needParse = true
		return
	case '-':
		return // a top-level sequence item: not an object
	}
	k, v, ok := splitKey(t)
	if !ok {
		return
	}
	doc.topKey = true
	doc.inMeta = false
	switch string(k) {
	case "apiVersion":
		doc.apiVersions = append(doc.apiVersions, lineVal{line, cleanValue(v)})
	case "kind":
		doc.kinds = append(doc.kinds, lineVal{line, cleanValue(v)})
	case "metadata":
		doc.inMeta = true
		doc.metaIndent = 0
		if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
			doc.needParse = true
		}
	case "items":
		doc.hasItems = true
	}
}

// splitKey splits "key: value" (the key may be quoted). The key is a
// slice of t: the callers compare it without making a string of every
// key they read.
func splitKey(t []byte) ([]byte, []byte, bool) {
	if t[0] == '"' || t[0] == '\'' {
		end := bytes.IndexByte(t[1:], t[0])
		if end < 0 {
			return nil, nil, false
		}
		key := t[1 : end+1]
		rest := t[end+2:]
		if len(rest) == 0 || rest[0] != ':' {
			return nil, nil, false
		}
		return key, rest[1:], true
	}
	i := bytes.IndexByte(t, ':')
	if i <= 0 {
		return nil, nil, false
	}
	if i+1 < len(t) && t[i+1] != ' ' && t[i+1] != '\t' {
		return nil, nil, false
	}
	return bytes.TrimRight(t[:i], " \t"), t[i+1:], true
}

// cleanValue reads a scalar value: trims it, drops a trailing comment and
// surrounding quotes.
// validUTF8 replaces invalid UTF-8 in s with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s // without the copy ToValidUTF8 makes of each
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func cleanValue(v []byte) string {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return ""
	}
	if s[0] == '"' || s[0] == '\'' {
		if end := strings.IndexByte(s[1:], s[0]); end >= 0 {
			return s[1 : end+1]
		}
		return s
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if i := strings.Index(s, "\t#"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

func isListKind(k string) bool { return k == "List" || strings.HasSuffix(k, "List") }

func (s *ManifestScanner) finishDoc(name string, data []byte, doc *yamlDoc, res *ManifestResult) {
	if !doc.content {
		return
	}
	listKind := false
	for _, k := range doc.kinds {
		if isListKind(k.val) {
			listKind = true
		}
	}
	full := doc.needParse || (doc.hasItems && listKind) || doc.helmRecord ||
		(!doc.topKey && len(doc.apiVersions) == 0)
	if full && !doc.templated {
		d := data[doc.start:doc.end]
		if listKind && doc.hasItems && doc.topKey && !doc.needParse && !doc.helmRecord &&
			plainYAML(d) && s.listItems(name, d, doc.startLine-1, res) {
			return
		}
		s.parseYAMLDoc(name, d, doc.startLine-1, res)
		return
	}
	if len(doc.apiVersions) == 0 || len(doc.kinds) == 0 {
		if len(doc.kinds) > 0 || len(doc.apiVersions) > 0 {
			res.Objects++ // half an object (a templated branch); nothing to judge
			return
		}
		// No object in it, but a document that does not parse is reported,
		// not taken for plain YAML with nothing to read.
		if d := data[doc.start:doc.end]; !doc.templated && !plainYAML(d) {
			var n yaml3.Node
			if err := yaml3.Unmarshal(d, &n); err != nil {
				res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: doc.startLine,
					Reason: "does not parse: " + yamlErr(err, doc.startLine-1)})
			}
		}
		return
	}
	before := len(res.Findings)
	multi := len(doc.apiVersions) > 1 || len(doc.kinds) > 1
	for i, av := range doc.apiVersions {
		// Pair each apiVersion with the kind of the same branch: the kind at
		// the same index when the counts match, else the only or nearest one.
		k := doc.kinds[0]
		if len(doc.kinds) == len(doc.apiVersions) {
			k = doc.kinds[i]
		} else if len(doc.kinds) > 1 {
			k = nearest(doc.kinds, av.line)
		}
		o := object{apiVersion: av.val, kind: k.val, name: doc.name, namespace: doc.ns, line: min(av.line, k.line)}
		if multi {
			o.line = av.line
			o.detail = "one branch of a template conditional"
		}
		if i > 0 {
			res.Objects-- // count the object once
		}
		s.emit(name, o, res)
	}
	// A document with a finding must also parse: say so when it does not.
	// Large documents (CRDs of hundreds of kilobytes) are trusted to the
	// line scanner: parsing them costs more than the whole rest of a scan.
	if len(res.Findings) > before && !doc.templated && doc.end-doc.start <= maxValidatedDoc && !plainYAML(data[doc.start:doc.end]) {
		var n yaml3.Node
		if err := yaml3.Unmarshal(data[doc.start:doc.end], &n); err != nil {
			res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: doc.startLine,
				Reason: "document does not parse (objects read line by line): " + yamlErr(err, doc.startLine-1)})
		}
	}
}

func nearest(vals []lineVal, line int) lineVal {
	best := vals[0]
	for _, v := range vals[1:] {
		if abs(v.line-line) < abs(best.line-line) {
			best = v
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// yamlErr rewrites "yaml: line N: msg" to the file's line numbering.
func yamlErr(err error, base int) string {
	msg := err.Error()
	var n int
	var rest string
	if _, e := fmt.Sscanf(msg, "yaml: line %d:", &n); e == nil {
		if i := strings.Index(msg, ": "); i >= 0 {
			if j := strings.Index(msg[i+2:], ": "); j >= 0 {
				rest = msg[i+2+j+2:]
				return fmt.Sprintf("line %d: %s", n+base, rest)
			}
		}
	}
	return oneLine(msg)
}

// parseYAMLDoc parses one document in full and reports its objects.
func (s *ManifestScanner) parseYAMLDoc(name string, doc []byte, base int, res *ManifestResult) {
	var n yaml3.Node
	if err := yaml3.Unmarshal(doc, &n); err != nil {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: base + 1,
			Reason: "does not parse: " + yamlErr(err, base)})
		return
	}
	if n.Kind == yaml3.DocumentNode && len(n.Content) > 0 {
		s.node(name, n.Content[0], base, 0, res)
	}
}

// node reports the object a YAML mapping node holds, recursing into List
// items and decoding Helm release Secrets.
func (s *ManifestScanner) node(name string, n *yaml3.Node, base, depth int, res *ManifestResult) {
	if n == nil || n.Kind != yaml3.MappingNode || depth > 8 {
		return
	}
	var o object
	var items, data *yaml3.Node
	var typ, owner string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "apiVersion":
			o.apiVersion = scalar(v)
			if o.line == 0 || k.Line < o.line {
				o.line = k.Line
			}
		case "kind":
			o.kind = scalar(v)
			if o.line == 0 || k.Line < o.line {
				o.line = k.Line
			}
		case "metadata":
			o.name = scalar(mapGet(v, "name"))
			o.namespace = scalar(mapGet(v, "namespace"))
			owner = scalar(mapGet(mapGet(v, "labels"), "owner"))
		case "items":
			items = v
		case "type":
			typ = scalar(v)
		case "data":
			data = v
		}
	}
	if o.line > 0 {
		o.line += base
	}
	if isListKind(o.kind) && items != nil && items.Kind == yaml3.SequenceNode {
		for _, it := range items.Content {
			s.node(name, it, base, depth+1, res)
		}
		return
	}
	if o.apiVersion == "" && o.kind == "" {
		return
	}
	s.emit(name, o, res)
	if rel := scalar(mapGet(data, "release")); rel != "" && (typ == "helm.sh/release.v1" || strings.EqualFold(owner, "helm")) {
		s.releaseInFile(name, o, rel, o.kind == "Secret", res)
	}
}

// releaseInFile scans the manifests of a Helm release record found in a
// Secret or ConfigMap manifest.
func (s *ManifestScanner) releaseInFile(name string, o object, data string, secret bool, res *ManifestResult) {
	var rel HelmRelease
	var err error
	if secret {
		rel, err = DecodeReleaseData(data, s.MaxRelease)
	} else {
		rel, err = DecodeRelease([]byte(data), s.MaxRelease)
	}
	if err != nil {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: o.line,
			Reason: fmt.Sprintf("Helm release record %s: %v", o.name, err)})
		return
	}
	s.scanRelease(name, o.line, rel, res)
}

func (s *ManifestScanner) scanRelease(name string, line int, rel HelmRelease, res *ManifestResult) {
	for _, m := range rel.Manifests {
		var sub ManifestResult
		s.scanYAML(name, []byte(m), 0, &sub)
		for _, f := range sub.Findings {
			f.Who = "helm release " + rel.Namespace + "/" + rel.Name
			f.Detail = strings.TrimSpace(fmt.Sprintf("in %s (chart %s %s) %s", releaseLocation(rel.Namespace, rel.Name, rel.Revision), rel.Chart, rel.ChartVersion, f.Detail))
			f.Line, f.Location = line, fileLine(name, line)
			res.Findings = append(res.Findings, f)
		}
		res.Objects += sub.Objects
	}
}

func mapGet(n *yaml3.Node, key string) *yaml3.Node {
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml3.Node) string {
	if n == nil || n.Kind != yaml3.ScalarNode {
		return ""
	}
	return n.Value
}

// jsonObject is the part of an object the JSON reader needs.
type jsonObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Type string `json:"type"`
	Data struct {
		Release string `json:"release"`
	} `json:"data"`
}

// scanJSON reads one JSON value after another (a file, a JSON List or a
// stream of concatenated objects). It returns false, having reported
// nothing, when the first value is not JSON.
func (s *ManifestScanner) scanJSON(name string, data []byte, base int, res *ManifestResult) bool {
	lines := lineCounter{data: data}
	if json.Valid(data) {
		// One value, as most files hold: what the decoder below would
		// read, without copying the file into its buffers as it goes
		// (a tenth of a scan's allocations on the corpus).
		start := leadingSpace(data)
		end := len(data)
		for end > start && isJSONSpace(data[end-1]) {
			end--
		}
		s.jsonValue(name, data[start:end], base+lines.at(start)-1, 0, res)
		return true
	}
	return s.scanJSONStream(name, data, base, res)
}

// scanJSONStream is scanJSON for anything but one valid value: a stream
// of values, or input that is not JSON (false at the first value).
func (s *ManifestScanner) scanJSONStream(name string, data []byte, base int, res *ManifestResult) bool {
	lines := lineCounter{data: data}
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		if firstNonSpace(data[dec.InputOffset():]) == 0 {
			return true
		}
		start := int(dec.InputOffset()) + leadingSpace(data[dec.InputOffset():])
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if n == 0 {
				return false
			}
			line := lines.at(start)
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line = lines.at(int(se.Offset))
			}
			res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: base + line,
				Reason: "does not parse as JSON: " + err.Error()})
			return true
		}
		s.jsonValue(name, raw, base+lines.at(start)-1, 0, res)
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func leadingSpace(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return i
	}
	return len(b)
}

// lineCounter maps byte offsets to 1-based lines, for increasing offsets.
type lineCounter struct {
	data []byte
	off  int
	line int
}

func (c *lineCounter) at(off int) int {
	if off > len(c.data) {
		off = len(c.data)
	}
	if off < c.off {
		c.off, c.line = 0, 0
	}
	c.line += bytes.Count(c.data[c.off:off], []byte{'\n'})
	c.off = off
	return c.line + 1
}

// jsonValue handles one JSON value whose first byte is on line base+1.
func (s *ManifestScanner) jsonValue(name string, raw []byte, base, depth int, res *ManifestResult) {
	if depth > 8 {
		return
	}
	switch firstNonSpace(raw) {
	case '[':
		s.jsonArray(name, raw, base, depth, res)
		return
	case '{':
	default:
		return
	}
	var o jsonObject
	if err := json.Unmarshal(raw, &o); err != nil {
		// A value that is valid JSON but not an object shape we read
		// (for example a string where metadata should be).
		res.Skipped = append(res.Skipped, Skipped{Source: SourceManifests, File: name, Line: base + 1,
			Reason: "not a Kubernetes object: " + err.Error()})
		return
	}
	if isListKind(o.Kind) {
		if items := jsonField(raw, "items"); items != nil {
			s.jsonArray(name, items.raw, base+items.line-1, depth, res)
			return
		}
	}
	if o.APIVersion == "" && o.Kind == "" {
		return
	}
	line := base + 1
	if f := jsonField(raw, "apiVersion"); f != nil {
		line = base + f.line
	}
	obj := object{apiVersion: o.APIVersion, kind: o.Kind, name: o.Metadata.Name, namespace: o.Metadata.Namespace, line: line}
	s.emit(name, obj, res)
	if o.Data.Release != "" && (o.Type == "helm.sh/release.v1" || strings.EqualFold(o.Metadata.Labels["owner"], "helm")) {
		s.releaseInFile(name, obj, o.Data.Release, o.Kind == "Secret", res)
	}
}
