package preflight

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultSettle is how long the events an upgrade is expected to cause
// (SettlingReasons) may keep firing before verify calls them a regression
// (--settle-time).
const DefaultSettle = 15 * time.Minute

// SettlingReasons are the Warning event reasons a node-pool upgrade
// causes in kube-system while its DaemonSet and Deployment pods restart on
// new or rebooted nodes. Each is emitted by the Kubernetes component named
// (k8s.io/kubernetes@v1.37.2):
//   - BackOff, Unhealthy, FailedCreatePodSandBox, NetworkNotReady,
//     FailedMount, FailedKillPod: the kubelet (pkg/kubelet/events/event.go);
//   - NodeNotReady: the node lifecycle controller, on the pods of a node
//     that went NotReady (pkg/controller/util/node/controller_utils.go);
//   - FailedScheduling: the scheduler, while nodes are cordoned or
//     replaced (pkg/scheduler/schedule_one.go).
var SettlingReasons = []string{"BackOff", "Unhealthy", "FailedCreatePodSandBox", "NetworkNotReady", "FailedMount", "FailedKillPod", "NodeNotReady", "FailedScheduling"}

func settling(reason string) bool {
	for _, r := range SettlingReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// WarningFact is every Warning event of kube-system about one object for
// one reason: a pod stands for its controller, so that the pods a
// DaemonSet recreates on new nodes count as one object.
type WarningFact struct {
	Reason string `json:"reason"`
	// Object is kind/name, a pod's controller (daemonset/kube-proxy) or,
	// for a pod without one, the pod.
	Object string `json:"object"`
	// First and Last bound when it fired, Count how often.
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	Count   int32     `json:"count"`
	Message string    `json:"message,omitempty"`
	// Objects is how many objects the events were about (the pods of a
	// DaemonSet on each node it rolled over), Longest the longest time
	// one of them fired (seconds): a rolling upgrade spreads short
	// restarts of many pods over hours, which is not one thing firing
	// for hours. Objects is 0 in a baseline written before they were
	// recorded.
	Objects int32 `json:"objects,omitempty"`
	Longest int64 `json:"longestSeconds,omitempty"`
}

// longest is the longest time one object fired since the baseline (from),
// or the whole span when the fact does not record it.
func (f WarningFact) longest(from time.Time) time.Duration {
	start := f.First
	if start.Before(from) {
		start = from
	}
	span := f.Last.Sub(start)
	if f.Objects > 0 {
		if l := time.Duration(f.Longest) * time.Second; l < span {
			return l
		}
	}
	return span
}

func (f WarningFact) key() string { return f.Reason + "\x00" + f.Object }

// generatedSuffix is the random suffix of a generated pod name and the
// pod-template-hash before it (k8s.io/apimachinery@v0.37.2
// pkg/util/rand/rand.go: String and SafeEncodeString draw from
// "bcdfghjklmnpqrstvwxz2456789"; a ReplicaSet's pods are
// <deployment>-<hash>-<5 characters>).
var (
	podSuffix = regexp.MustCompile(`^(.+)-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	rsSuffix  = regexp.MustCompile(`^(.+)-[bcdfghjklmnpqrstvwxz2456789]{6,10}$`)
)

// eventObject names what an event is about: a kube-system pod by its
// controller (read from the pod when it still exists, else from its
// generated name and the controllers of kube-system), anything else by
// kind and name.
func eventObject(ref corev1.ObjectReference, pods map[string]*corev1.Pod, controllers map[string]string) string {
	if ref.Kind != "Pod" {
		return strings.ToLower(ref.Kind) + "/" + ref.Name
	}
	if p := pods[ref.Name]; p != nil {
		for _, o := range p.OwnerReferences {
			if o.Controller == nil || !*o.Controller {
				continue
			}
			if o.Kind == "ReplicaSet" {
				if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(o.Name, "-"+h) {
					return "deployment/" + strings.TrimSuffix(o.Name, "-"+h)
				}
			}
			return strings.ToLower(o.Kind) + "/" + o.Name
		}
		return "pod/" + ref.Name
	}
	if m := podSuffix.FindStringSubmatch(ref.Name); m != nil {
		if c := controllers[m[1]]; strings.HasPrefix(c, "daemonset/") {
			return c
		}
		if m := rsSuffix.FindStringSubmatch(m[1]); m != nil {
			if c := controllers[m[1]]; strings.HasPrefix(c, "deployment/") {
				return c
			}
		}
	}
	return "pod/" + ref.Name
}

// warningFacts groups the Warning events of kube-system per reason and
// object.
func warningFacts(evs []corev1.Event, pods []*corev1.Pod, controllers map[string]string) []WarningFact {
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	m := map[string]*WarningFact{}
	type span struct{ first, last time.Time }
	spans := map[string]map[string]*span{} // per fact, per object the events were about
	for i := range evs {
		e := &evs[i]
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		last := eventTime(e)
		first := last
		for _, t := range []time.Time{e.FirstTimestamp.Time, e.EventTime.Time} {
			if !t.IsZero() && t.Before(first) {
				first = t
			}
		}
		count := e.Count
		if e.Series != nil && e.Series.Count > count {
			count = e.Series.Count
		}
		if count < 1 {
			count = 1
		}
		f := WarningFact{Reason: e.Reason, Object: eventObject(e.InvolvedObject, byName, controllers), First: first.UTC(), Last: last.UTC(), Count: count, Message: oneLine(e.Message)}
		if len(f.Message) > 200 {
			f.Message = f.Message[:200] + "..."
		}
		obj := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if spans[f.key()] == nil {
			spans[f.key()] = map[string]*span{}
		}
		if sp := spans[f.key()][obj]; sp == nil {
			spans[f.key()][obj] = &span{f.First, f.Last}
		} else {
			if f.First.Before(sp.first) {
				sp.first = f.First
			}
			if f.Last.After(sp.last) {
				sp.last = f.Last
			}
		}
		if cur := m[f.key()]; cur != nil {
			cur.Count += f.Count
			if f.First.Before(cur.First) {
				cur.First = f.First
			}
			if f.Last.After(cur.Last) {
				cur.Last, cur.Message = f.Last, f.Message
			}
			continue
		}
		m[f.key()] = &f
	}
	out := make([]WarningFact, 0, len(m))
	for k, f := range m {
		for _, sp := range spans[k] {
			f.Objects++
			if l := int64(sp.last.Sub(sp.first) / time.Second); l > f.Longest {
				f.Longest = l
			}
		}
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

func eventTime(e *corev1.Event) time.Time {
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		return e.Series.LastObservedTime.Time
	}
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// verifyWarnings compares kube-system's Warning events per reason and
// object with the baseline's. What fired for the same reason and object at
// the baseline is not new. A new event of a reason an upgrade is expected
// to cause (SettlingReasons) is the upgrade settling: it is a regression
// once one object (one pod of a DaemonSet, not the DaemonSet's pods on
// every node the upgrade rolled over) has fired for longer than settle,
// listed (WARN) while it fired within settle of now and may still be
// settling, and tolerated once it has stopped. Any other new reason or
// object is a regression.
func verifyWarnings(base, now Evidence, settle time.Duration) []Regression {
	if settle <= 0 {
		settle = DefaultSettle
	}
	cmd := "kubectl -n kube-system get events --field-selector type=Warning --sort-by=.lastTimestamp"
	before := map[string]bool{}
	for _, f := range base.SystemWarnings {
		before[f.key()] = true
	}
	at := now.CollectedAt
	var out []Regression
	for _, f := range now.SystemWarnings {
		// Event times and CollectedAt have second precision: an event of the
		// baseline's second that the baseline did not record is new.
		if f.Last.Before(base.CollectedAt) || before[f.key()] {
			continue
		}
		start := f.First
		if start.Before(base.CollectedAt) {
			start = base.CollectedAt
		}
		fired := f.longest(base.CollectedAt)
		what := fmt.Sprintf("%s on %s x%d since %s (last %s): %s", f.Reason, f.Object, f.Count, start.Format(time.RFC3339), f.Last.Format(time.RFC3339), f.Message)
		reg := Regression{Kind: RegWarningEvents, Object: f.Object, Command: cmd}
		switch {
		case !settling(f.Reason):
			reg.Status, reg.Message = StatusFail, "new Warning event in kube-system: "+what
		case fired > settle:
			reg.Status, reg.Message = StatusFail, fmt.Sprintf("still firing %s after it started on one object, longer than the %s an upgrade settles in (--settle-time): %s", fired.Round(time.Second), settle, what)
		case at.Sub(f.Last) < settle:
			reg.Status, reg.Message = StatusWarn, fmt.Sprintf("settling: %s; judged once it has had %s (run verify again after %s)", what, settle, f.Last.Add(settle).Format(time.RFC3339))
		default:
			continue // fired while the upgrade settled, and stopped
		}
		out = append(out, reg)
	}
	return out
}
