package skew

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed Kubernetes version. Vendor suffixes are kept but do
// not take part in the skew rules: v1.30.2-gke.1587003, v1.29.3-eks-ab12cd3,
// v1.28.5+k3s1 and v1.31.0-rc.1 are all minor 1.30/1.29/1.28/1.31.
type Version struct {
	Major int
	Minor int
	Patch int
	// HasPatch is false for a bare minor such as "1.37" or "v1.37".
	HasPatch bool
	// Pre is what follows '-' (rc.1, gke.1587003, eks-ab12cd3).
	Pre string
	// Build is what follows '+' (k3s1).
	Build string
}

// ParseVersion parses a Kubernetes version string with or without the
// leading "v", with or without a patch number, and with vendor
// pre-release or build suffixes.
func ParseVersion(s string) (Version, error) {
	orig := s
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "v"), "V")
	if s == "" {
		return Version{}, fmt.Errorf("empty version")
	}
	var v Version
	if i := strings.IndexByte(s, '+'); i >= 0 {
		v.Build = s[i+1:]
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		v.Pre = s[i+1:]
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("version %q: want MAJOR.MINOR[.PATCH]", orig)
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '+') {
			return Version{}, fmt.Errorf("version %q: %q is not a number", orig, p)
		}
		if n > 1<<20 {
			return Version{}, fmt.Errorf("version %q: %q is too large", orig, p)
		}
		nums[i] = n
	}
	v.Major, v.Minor = nums[0], nums[1]
	if len(nums) == 3 {
		v.Patch, v.HasPatch = nums[2], true
	}
	return v, nil
}

// MustParseVersion parses s and returns the zero Version on error; for
// tests and constants only.
func MustParseVersion(s string) Version {
	v, _ := ParseVersion(s)
	return v
}

// String prints the version the way Kubernetes does (v1.30.2-gke.1587003).
func (v Version) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d.%d", v.Major, v.Minor)
	if v.HasPatch {
		fmt.Fprintf(&b, ".%d", v.Patch)
	}
	if v.Pre != "" {
		b.WriteString("-" + v.Pre)
	}
	if v.Build != "" {
		b.WriteString("+" + v.Build)
	}
	return b.String()
}

// MinorString prints only MAJOR.MINOR ("1.30").
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// IsZero reports whether v is the zero value (no version).
func (v Version) IsZero() bool { return v == Version{} }

// minorIndex orders minors across majors.
func (v Version) minorIndex() int { return v.Major*1000 + v.Minor }

// MinorsAfter returns how many minors v is ahead of o (negative when it is
// behind).
func (v Version) MinorsAfter(o Version) int { return v.minorIndex() - o.minorIndex() }

// MinorOnly returns the version reduced to its minor (v1.30).
func (v Version) MinorOnly() Version { return Version{Major: v.Major, Minor: v.Minor} }

// AddMinors returns the minor n minors after v (n may be negative).
func (v Version) AddMinors(n int) Version {
	return Version{Major: v.Major, Minor: v.Minor + n}
}

// Compare orders versions by major, minor and patch; a release sorts after
// its pre-releases. Vendor suffixes otherwise do not order.
func (v Version) Compare(o Version) int {
	switch {
	case v.Major != o.Major:
		return cmpInt(v.Major, o.Major)
	case v.Minor != o.Minor:
		return cmpInt(v.Minor, o.Minor)
	case v.Patch != o.Patch:
		return cmpInt(v.Patch, o.Patch)
	}
	vr, or := isPreRelease(v.Pre), isPreRelease(o.Pre)
	switch {
	case vr && !or:
		return -1
	case !vr && or:
		return 1
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isPreRelease tells upstream pre-releases (alpha, beta, rc) from vendor
// build suffixes carried after '-' (gke.N, eks-xxxx).
func isPreRelease(pre string) bool {
	for _, p := range []string{"alpha", "beta", "rc"} {
		if strings.HasPrefix(pre, p) {
			return true
		}
	}
	return false
}

// ImageTag returns the tag of a container image reference, without a
// digest ("registry.k8s.io/kube-proxy:v1.37.2@sha256:..." -> "v1.37.2").
func ImageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndexByte(image, '/')
	colon := strings.LastIndexByte(image, ':')
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}

// ImageVersion parses the version in an image tag; tags such as
// "v1.37.2", "1.11.3" and "v1.30.2-eksbuild.1" parse.
func ImageVersion(image string) (Version, error) {
	tag := ImageTag(image)
	if tag == "" {
		return Version{}, fmt.Errorf("image %q has no tag", image)
	}
	v, err := ParseVersion(tag)
	if err != nil {
		return Version{}, fmt.Errorf("image %q: %w", image, err)
	}
	return v, nil
}
