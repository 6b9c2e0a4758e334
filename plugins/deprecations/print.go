package deprecations

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

// Report is what `kubectl deprecations` prints with -o json|yaml.
type Report struct {
	cli.Header
	// TargetVersion is the release the findings are judged against.
	TargetVersion string             `json:"target"`
	Items         []Item             `json:"items"`
	NotScanned    []dep.Skipped      `json:"notScanned,omitempty"`
	Sources       []dep.SourceStatus `json:"sources"`
	Summary       Summary            `json:"summary"`
}

// Item is one finding with its severity.
type Item struct {
	dep.Finding `json:",inline"`
	// Severity: blocking for removed at the target, warning for deprecated
	// or undeterminable.
	Severity cli.Severity `json:"severity"`
}

// Summary counts the items.
type Summary struct {
	Removed        int `json:"removed"`
	Deprecated     int `json:"deprecated"`
	Undeterminable int `json:"undeterminable"`
	NotScanned     int `json:"notScanned"`
	PartlyScanned  int `json:"partlyScanned"`
}

func newReport(md cli.Metadata, target apilifecycle.Release) *Report {
	return &Report{Header: cli.NewHeader("DeprecationsReport", md), TargetVersion: target.String(), Items: []Item{}}
}

func (r *Report) addSource(st dep.SourceStatus, err error, code *int) {
	if err != nil {
		st.Error = err.Error()
		*code = cli.Worst(*code, cli.ExitCode(err))
	}
	r.Sources = append(r.Sources, st)
}

func (r *Report) failed() string {
	var s []string
	for _, st := range r.Sources {
		if st.Error != "" {
			s = append(s, string(st.Name)+": "+st.Error)
		}
	}
	if n := r.Summary.NotScanned; n > 0 {
		var names []string
		for _, ns := range r.NotScanned {
			if ns.Partial {
				continue
			}
			if len(names) == 3 {
				names = append(names, "...")
				break
			}
			where := ns.File
			if ns.Line > 0 {
				where += ":" + strconv.Itoa(ns.Line)
			}
			names = append(names, where)
		}
		s = append(s, fmt.Sprintf("%s not scanned: %s (each listed on stderr and under notScanned in -o json)", cli.Plural(n, "input"), strings.Join(names, ", ")))
	}
	return strings.Join(s, "; ")
}

func (r *Report) setItems(fs []dep.Finding) {
	r.Items = make([]Item, 0, len(fs))
	for _, f := range fs {
		it := Item{Finding: f, Severity: cli.SeverityWarning}
		switch f.Status {
		case dep.StatusRemoved:
			it.Severity = cli.SeverityBlocking
			r.Summary.Removed++
		case dep.StatusUnknown:
			r.Summary.Undeterminable++
		default:
			r.Summary.Deprecated++
		}
		r.Items = append(r.Items, it)
	}
	sort.SliceStable(r.NotScanned, func(i, j int) bool {
		a, b := r.NotScanned[i], r.NotScanned[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	for _, s := range r.NotScanned {
		if s.Partial {
			r.Summary.PartlyScanned++
		} else {
			r.Summary.NotScanned++
		}
	}
}

func (o *Options) print(r *Report) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Output == cli.OutputJSON {
		// Streamed: a scan of thousands of files holds its findings once,
		// not again as one growing buffer of their JSON.
		head := *r
		head.Items = nil
		return cli.WriteJSONItems(o.Out, head, r.Items)
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, r)
	}
	t := o.findingsTable(false, r)
	o.addRows(&t, r, "")
	if len(r.Items) > 0 {
		if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
			return err
		}
	}
	if err := o.Print.PrintSummary(o.Out, len(r.Items) > 0, r.summaryLine("")); err != nil {
		return err
	}
	o.printNotes(o.ErrOut, r, "")
	return nil
}

