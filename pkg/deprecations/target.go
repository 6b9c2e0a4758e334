package deprecations

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// TargetSpec is a parsed --target value: an absolute release, or N minors
// after the server's ("" means one).
type TargetSpec struct {
	// Release is the absolute release; zero when relative.
	Release apilifecycle.Release
	// Minors is N of +N (1 for ""), when relative.
	Minors int
	// Raw is the value as given.
	Raw string
}

// Relative reports whether the target is counted from the server's release.
func (t TargetSpec) Relative() bool { return t.Release.IsZero() }

// ParseTarget reads a --target value: v1.35 or 1.35, or +N minors after the
// server (+1, +2; "" is +1).
func ParseTarget(s string) (TargetSpec, error) {
	t := strings.TrimSpace(s)
	spec := TargetSpec{Raw: s, Minors: 1}
	if t == "" {
		return spec, nil
	}
	if rest, ok := strings.CutPrefix(t, "+"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 || n > 20 {
			return spec, fmt.Errorf("invalid --target %q: want +1, +2 or a release such as v1.35", s)
		}
		spec.Minors = n
		return spec, nil
	}
	r, err := apilifecycle.ParseRelease(t)
	if err != nil {
		return spec, fmt.Errorf("invalid --target %q: want +1, +2 or a release such as v1.35", s)
	}
	spec.Release, spec.Minors = r, 0
	return spec, nil
}

// Resolve turns the target into a release: an absolute one as given, a
// relative one counted from base (the server's release, or for files alone
// the built-in table's).
func (t TargetSpec) Resolve(base apilifecycle.Release) (apilifecycle.Release, error) {
	if !t.Relative() {
		return t.Release, nil
	}
	if base.IsZero() {
		return base, fmt.Errorf("cannot tell the server's release to resolve --target %q", t.Raw)
	}
	return base.Add(t.Minors), nil
}

// BuiltinRelease is the Kubernetes release of the built-in table
// (k8s.io/api v0.N is Kubernetes 1.N).
func BuiltinRelease() apilifecycle.Release {
	s := apilifecycle.BuiltinSource()
	if i := strings.Index(s, "@v0."); i >= 0 {
		if r, err := apilifecycle.ParseRelease("1." + s[i+4:]); err == nil {
			return r
		}
	}
	return apilifecycle.Release{}
}

// KnownAhead is how many minors past the lifecycle data's own release a
// target can still be judged. Under the Kubernetes deprecation policy a
// beta API is served for at least three releases after it is deprecated
// (https://kubernetes.io/docs/reference/using-api/deprecation-policy/, rule
// 4b), so everything removed up to three minors after release N is already
// deprecated, and in the data, at N; a later removal may not be.
const KnownAhead = 3

// CheckTarget refuses a Kubernetes target the lifecycle data of release
// data cannot judge: another major, or more than KnownAhead minors after
// data. It also returns the newest target the data can judge, for the hint.
func CheckTarget(target, data apilifecycle.Release) (newest apilifecycle.Release, err error) {
	newest = data.Add(KnownAhead)
	switch {
	case target.Major != data.Major:
		return newest, fmt.Errorf("--target %s is outside the lifecycle data (Kubernetes %s): only %d.x releases are covered", target, data, data.Major)
	case target.Compare(newest) > 0:
		return newest, fmt.Errorf("--target %s is %d minors ahead of the lifecycle data (Kubernetes %s): removals are known at most %d minors ahead, to %s",
			target, target.Minor-data.Minor, data, KnownAhead, newest)
	}
	return newest, nil
}
