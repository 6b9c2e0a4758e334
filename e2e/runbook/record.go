package runbooke2e

import (
	"fmt"
	"strings"
	"sync"
)

// Call is one request a recording endpoint answered.
type Call struct {
	// Service is eks, gke, aks or aad; Op the API operation
	// (UpdateClusterVersion, projects.locations.clusters.update, ...).
	Service string `json:"service"`
	Op      string `json:"op"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Body    string `json:"body,omitempty"`
	// Mutating is set for a call that changes the provider's state.
	Mutating bool `json:"mutating,omitempty"`
	// Target is the cluster, or cluster/pool, or cluster/addon it acts on;
	// Version the version it asks for.
	Target  string `json:"target,omitempty"`
	Version string `json:"version,omitempty"`
	// Status is the HTTP status answered; Error the provider's error code
	// and message when it refused.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

func (c Call) String() string {
	s := fmt.Sprintf("%s %s %s %s -> %d", c.Service, c.Op, c.Method, c.Path, c.Status)
	if c.Body != "" {
		s += " body " + c.Body
	}
	if c.Error != "" {
		s += ": " + c.Error
	}
	return s
}

// Recorder keeps the calls of the block running now.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
}

// Add records a call.
func (r *Recorder) Add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Take returns the calls recorded since the last Take and forgets them.
func (r *Recorder) Take() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// Format lists calls one per line.
func Format(calls []Call) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString("    " + c.String() + "\n")
	}
	return b.String()
}
