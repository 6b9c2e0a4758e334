package deprecations

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Audit annotations the apiserver sets on requests to deprecated APIs.
const (
	AnnotationDeprecated     = "k8s.io/deprecated"
	AnnotationRemovedRelease = "k8s.io/removed-release"
)

// DefaultMaxAuditLine bounds one audit log line.
const DefaultMaxAuditLine = 16 << 20

// maxBadLines is how many unreadable lines are reported per file; the rest
// are counted.
const maxBadLines = 20

// AuditReader reads apiserver audit logs (JSON lines, plain or gzip) and
// groups the requests to deprecated APIs by user, user agent, verb,
// resource and version, with counts and first and last times. It streams:
// memory grows with the number of distinct callers, not with the log.
type AuditReader struct {
	// MaxLine bounds one line (DefaultMaxAuditLine when 0); longer lines
	// are reported and skipped.
	MaxLine int
}

type auditKey struct {
	user, agent, verb, group, version, resource, subresource string
}

type auditAgg struct {
	count       int64
	first, last time.Time
	removed     string
}

// AuditResult is the outcome of reading audit logs.
type AuditResult struct {
	Findings []Finding
	Skipped  []Skipped
	// Lines and Events count what was read: every line, and the events
	// that carried the deprecation annotation.
	Lines  int64
	Events int64
}

// auditEvent is the part of an audit.k8s.io/v1 Event the reader needs.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
	} `json:"objectRef"`
	RequestReceived time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time         `json:"stageTimestamp"`
	Annotations     map[string]string `json:"annotations"`
}

// Read reads the named files in order ("-" is stdin). Rotated sets are
// passed as several files; gzip is detected by content. A file that
// cannot be opened, and one from which no audit event was read (empty, or
// no line an event), are an *ErrBadInput of --audit-log.
func (a *AuditReader) Read(ctx context.Context, paths []string, stdin io.Reader) (AuditResult, error) {
	agg := map[auditKey]*auditAgg{}
	var res AuditResult
	for _, p := range paths {
		name := p
		var r io.Reader
		if p == "-" {
			name = "<stdin>"
			if stdin == nil {
				stdin = bytes.NewReader(nil)
			}
			r = stdin
		} else {
			f, err := os.Open(p)
			if err != nil {
				return res, badPath("--audit-log", p, err)
			}
			defer f.Close()
			r = f
		}
		lines, skipped := res.Lines, len(res.Skipped)
		events, bad, err := a.readOne(ctx, name, r, agg, &res)
		if err != nil {
			return res, err
		}
		if events == 0 {
			// Nothing read from this log: refused, with what was read.
			notRead := ""
			if bad > 0 {
				sk := res.Skipped[skipped]
				notRead = fmt.Sprintf(", %s not an event, the first: line %d: %s", cli.Plural(bad, "line"), sk.Line, sk.Reason)
			}
			return res, &ErrBadInput{Flag: "--audit-log", Path: p,
				Err: fmt.Errorf("holds no audit event (%s read, 0 events%s; the apiserver writes one JSON event a line)", cli.Plural(int(res.Lines-lines), "line"), notRead)}
		}
	}
	res.Findings = auditFindings(agg)
	return res, nil
}

// ReadStream reads one audit log stream; name is used in reports.
func (a *AuditReader) ReadStream(ctx context.Context, name string, r io.Reader) (AuditResult, error) {
	agg := map[auditKey]*auditAgg{}
	var res AuditResult
	_, _, err := a.readOne(ctx, name, r, agg, &res)
	res.Findings = auditFindings(agg)
	return res, err
}

// readOne reads one stream into agg and res; it returns how many lines
// were audit.k8s.io/v1 Events, deprecated or not, and how many could not
// be read.
func (a *AuditReader) readOne(ctx context.Context, name string, r io.Reader, agg map[auditKey]*auditAgg, res *AuditResult) (int64, int, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	if magic, _ := br.Peek(2); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			res.Skipped = append(res.Skipped, Skipped{Source: SourceAudit, File: name, Reason: "not valid gzip: " + err.Error()})
			return 0, 1, nil
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<20)
	}
	maxLine := a.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxAuditLine
	}
	var (
		line    int
		objects int64
		bad     int
		long    []byte
		tooLong bool
	)
	badLine := func(reason string) {
		bad++
		if bad <= maxBadLines {
			res.Skipped = append(res.Skipped, Skipped{Source: SourceAudit, File: name, Line: line, Reason: reason})
		}
	}
	marker := []byte(AnnotationDeprecated)
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: collect it up to the bound.
			if !tooLong {
				if len(long)+len(chunk) > maxLine {
					tooLong, long = true, long[:0]
				} else {
					long = append(long, chunk...)
				}
			}
			continue
		}
		if len(chunk) > 0 || len(long) > 0 || tooLong {
			line++
			res.Lines++
			if line%4096 == 0 && ctx.Err() != nil {
				return objects, bad, ctx.Err()
			}
			data := chunk
			if len(long) > 0 {
				data = append(long, chunk...)
			}
			t := bytes.TrimSpace(data)
			switch {
			case tooLong || len(data) > maxLine:
				badLine(fmt.Sprintf("line longer than %d bytes", maxLine))
			case len(t) == 0:
			case t[0] != '{':
				badLine("not a JSON audit event")
			default:
				if reason := notAuditEvent(t); reason != "" {
					badLine(reason)
					break
				}
				objects++
				if bytes.Contains(data, marker) {
					if reason := a.event(data, agg, res); reason != "" {
						badLine(reason)
					}
				}
			}
			long, tooLong = long[:0], false
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			res.Skipped = append(res.Skipped, Skipped{Source: SourceAudit, File: name, Line: line, Reason: "read error: " + err.Error()})
			break
		}
	}
	if bad > maxBadLines {
		res.Skipped = append(res.Skipped, Skipped{Source: SourceAudit, File: name,
			Reason: fmt.Sprintf("%d more lines could not be read", bad-maxBadLines)})
	}
	return objects, bad, nil
}

