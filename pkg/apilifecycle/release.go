package apilifecycle

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a Kubernetes minor release such as 1.25. The zero value means
// "unknown" or "never" (an API with no removal release).
type Release struct {
	Major int
	Minor int
}

// R returns the release major.minor.
func R(major, minor int) Release { return Release{Major: major, Minor: minor} }

// ParseRelease reads "1.25", "v1.25", "v1.25.3" or "1.25.0-beta.1"; the
// patch and pre-release parts are ignored. An empty string is the zero
// Release.
func ParseRelease(s string) (Release, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Release{}, nil
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "v"), "V")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Release{}, fmt.Errorf("invalid release %q: want major.minor such as v1.35", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 || major > 99 || minor > 999 {
		return Release{}, fmt.Errorf("invalid release %q: want major.minor such as v1.35", s)
	}
	if len(parts) == 3 {
		if _, err := strconv.Atoi(parts[2]); err != nil {
			return Release{}, fmt.Errorf("invalid release %q: want major.minor such as v1.35", s)
		}
	}
	return Release{Major: major, Minor: minor}, nil
}

// IsZero reports whether the release is unknown.
func (r Release) IsZero() bool { return r.Major == 0 && r.Minor == 0 }

// String returns "1.25", or "" for the zero Release.
func (r Release) String() string {
	if r.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%d", r.Major, r.Minor)
}

// Compare returns -1, 0 or 1 as r is before, equal to or after o.
func (r Release) Compare(o Release) int {
	switch {
	case r.Major != o.Major:
		if r.Major < o.Major {
			return -1
		}
		return 1
	case r.Minor < o.Minor:
		return -1
	case r.Minor > o.Minor:
		return 1
	}
	return 0
}

// AtOrBefore reports whether r is known and not later than o.
func (r Release) AtOrBefore(o Release) bool { return !r.IsZero() && r.Compare(o) <= 0 }

// Add returns the release n minors after r.
func (r Release) Add(n int) Release { return Release{Major: r.Major, Minor: r.Minor + n} }

// MarshalText writes the release as "1.25" (empty for the zero Release).
func (r Release) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a release written by MarshalText or ParseRelease.
func (r *Release) UnmarshalText(b []byte) error {
	v, err := ParseRelease(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
