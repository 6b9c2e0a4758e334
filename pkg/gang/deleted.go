package gang

// The record of the pods a run deleted itself (drain_delete.go): kept on
// the gang's stop object beside the rest of its stop record, so that the
// run's report, status and restore say exactly which pods gang-drain
// deleted and which their controllers did, from any shell and after an
// interrupted run.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// AnnDeletedPods is the annotation on a gang's stop object that holds its
// DeletedPods record (JSON, pod names grouped by Job).
const AnnDeletedPods = StatePrefix + "deleted-pods"

// PodsByJob maps a Job's name to names of its pods, each list sorted.
type PodsByJob map[string][]string

// Len counts the pods.
func (m PodsByJob) Len() int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}

// Has reports whether the pod of job is listed.
func (m PodsByJob) Has(job, pod string) bool {
	ps := m[job]
	i := sort.SearchStrings(ps, pod)
	return i < len(ps) && ps[i] == pod
}

// Names lists every pod, sorted.
func (m PodsByJob) Names() []string {
	var out []string
	for _, ps := range m {
		out = append(out, ps...)
	}
	sort.Strings(out)
	return out
}

// rename maps every pod name through f (nil for an empty map).
func (m PodsByJob) rename(f func(job, pod string) string) PodsByJob {
	if len(m) == 0 {
		return nil
	}
	out := PodsByJob{}
	for job, ps := range m {
		for _, p := range ps {
			out = out.add(job, f(job, p))
		}
	}
	return out
}

func (m PodsByJob) add(job, pod string) PodsByJob {
	if m == nil {
		m = PodsByJob{}
	}
	ps := m[job]
	if i := sort.SearchStrings(ps, pod); i == len(ps) || ps[i] != pod {
		m[job] = slices.Insert(ps, i, pod)
	}
	return m
}

// DeletedPods records the pods of a stopped gang that a run deleted itself
// once their Jobs were suspended.
type DeletedPods struct {
	// Run is the run that deleted them.
	Run string `json:"run"`
	// Count is the number of Deleted pods.
	Count int `json:"count"`
	// Deleted are the pods whose deletion the API server accepted from the
	// run. Each delete carried the pod's UID and resourceVersion as
	// preconditions, so a pod that another client (its Job controller)
	// deleted or changed first is not among them.
	Deleted PodsByJob `json:"deleted"`
	// Deleting are the pods the run set out to delete: written before its
	// first delete and cleared when its deletes end, so that a record left
	// with Deleting set belongs to an interrupted run.
	Deleting PodsByJob `json:"deleting,omitempty"`
	// Unconfirmed are pods whose deletion the run may have issued without
	// learning the answer (an attempt interrupted after it set out to
	// delete them, a connection lost during a delete) and that were gone
	// or going when the run looked again: the run or their Job controller
	// deleted them, which the record cannot tell.
	Unconfirmed PodsByJob `json:"unconfirmed,omitempty"`
	// Unfinalized counts the patches removing a pod's Job tracking
	// finalizer that the API server accepted from the run (one whose Job
	// controller had removed it first answers the pod unchanged).
	Unfinalized int `json:"unfinalized"`
}

// encode writes the record as the annotation holds it: each pod named by
// what follows "<job>-" in its name (the Job controller names its pods
// <job>-[<index>-]<suffix>), so that a record of thousands of ranks stays
// in tens of kilobytes. A name without that prefix is kept whole, marked
// by a leading "=" (which no pod name contains).
func (r *DeletedPods) encode() string {
	short := func(job, p string) string {
		if s, ok := strings.CutPrefix(p, job+"-"); ok && s != "" {
			return s
		}
		return "=" + p
	}
	w := *r
	w.Count = r.Deleted.Len()
	w.Deleted, w.Deleting, w.Unconfirmed = r.Deleted.rename(short), r.Deleting.rename(short), r.Unconfirmed.rename(short)
	if w.Deleted == nil {
		w.Deleted = PodsByJob{}
	}
	b, _ := json.Marshal(w)
	return string(b)
}

// ParseDeletedPods reads the record an AnnDeletedPods annotation holds; an
// empty value is no record (nil, nil).
func ParseDeletedPods(s string) (*DeletedPods, error) {
	if s == "" {
		return nil, nil
	}
	var r DeletedPods
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("reading the %s record: %w", AnnDeletedPods, err)
	}
	long := func(job, p string) string {
		if whole, ok := strings.CutPrefix(p, "="); ok {
			return whole
		}
		return job + "-" + p
	}
	r.Deleted, r.Deleting, r.Unconfirmed = r.Deleted.rename(long), r.Deleting.rename(long), r.Unconfirmed.rename(long)
	if r.Deleted == nil {
		r.Deleted = PodsByJob{}
	}
	r.Count = r.Deleted.Len()
	return &r, nil
}