// auditEventPrefix is how the apiserver's log backend starts every line:
// an audit.k8s.io/v1 Event encoded as JSON, its TypeMeta (kind, then
// apiVersion) the first field (k8s.io/apiserver@v0.37.2
// pkg/apis/audit/v1/types.go, Event; register.go, GroupName and
// SchemeGroupVersion).
var auditEventPrefix = []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1"`)

// notAuditEvent says why a JSON line is not an audit.k8s.io/v1 Event, or
// "" when it is one. The apiserver's own lines are told by their prefix;
// any other line is decoded for its kind and apiVersion.
func notAuditEvent(line []byte) string {
	if bytes.HasPrefix(line, auditEventPrefix) {
		return ""
	}
	var tm struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(line, &tm); err != nil {
		return "not a JSON audit event: " + err.Error()
	}
	if tm.Kind == "Event" && tm.APIVersion == "audit.k8s.io/v1" {
		return ""
	}
	return fmt.Sprintf("kind %q, apiVersion %q, not an audit.k8s.io/v1 Event", tm.Kind, tm.APIVersion)
}

// event folds one line into the aggregate; it returns why the line could
// not be read, or "".
func (a *AuditReader) event(data []byte, agg map[auditKey]*auditAgg, res *AuditResult) string {
	var ev auditEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return "not a JSON audit event: " + err.Error()
	}
	if ev.Annotations[AnnotationDeprecated] != "true" || ev.ObjectRef == nil {
		return ""
	}
	// Count each request once: its final stage, or the start of a watch.
	switch ev.Stage {
	case "ResponseComplete":
		if ev.Verb == "watch" {
			return ""
		}
	case "ResponseStarted":
		if ev.Verb != "watch" {
			return ""
		}
	case "Panic", "":
	default:
		return ""
	}
	res.Events++
	user := ev.User.Username
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		user = ev.ImpersonatedUser.Username + " (as, by " + user + ")"
	}
	k := auditKey{user: user, agent: ev.UserAgent, verb: ev.Verb, group: ev.ObjectRef.APIGroup,
		version: ev.ObjectRef.APIVersion, resource: ev.ObjectRef.Resource, subresource: ev.ObjectRef.Subresource}
	g := agg[k]
	if g == nil {
		g = &auditAgg{}
		agg[k] = g
	}
	g.count++
	ts := ev.RequestReceived
	if ts.IsZero() {
		ts = ev.StageTimestamp
	}
	if !ts.IsZero() {
		if g.first.IsZero() || ts.Before(g.first) {
			g.first = ts
		}
		if ts.After(g.last) {
			g.last = ts
		}
	}
	if rr := ev.Annotations[AnnotationRemovedRelease]; rr != "" {
		g.removed = rr
	}
	return ""
}

func auditFindings(agg map[auditKey]*auditAgg) []Finding {
	out := make([]Finding, 0, len(agg))
	for k, g := range agg {
		f := Finding{
			Source: SourceAudit, Location: "user " + k.user, APIVersion: apilifecycle.JoinAPIVersion(k.group, k.version),
			Resource: k.resource, Subresource: k.subresource, Who: k.user, UserAgent: k.agent, Verb: k.verb,
			Count: g.count, FirstSeen: g.first.UTC(), LastSeen: g.last.UTC(),
		}
		if g.first.IsZero() {
			f.FirstSeen, f.LastSeen = time.Time{}, time.Time{}
		}
		f.server = &serverLifecycle{removed: g.removed}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return strings.Join([]string{a.Who, a.UserAgent, a.Verb, a.APIVersion, a.Resource, a.Subresource}, "\x00") <
			strings.Join([]string{b.Who, b.UserAgent, b.Verb, b.APIVersion, b.Resource, b.Subresource}, "\x00")
	})
	return out
}