// summaryLine says what was found against which release, and what could
// not be scanned: never "nothing found" when a source could not be read.
func (r *Report) summaryLine(prefix string) string {
	s := r.Summary
	var line string
	if len(r.Items) == 0 {
		line = "No deprecated or removed APIs found for " + "v" + r.TargetVersion
		if r.failed() != "" {
			line += " in the sources that could be read"
		}
	} else {
		line = fmt.Sprintf("%d removed, %d deprecated, %d undeterminable at %s", s.Removed, s.Deprecated, s.Undeterminable, "v"+r.TargetVersion)
	}
	if s.NotScanned > 0 {
		line += fmt.Sprintf("; %d not scanned (see stderr or notScanned in -o json)", s.NotScanned)
	}
	if s.PartlyScanned > 0 {
		line += fmt.Sprintf("; %d scanned line by line", s.PartlyScanned)
	}
	if f := r.failed(); f != "" {
		line += "; some sources could not be read"
	}
	return prefix + line + "."
}

// statusWords are the words a finding's status prints.
var statusWords = dep.Statuses

// findingsTable returns the empty findings table, with a CONTEXT column first when
// several contexts are reported together. SOURCE and WHO show only with
// -o wide when the reports have one source and no finding names a
// caller: a manifest scan would repeat one source on every row and have no
// one to name (a Helm release record found in a file names its release in
// DETAIL, with -o wide).
func (o *Options) findingsTable(withContext bool, reps ...*Report) cli.Table {
	narrow := len(reps) > 0
	files := false
	for _, r := range reps {
		if len(r.Sources) != 1 || r.hasCaller() {
			narrow = false
		}
		files = files || r.hasFiles()
	}
	// A cluster source's WHERE repeats WHO or NAME (the audit user, the
	// Helm release, the object): only -o wide shows it unless a file is
	// among the findings.
	whereWide := !narrow && !files
	// NAME, KIND, API and WHERE (the file path relative to the scanned
	// folder, or the object) are what a user looks up or opens, and stay
	// whole like the context; WHO (a user agent can be long) and
	// REPLACEMENT are shortened first, and REPLACEMENT is left to -o wide
	// when the names leave it no room.
	cols := []cli.Column{
		{Name: cli.StatusColumn}, {Name: "SOURCE", Wide: narrow},
		{Name: "NAME"}, {Name: "KIND"}, {Name: "API"},
		{Name: "DEPRECATED", Wide: true}, {Name: "REMOVED"},
		{Name: "WHO", Wide: narrow, Shrink: true, Min: 12, Elide: cli.ElideMiddle},
		{Name: "COUNT", Wide: true}, {Name: "LAST-SEEN", Wide: true},
		{Name: "WHERE", Wide: whereWide},
		{Name: "REPLACEMENT", Shrink: true, Min: 18, Elide: cli.ElideMiddle, Drop: true},
		{Name: "AVAILABLE", Wide: true}, {Name: "DETAIL", Wide: true},
	}
	if withContext {
		cols = append([]cli.Column{{Name: "CONTEXT"}}, cols...)
	}
	return cli.Table{Columns: cols}
}

// hasFiles reports whether a finding was read from a file.
func (r *Report) hasFiles() bool {
	for _, it := range r.Items {
		if it.File != "" {
			return true
		}
	}
	return false
}

// hasCaller reports whether a finding names who called or wrote: a user,
// field manager or Helm release of the cluster (manifests name none).
func (r *Report) hasCaller() bool {
	for _, it := range r.Items {
		if it.UserAgent != "" || (it.Who != "" && it.Source != dep.SourceManifests) {
			return true
		}
	}
	return false
}

