package inference

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations a model Deployment (or its pod template) carries to say what
// one replica loads before it is Ready. The docs (docs/inference.md)
// define them.
const (
	// AnnWeightsBytes is the bytes of weights one replica loads at start, a
	// Kubernetes quantity: "140Gi", "150G", "4M".
	AnnWeightsBytes = "gpufleet.dev/model-weights-bytes"
	// AnnWeightsSource is where the replica loads them from: object-store
	// (the default), registry or shared-fs.
	AnnWeightsSource = "gpufleet.dev/model-weights-source"
)

// Source is where a replica's weights come from; each source has its own
// hydrate bandwidth.
type Source string

// Weight sources.
const (
	SourceObjectStore Source = "object-store"
	SourceRegistry    Source = "registry"
	SourceSharedFS    Source = "shared-fs"
)

// Sources are the weight sources, in the order reports list them.
var Sources = []Source{SourceObjectStore, SourceRegistry, SourceSharedFS}

// ParseSource checks a source name; "" is the default, object-store.
func ParseSource(s string) (Source, error) {
	if s == "" {
		return SourceObjectStore, nil
	}
	for _, k := range Sources {
		if Source(s) == k {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown weight source %q: want object-store, registry or shared-fs", s)
}

// ParseBytes reads a byte count as a Kubernetes quantity ("140Gi", "150G",
// "4M"); it must be positive.
func ParseBytes(s string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count such as 140Gi or 150G", s)
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive byte count such as 140Gi or 150G", s)
	}
	return v, nil
}

// Weights are what one replica of a model loads before it is Ready.
type Weights struct {
	Bytes  int64  `json:"bytes"`
	Source Source `json:"source"`
	// From says where the size was read: annotation, template-annotation
	// or flag.
	From string `json:"from"`
}

// ParseWeightsFlag reads one --weights value: NAMESPACE/NAME=SIZE or
// NAMESPACE/NAME=SIZE@SOURCE.
func ParseWeightsFlag(s string) (key string, w Weights, err error) {
	k, v, ok := strings.Cut(s, "=")
	ns, name, slash := strings.Cut(k, "/")
	if !ok || !slash || ns == "" || name == "" {
		return "", Weights{}, fmt.Errorf("--weights %q: want NAMESPACE/DEPLOYMENT=SIZE[@SOURCE], e.g. serving/llama-70b=140Gi@object-store", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", Weights{}, fmt.Errorf("--weights %q: namespace %q: %s", s, ns, errs[0])
	}
	size, src, _ := strings.Cut(v, "@")
	w.Bytes, err = ParseBytes(size)
	if err != nil {
		return "", Weights{}, fmt.Errorf("--weights %q: %w", s, err)
	}
	if w.Source, err = ParseSource(src); err != nil {
		return "", Weights{}, fmt.Errorf("--weights %q: %w", s, err)
	}
	w.From = "flag"
	return ns + "/" + name, w, nil
}

// weightsFrom reads the annotations of a Deployment, then of its pod
// template; ok is false when neither names a size.
func weightsFrom(deploy, template map[string]string) (w Weights, ok bool, err error) {
	for _, c := range []struct {
		ann  map[string]string
		from string
	}{{deploy, "annotation"}, {template, "template-annotation"}} {
		v, has := c.ann[AnnWeightsBytes]
		if !has {
			continue
		}
		if w.Bytes, err = ParseBytes(v); err != nil {
			return Weights{}, false, fmt.Errorf("annotation %s: %w", AnnWeightsBytes, err)
		}
		if w.Source, err = ParseSource(c.ann[AnnWeightsSource]); err != nil {
			return Weights{}, false, fmt.Errorf("annotation %s: %w", AnnWeightsSource, err)
		}
		w.From = c.from
		return w, true, nil
	}
	return Weights{}, false, nil
}

// Bandwidth is the hydrate bandwidth of each weight source in bytes per
// second: what the object store, registry or shared filesystem serves to
// the cluster's nodes at once, shared by every replica loading from it.
type Bandwidth map[Source]int64

// ParseBandwidth reads --hydrate-bandwidth values, each SOURCE=RATE with
// RATE a byte quantity per second ("1250M/s", "2Gi/s"; the "/s" may be
// left out). A source given twice is an error.
func ParseBandwidth(values []string) (Bandwidth, error) {
	out := Bandwidth{}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			k, rate, ok := strings.Cut(part, "=")
			if !ok {
				return nil, fmt.Errorf("--hydrate-bandwidth %q: want SOURCE=RATE, e.g. object-store=1250M/s", part)
			}
			src, err := ParseSource(k)
			if err != nil || k == "" {
				if err == nil {
					err = fmt.Errorf("empty source")
				}
				return nil, fmt.Errorf("--hydrate-bandwidth %q: %w", part, err)
			}
			if _, dup := out[src]; dup {
				return nil, fmt.Errorf("--hydrate-bandwidth: source %s given twice", src)
			}
			n, err := ParseBytes(strings.TrimSuffix(rate, "/s"))
			if err != nil {
				return nil, fmt.Errorf("--hydrate-bandwidth %q: %w per second", part, err)
			}
			out[src] = n
		}
	}
	return out, nil
}

// Args renders the bandwidth as the --hydrate-bandwidth flag, sources in
// order; nil when empty.
func (b Bandwidth) Args() []string {
	if len(b) == 0 {
		return nil
	}
	var parts []string
	for _, s := range Sources {
		if v, ok := b[s]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d/s", s, v))
		}
	}
	return []string{"--hydrate-bandwidth", strings.Join(parts, ",")}
}

// HydrateTime is how long bytes take at rate bytes per second, rounded up
// to the millisecond; 0 when either is 0.
func HydrateTime(bytes, rate int64) time.Duration {
	if bytes <= 0 || rate <= 0 {
		return 0
	}
	ms := math.Ceil(float64(bytes) / float64(rate) * 1000)
	return time.Duration(ms) * time.Millisecond
}

// FormatBytes prints a byte count in SI units (kB, MB, GB, TB), as storage
// and network rates are quoted.
func FormatBytes(n int64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	f := float64(n)
	i := 0
	for f >= 1000 && i < len(units)-1 {
		f /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// sortedSources returns the sources of m in Sources order.
func sortedSources[V any](m map[Source]V) []Source {
	var out []Source
	for _, s := range Sources {
		if _, ok := m[s]; ok {
			out = append(out, s)
		}
	}
	var rest []Source
	for s := range m {
		known := false
		for _, k := range Sources {
			known = known || s == k
		}
		if !known {
			rest = append(rest, s)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	return append(out, rest...)
}
