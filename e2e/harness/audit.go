package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// AuditEvent is one completed request in the control plane's audit log
// (AuditLogPath).
type AuditEvent struct {
	Verb        string
	UserAgent   string
	RequestURI  string
	Resource    string
	Subresource string
	Namespace   string
	// Name is the object's name; Code the response's HTTP status code.
	Name string
	Code int
}

// AuditLines counts the lines of the audit log: the mark to pass to
// AuditEvents to read only what came after it.
func AuditLines(t testing.TB, path string) int {
	t.Helper()
	n := 0
	scanAudit(t, path, func([]byte) { n++ })
	return n
}

// AuditEvents returns the completed requests after line skip whose user
// agent starts with agent. The log is written asynchronously: wait a moment
// after the requests before reading.
func AuditEvents(t testing.TB, path string, skip int, agent string) []AuditEvent {
	t.Helper()
	var out []AuditEvent
	line := 0
	scanAudit(t, path, func(b []byte) {
		line++
		if line <= skip {
			return
		}
		var e struct {
			Stage      string `json:"stage"`
			Verb       string `json:"verb"`
			UserAgent  string `json:"userAgent"`
			RequestURI string `json:"requestURI"`
			ObjectRef  *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.UserAgent, agent) || (e.Stage != "" && e.Stage != "ResponseComplete") {
			return
		}
		ev := AuditEvent{Verb: e.Verb, UserAgent: e.UserAgent, RequestURI: e.RequestURI}
		if e.ObjectRef != nil {
			ev.Resource, ev.Subresource, ev.Namespace, ev.Name = e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Namespace, e.ObjectRef.Name
		}
		if e.ResponseStatus != nil {
			ev.Code = e.ResponseStatus.Code
		}
		out = append(out, ev)
	})
	return out
}

// Request names an audited request "VERB RESOURCE" ("get pods", "list
// pods", "create pods/eviction" with its subresource), or "VERB URI" when
// it was not for a resource.
func (e AuditEvent) Request() string {
	if e.Resource == "" {
		return e.Verb + " " + e.RequestURI
	}
	if e.Subresource != "" {
		return e.Verb + " " + e.Resource + "/" + e.Subresource
	}
	return e.Verb + " " + e.Resource
}

// CountAudit counts AuditEvents(t, path, skip, agent) by key.
func CountAudit(t testing.TB, path string, skip int, agent string, key func(AuditEvent) string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range AuditEvents(t, path, skip, agent) {
		out[key(e)]++
	}
	return out
}

func scanAudit(t testing.TB, path string, line func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