// addRows adds a row per finding of r, led by context when it is not "".
// File paths are shown relative to the scanned arguments (-f).
func (o *Options) addRows(t *cli.Table, r *Report, context string) {
	c := o.Print.Colorizer(o.Out)
	base := dep.DisplayBase(o.Filenames)
	for _, it := range r.Items {
		f := it.Finding
		status := f.Status.Word().String()
		kind := f.Kind
		if kind == "" {
			kind = f.Resource
		}
		if f.Subresource != "" {
			kind += "/" + f.Subresource
		}
		api := f.APIVersion
		if f.Undeterminable {
			api = "? (" + strings.Join(f.Candidates, ", ") + ")"
		}
		who := f.Who
		if f.UserAgent != "" {
			who = strings.TrimSpace(who + " (" + f.UserAgent + ")")
		}
		if f.Verb != "" && f.Source == dep.SourceAudit {
			who += " " + f.Verb
		}
		cnt := ""
		if f.Count > 0 {
			cnt = strconv.FormatInt(f.Count, 10)
		}
		last := ""
		if !f.LastSeen.IsZero() {
			last = f.LastSeen.Format("2006-01-02T15:04:05Z")
		}
		detail := f.Detail
		if f.Hint != "" {
			detail = strings.TrimSpace(detail + "; hint: " + f.Hint)
		}
		row := []string{c.Status(status), string(f.Source), shortTemplates(f.ObjectName()), kind, shortTemplates(api),
			f.Deprecated.String(), f.Removed.String(), who, cnt, last, f.DisplayLocation(base), replacement(f), available(f), detail}
		if context != "" {
			row = append([]string{context}, row...)
		}
		t.AddRow(row...)
	}
}

// replacement is the apiVersion to write instead (with the kind when it
// changes): what a user pastes, so the table never shortens it. A
// replacement this cluster does not serve yet says so.
func replacement(f dep.Finding) string {
	if f.Replacement == "" {
		return ""
	}
	// The kind is said once, in KIND, when it stays the same.
	repl := f.Replacement
	if f.Kind != "" && strings.HasSuffix(repl, " "+f.Kind) {
		repl = strings.TrimSuffix(repl, " "+f.Kind)
	}
	if f.ReplacementServed != nil && !*f.ReplacementServed {
		repl += " (not served now)"
	}
	return repl
}

// available says since when the replacement exists and whether this
// cluster serves it (-o wide).
func available(f dep.Finding) string {
	var extra []string
	if !f.ReplacementAvailable.IsZero() {
		extra = append(extra, "since "+f.ReplacementAvailable.String())
	}
	if f.ReplacementServed != nil {
		if *f.ReplacementServed {
			extra = append(extra, "served now")
		} else {
			extra = append(extra, "not served now")
		}
	}
	return strings.Join(extra, ", ")
}

// shortTemplates shortens each unrendered template action in s ("{{
// include "x.fullname" . }}") to "{{…}}" for the table: a name from an
// unrendered chart would otherwise be the widest cell of the table. -o json
// has the name as written.
func shortTemplates(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString("{{…}}")
		s = s[i+j+2:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s)
	return b.String()
}

const maxNotes = 50

// printNotes writes what was not scanned and source notes to stderr,
// each line after prefix.
func (o *Options) printNotes(w io.Writer, r *Report, prefix string) {
	n := 0
	partial := 0
	base := dep.DisplayBase(o.Filenames)
	for _, s := range r.NotScanned {
		if s.Partial {
			partial++
			continue
		}
		n++
		if n > maxNotes {
			continue
		}
		loc := dep.RelativePath(base, s.File)
		if s.Line > 0 {
			loc = fmt.Sprintf("%s:%d", loc, s.Line)
		}
		line := fmt.Sprintf("not scanned: %s: %s", loc, s.Reason)
		if s.Hint != "" {
			line += " (hint: " + s.Hint + ")"
		}
		fmt.Fprintln(w, prefix+line)
	}
	if n > maxNotes {
		fmt.Fprintf(w, "%snot scanned: %d more; -o json lists them all\n", prefix, n-maxNotes)
	}
	if partial > 0 {
		fmt.Fprintf(w, "%snote: %s with unrendered template syntax %s scanned line by line for literal apiVersion and kind; render %s for a full scan: %s\n", prefix, cli.Plural(partial, "file"), cli.Agree(partial, "was", "were"), cli.Agree(partial, "it", "them"), dep.TemplateHint)
	}
	for _, s := range r.Sources {
		if s.Note != "" {
			fmt.Fprintf(w, "%snote: %s: %s\n", prefix, s.Name, s.Note)
		}
	}
}
